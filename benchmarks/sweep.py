"""Speed of the exhaustive sweep, end to end: `tuner search SPEC --sampler exhaustive` as a new
process (Python start, imports, spec, enumeration, validity, the cost model, selection and
storing the best plans in a fresh SQLite file), and the sweep alone in this process.

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


def end_to_end(spec: Path, folder: Path, run: int) -> tuple[float, dict[str, Any], float]:
    """Wall seconds of one `tuner search` process, its JSON, and its peak RSS in MiB."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "search", str(spec), "--sampler", "exhaustive",
         "--storage", f"sqlite:///{folder / f'run{run}.db'}", "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024.0
    return seconds, json.loads(done.stdout), peak


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
        runs = [end_to_end(spec, folder, i) for i in range(args.repeats)]
    seconds, out, _ = min(runs, key=lambda r: r[0])
    report = {
        "plans": out["evaluated"], "clusters": len(list(space.cluster_combinations())),
        "feasible": out["feasible_plans"],
        "sweep_seconds": inside.seconds, "sweep_plans_per_s": inside.evaluated / inside.seconds,
        "end_to_end_seconds": seconds, "end_to_end_plans_per_s": out["evaluated"] / seconds,
        "peak_rss_mib": max(r[2] for r in runs), "optimal": out["optimal"]}
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
