"""Check (or refresh) the README's console examples against what `tuner` prints today.

Every `$ tuner ...` line of a ```console block is run in a scratch folder (its own SQLite
studies, so the commands see each other's studies as a user following the README does), and
its output is compared line by line with the lines the README shows under it (up to a `...`
line where the README elides the rest). Timings in parentheses, "(0.9 s)", are not compared:
they depend on the machine's load. Commands that need a server, workers, a file the README
does not ship or a browser (serve, worker, a shared journal storage, report, bad.yaml) are
skipped.

    python scripts/readme_console.py            # list the blocks that differ; exit 1 if any
    python scripts/readme_console.py --apply    # write today's outputs into README.md

--apply keeps the README's own timings. Review the diff before committing it: prose around a
block may quote its numbers.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SKIP = ("tuner serve", "tuner worker", "--storage team.log", "tuner report", "bad.yaml")
_TIMING = re.compile(r"\(\d+(?:\.\d+)? s\)")


def blocks(lines: list[str]) -> list[tuple[int, int, str]]:
    """(index of the command line, index after its output, the command) of each example."""
    found = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("$ tuner "):
            j = i + 1
            while j < len(lines) and not lines[j].startswith(("$ ", "```")):
                j += 1
            found.append((i, j, lines[i][2:]))
            i = j
        else:
            i += 1
    return found


def _shown(old: list[str], got: list[str]) -> tuple[list[str], list[str]]:
    """The lines the README shows and as many of today's (up to its `...`)."""
    if "..." in old:
        k = old.index("...")
        return old[:k], got[:k]
    return old, got


def _norm(text: list[str]) -> list[str]:
    return [_TIMING.sub("(T s)", line.rstrip()) for line in text]


def _keep_timings(old: list[str], new: list[str]) -> list[str]:
    kept = list(new)
    for n, (o, g) in enumerate(zip(old, new, strict=False)):
        timing = _TIMING.search(o)
        if timing:
            kept[n] = _TIMING.sub(timing.group(0), g)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--apply", action="store_true", help="write today's outputs")
    args = parser.parse_args(argv)
    lines = README.read_text(encoding="utf-8").split("\n")
    changes: dict[int, tuple[int, list[str]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(os.environ, COLUMNS="200", TUNER_CACHE_DIR=os.environ.get(
            "TUNER_CACHE_DIR", str(Path(scratch) / "cache")))
        for start, end, command in blocks(lines):
            if any(word in command for word in SKIP):
                continue
            run = command.replace("search_spaces/", f"{ROOT / 'search_spaces'}/")
            done = subprocess.run(run, shell=True, cwd=scratch, env=env, capture_output=True,
                                  text=True, check=False)
            got = (done.stdout + done.stderr).rstrip("\n").split("\n")
            old, new = _shown(lines[start + 1:end], got)
            if _norm(old) == _norm(new):
                continue
            print(f"README.md:{start + 1}: {command}")
            for line in difflib.unified_diff(_norm(old), _norm(new), lineterm="", n=0):
                print(f"  {line}")
            changes[start + 1] = (start + 1 + len(old), _keep_timings(old, new))
    if args.apply and changes:
        out: list[str] = []
        i = 0
        while i < len(lines):
            if i in changes:
                i, new = changes[i]
                out.extend(new)
            else:
                out.append(lines[i])
                i += 1
        README.write_text("\n".join(out), encoding="utf-8")
        print(f"wrote {len(changes)} block(s) into {README}")
    return 1 if changes and not args.apply else 0


if __name__ == "__main__":
    sys.exit(main())
