"""How fast the command line starts: `tuner --help` and `tuner evaluate SPEC` (one fixed spec)
as new processes, wall seconds from start to exit, and what the interpreter alone and the
imports every evaluation needs (numpy, pydantic, PyYAML, click) cost on the same machine.

    python benchmarks/startup.py [--repeats N] [--json]

A command imports only what it needs: neither `--help` nor `evaluate` imports Optuna,
SQLAlchemy or plotly (the benchmark checks it)."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXED = ROOT / "search_spaces" / "examples" / "gpt3-175b-a100-fixed.yaml"
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import numpy, pydantic, yaml, click": [sys.executable, "-c",
                                            "import numpy, pydantic, yaml, click"],
    "tuner --help": [sys.executable, "-m", "tuner", "--help"],
    "tuner evaluate SPEC": [sys.executable, "-m", "tuner", "evaluate", str(FIXED)],
}
_HEAVY = ("optuna", "sqlalchemy", "plotly")


def timed(command: list[str], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - start)
    return out


def heavy_imports(command: list[str]) -> list[str]:
    """The heavy packages a command imports (python -X importtime)."""
    done = subprocess.run([command[0], "-X", "importtime", *command[1:]], cwd=ROOT,
                          check=True, capture_output=True, text=True)
    names = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
    return sorted(h for h in _HEAVY if h in names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = {}
    for name, command in COMMANDS.items():
        times = timed(command, args.repeats)
        report[name] = {"min_s": min(times), "median_s": statistics.median(times)}
        if name.startswith("tuner"):
            report[name]["heavy_imports"] = heavy_imports(command)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for name, r in report.items():
        extra = ""
        if "heavy_imports" in r:
            extra = f"; imports {', '.join(r['heavy_imports']) or 'no optuna/sqlalchemy/plotly'}"
        print(f"{name:<38} min {r['min_s']:.3f} s, median {r['median_s']:.3f} s{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
