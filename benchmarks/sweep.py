"""Speed of the exhaustive sweep, end to end: `tuner search SPEC --sampler exhaustive` as a new
process (Python start, imports, spec, enumeration, validity, the cost model, selection and
storing the best plans in a fresh SQLite file), the sweep alone in this process, and where the
end-to-end time goes: each phase timed one after the other in a new process (the interpreter,
the imports before the sweep, the spec and its space, the sweep, the imports of Optuna and
SQLAlchemy, opening a fresh SQLite storage with the study, writing the best plans, and leaving:
the storage closed and the interpreter's exit). The command forks the sweep into a child
process before it imports Optuna (tuner.engine.forked, the objects made until then frozen for
the garbage collector), so the end to end is less than the phases' sum where a second core is
free, and it leaves without the interpreter's last collections (tuner.cli.leaving). The runs
share a cache folder (TUNER_CACHE_DIR) that the first, reported apart, fills: the empty
database Optuna makes, which a new storage file copies (studies.template), and the cost
model's version digest (studies.identity), as a user's second search finds them.

    python benchmarks/sweep.py [--spec FILE] [--pricing] [--repeats N] [--json]

The default space (benchmarks/specs/wide-codesign.yaml) is Llama 3 70B on 40 clusters (five
GPU types, eight sizes) with the whole plan space of each; --pricing adds on-demand and spot
servers (80 clusters), --network two scale-out bandwidths as well (160 clusters). Reports
plans per second (valid plans evaluated / wall seconds, best of the repeats) and the child
process's peak memory (resident set, MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search_spaces import Space, load_spec  # noqa: E402
from tuner.engine.exhaustive import sweep  # noqa: E402

DEFAULT_SPEC = ROOT / "benchmarks" / "specs" / "wide-codesign.yaml"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""The children's environment: with Python's bytecode cache, as an installed package has it."""


def widen(spec_path: Path, folder: Path, *, pricing: bool, network: bool) -> Path:
    """The spec with spot pricing and/or two networks added, written into `folder`."""
    data = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    if pricing:
        data["cluster"].update({"pricing": ["on_demand", "spot"],
                                "revocations_per_node_hour": 0.02})
    if network:
        data["cluster"]["scale_out_bandwidth"] = ["200 Gbit/s", "400 Gbit/s"]
    out = folder / "space.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return out


def end_to_end(spec: Path, folder: Path, run: int
               ) -> tuple[float, dict[str, Any], float, float]:
    """Wall seconds of one `tuner search` process, its JSON, its peak RSS in MiB and its CPU
    seconds (its forked sweep's included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before = usage.ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "search", str(spec), "--sampler", "exhaustive",
         "--storage", f"sqlite:///{folder / f'run{run}.db'}", "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True, env=ENV)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime
    return seconds, json.loads(done.stdout), max(before, after.ru_maxrss) / 1024.0, cpu


PHASES = {
    "interpreter": "Python start (`python -c pass`)",
    "imports": "imports before the sweep (numpy, pydantic, PyYAML, click, cost model, spec)",
    "spec": "spec and space",
    "sweep": "enumeration, validity, evaluation, selection (the sweep)",
    "storage_imports": "imports of Optuna and SQLAlchemy",
    "storage_open": "opening a fresh SQLite storage (a copy of Optuna's) and the study",
    "writing": "writing the best plans as trials",
    "leaving": "closing the storage, printing, the interpreter's exit (wall only)",
}


def _fresh(command: list[str]) -> tuple[float, float, str, float]:
    """Wall and CPU seconds (its own and its children's), stdout and the clock (time.time())
    at the end of a new process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True,
                          env=ENV)
    wall = time.perf_counter() - start
    ended = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, done.stdout, ended


def phases(spec: Path, folder: Path, repeats: int) -> dict[str, dict[str, float]]:
    """The least wall and CPU seconds of each phase over `repeats` new processes."""
    best: dict[str, dict[str, float]] = {}

    def keep(name: str, wall: float, cpu: float) -> None:
        old = best.get(name, {"wall_s": 1e9, "cpu_s": 1e9})
        best[name] = {"wall_s": min(old["wall_s"], wall), "cpu_s": min(old["cpu_s"], cpu)}

    for run in range(repeats):
        keep("interpreter", *_fresh([sys.executable, "-c", "pass"])[:2])
        db = folder / f"phases{run}.db"
        _, _, out, ended = _fresh([sys.executable, str(ROOT / "benchmarks" / "sweep_phases.py"),
                                   str(spec), str(db)])
        report = json.loads(out)
        for name, seconds in report["phases"].items():
            keep(name, seconds["wall_s"], seconds["cpu_s"])
        leaving = min(best.get("leaving", {}).get("wall_s", 1e9), ended - report["ended_at"])
        best["leaving"] = {"wall_s": leaving}  # its CPU is not told apart from the start's
    return best


