"""What a `tuner serve` process is configured with, and the limits it puts on each request."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_BODY_BYTES", "MAX_SPECS", "ServeConfig"]

MAX_BODY_BYTES = 1 << 20
"""The largest request body accepted (1 MiB: a spec is a few hundred bytes to a few KiB)."""
MAX_SPECS = 64
"""The most specs one POST /v1/evaluate may carry (each is about a millisecond of model)."""


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """The server's settings: the storage URL (never shown unredacted), the bearer token
    (None: no token asked; only for loopback), worker processes per study, their heartbeat
    (seconds), the most studies run at once, and the request limits."""

    storage_url: str
    token: str | None = None
    workers: int = 2
    heartbeat_s: int = 10
    max_studies: int = 4
    max_body_bytes: int = MAX_BODY_BYTES
    max_specs: int = MAX_SPECS
