"""How fast the command line starts: `tuner --help` and `tuner evaluate SPEC` (one fixed spec)
as new processes, wall seconds from start to exit (and CPU seconds, which a shared machine's
load moves less), and what the interpreter alone and the
imports every evaluation needs cost on the same machine: numpy, pydantic, PyYAML and click
imported, then the same with one pydantic model built and validated (`import pydantic` alone
defers most of pydantic; validating a spec needs it: its schema machinery and its plugin
lookup, which imports importlib.metadata).

    python benchmarks/startup.py [--repeats N] [--json]

Every process runs with Python's bytecode cache, as an installed package does (pip compiles
it at install time): PYTHONDONTWRITEBYTECODE is left out of the children's environment, and a
first run of each command, not timed, writes the cache of a source checkout. A command imports
only what it needs: neither `--help` nor `evaluate` imports Optuna, SQLAlchemy or plotly (the
benchmark checks it). The floor's `python -c` processes pay two costs that `evaluate` avoids
(README, Start-up): the interpreter's last garbage collection at exit, and the thread pool
numpy's OpenBLAS starts; a command's time less the floor's is not its imports alone."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_ONE_MODEL = ("import numpy, yaml, click\nfrom pydantic import BaseModel\n"
              "class M(BaseModel):\n    x: int\nM.model_validate({'x': 1})")
FIXED = ROOT / "search_spaces" / "examples" / "gpt3-175b-a100-fixed.yaml"
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import numpy, pydantic, yaml, click": [sys.executable, "-c",
                                            "import numpy, pydantic, yaml, click"],
    "... and one pydantic model validated": [sys.executable, "-c", _ONE_MODEL],
    "tuner --help": [sys.executable, "-m", "tuner", "--help"],
    "tuner evaluate SPEC, first time": [sys.executable, "-m", "tuner", "evaluate", str(FIXED)],
    "tuner evaluate SPEC, again": [sys.executable, "-m", "tuner", "evaluate", str(FIXED)],
}
"""`first time`: each run with an empty cache of answers (tuner.cli.evaluated), so that it
imports, validates and evaluates; `again`: each run finds the answer the untimed first run
cached."""
_HEAVY = ("optuna", "sqlalchemy", "plotly")
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(command: list[str], repeats: int, cache: Path | None = None
          ) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system) of `repeats` new processes; with `cache`
    (a folder) each run has TUNER_CACHE_DIR there, else an empty one of its own."""
    walls, cpus = [], []

    def env(run: int) -> dict[str, str]:
        folder = cache if cache is not None else Path(tempfile.mkdtemp()) / f"cold{run}"
        return {**ENV, "TUNER_CACHE_DIR": str(folder)}

    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env=env(-1))
    for run in range(repeats):
        chosen = env(run)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env=chosen)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def heavy_imports(command: list[str]) -> list[str]:
    """The heavy packages a command imports (python -X importtime)."""
    done = subprocess.run([command[0], "-X", "importtime", *command[1:]], cwd=ROOT,
                          check=True, capture_output=True, text=True, env=ENV)
    names = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
    return sorted(h for h in _HEAVY if h in names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report: dict[str, dict[str, Any]] = {}
    warm = Path(tempfile.mkdtemp()) / "warm"
    for name, command in COMMANDS.items():
        times, cpus = timed(command, args.repeats, warm if name.endswith("again") else None)
        report[name] = {"min_s": min(times), "median_s": statistics.median(times),
                        "min_cpu_s": min(cpus)}
        if name.startswith("tuner"):
            report[name]["heavy_imports"] = heavy_imports(command)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for name, r in report.items():
        extra = ""
        if "heavy_imports" in r:
            extra = f"; imports {', '.join(r['heavy_imports']) or 'no optuna/sqlalchemy/plotly'}"
        print(f"{name:<38} min {r['min_s']:.3f} s, median {r['median_s']:.3f} s, "
              f"CPU min {r['min_cpu_s']:.3f} s{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
