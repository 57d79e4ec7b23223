"""Rerun the README's walk-through and write each command's real output back into it.

Each `$ tuner ...` line of a ```console block runs in order in one fresh directory (as
tests/test_readme.py runs them). The shown output keeps its shape: as many leading lines as
the README showed before a `...` line, the `...`, and as many trailing lines as it showed after
it; an output shown whole is replaced whole. Run it after a change to the model's numbers:

    python scripts/refresh_readme.py
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
README = ROOT / "README.md"
_BLOCK = re.compile(r"^```console\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _run(command: str) -> list[str]:
    from click.testing import CliRunner

    from tuner.cli import main

    result = CliRunner().invoke(main, shlex.split(command)[1:])
    if result.exit_code != 0:
        raise SystemExit(f"$ {command} failed ({result.exit_code}):\n{result.output}")
    return result.stdout.rstrip("\n").splitlines()


def _reshape(shown: list[str], printed: list[str]) -> list[str]:
    if "..." not in shown:
        return printed
    cut = shown.index("...")
    head, tail = shown[:cut], shown[cut + 1:]
    body = [*printed[:len(head)], "..."]
    return body + (printed[-len(tail):] if tail else [])


def _refresh_block(block: str) -> str:
    out: list[str] = []
    command, shown = None, []

    def flush() -> None:
        if command is not None:
            out.append(f"$ {command}")
            out.extend(_reshape(shown, _run(command)) if shown else [])

    for line in block.splitlines():
        if line.startswith("$ "):
            flush()
            command, shown = line[2:].strip(), []
        elif command is not None:
            shown.append(line)
    flush()
    return "\n".join(out) + "\n"


def main() -> int:
    text = README.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "search_spaces").symlink_to(ROOT / "search_spaces")
        os.chdir(tmp)
        os.environ.pop("TUNER_STORAGE", None)
        text = _BLOCK.sub(lambda m: "```console\n" + _refresh_block(m.group(1)) + "```", text)
    README.write_text(text, encoding="utf-8")
    print(f"refreshed {README.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
