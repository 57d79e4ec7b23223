"""The library's advice in an HTTP client's words: its errors name the command line's way to
do a thing (`tuner resume NAME`, `--trial N`, `--as spec`, `tuner export`), which a client of
the API (a scheduler, a notebook, with no shell on the server) cannot follow; at the API's
error boundary (tuner.serve.app) each becomes the request that does the same. A message
without such advice is left as it is."""

from __future__ import annotations

import re

__all__ = ["for_http"]

_ADVICE: tuple[tuple[str, str], ...] = (
    (r"run `tuner resume [^`]+` to continue with the stored spec",
     "POST the spec it was made with to continue it"),
    (r"run more trials \(`tuner resume [^`]+`\)",
     "run more trials (POST its spec to /v1/studies again)"),
    (r"`tuner resume [^`]+` (continues|sweeps it again)",
     r"POSTing its spec to /v1/studies again \1"),
    (r"run `tuner search SPEC` with another `name:` to start a new study",
     "POST the spec to /v1/studies with another `name:` to start a new study"),
    (r"(start a new study|run) with `tuner search SPEC`( with a new study name)?",
     "POST a spec with a new `name:` to /v1/studies"),
    (r"\(`tuner export[^`]*` lists them\)", "(GET /v1/studies/{name}/trials lists them)"),
    (r"--trial N picks", "trial=N picks"),
    (r"\(--trial (\d+)\)", r"(trial=\1)"),
    (r"use --as spec", "use as=spec"),
)


def for_http(message: str, study: str | None) -> str:
    """`message` with its command-line advice as requests; `study` (the route's study name,
    if any) fills the routes that name it."""
    for pattern, replacement in _ADVICE:
        filled = replacement.replace("{name}", (study or "NAME").replace("\\", "\\\\"))
        message = re.sub(pattern, filled, message)
    return message