def _print_phases(report: dict[str, Any]) -> None:
    parts = report["phases"]
    print("  where the time goes (each phase alone, one after the other, in a new process; "
          "best of the repeats):")
    print("     wall    CPU")
    for name, what in PHASES.items():
        cpu_s = parts[name].get("cpu_s")
        shown = "   -  " if cpu_s is None else f"{cpu_s:5.2f} s"
        print(f"    {parts[name]['wall_s']:5.2f} s {shown}  {what}")
    wall = sum(p["wall_s"] for p in parts.values())
    cpu = sum(p.get("cpu_s", 0.0) for p in parts.values())
    print(f"    {wall:5.2f} s {cpu:5.2f} s  sum; end to end {report['end_to_end_seconds']:.2f} s "
          f"wall, {report['end_to_end_cpu_seconds']:.2f} s CPU (the sweep runs in a forked "
          "child beside the storage's imports and opening)")
    print(_critical_path(parts))


def _critical_path(parts: dict[str, dict[str, float]]) -> str:
    """The end to end the phases predict with the fork: what comes before it, the longer of
    the two sides (the child's sweep; the parent's imports of Optuna and SQLAlchemy and
    opening), then the writing and leaving, in the parent."""
    wall = {name: part["wall_s"] for name, part in parts.items()}
    before = wall["interpreter"] + wall["imports"] + wall["spec"]
    storage = wall["storage_imports"] + wall["storage_open"]
    after = wall["writing"] + wall["leaving"]
    longer = "the storage side" if storage >= wall["sweep"] else "the sweep"
    return (f"    critical path {before + max(storage, wall['sweep']) + after:.2f} s: "
            f"{before:.2f} s before the fork, then {longer} ({storage:.2f} s storage side "
            f"beside {wall['sweep']:.2f} s sweep), then {after:.2f} s writing and leaving")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--pricing", action="store_true", help="add spot servers")
    parser.add_argument("--network", action="store_true", help="add two scale-out networks")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        spec = widen(args.spec, folder, pricing=args.pricing, network=args.network)
        space = Space.from_spec(load_spec(spec))
        inside = min((sweep(space) for _ in range(args.repeats)), key=lambda s: s.seconds)
        ENV["TUNER_CACHE_DIR"] = str(folder / "cache")  # empty: the first run fills it
        first, *runs = [end_to_end(spec, folder, i) for i in range(args.repeats + 1)]
        parts = phases(spec, folder, args.repeats)
    seconds, out, _, _ = min(runs, key=lambda r: r[0])
    report = {
        "plans": out["evaluated"], "clusters": len(list(space.cluster_combinations())),
        "feasible": out["feasible_plans"],
        "sweep_seconds": inside.seconds, "sweep_plans_per_s": inside.evaluated / inside.seconds,
        "end_to_end_seconds": seconds, "end_to_end_plans_per_s": out["evaluated"] / seconds,
        "end_to_end_cpu_seconds": min(r[3] for r in runs),
        "first_run_seconds": first[0],
        "peak_rss_mib": max(r[2] for r in runs), "optimal": out["optimal"],
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "phases": parts}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{report['plans']:,} valid plans on {report['clusters']} clusters "
          f"({report['feasible']:,} feasible)")
    print(f"  sweep alone:  {report['sweep_seconds']:.2f} s = "
          f"{report['sweep_plans_per_s']:,.0f} plans/s")
    print(f"  end to end:   {report['end_to_end_seconds']:.2f} s = "
          f"{report['end_to_end_plans_per_s']:,.0f} plans/s (process start, storing included; "
          f"peak memory {report['peak_rss_mib']:.0f} MiB)")
    print(f"  first run:    {report['first_run_seconds']:.2f} s (an empty cache: Optuna makes "
          "the template database and the cost model's digest is compiled)")
    _print_phases(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
