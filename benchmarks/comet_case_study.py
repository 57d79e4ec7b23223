"""The COMET case study on our model: how far apart plan-and-cluster choices are at one budget,
and what a memory-expansion tier buys where HBM capacity binds.

    python benchmarks/comet_case_study.py [SPEC] [--json]

SPEC (default search_spaces/examples/comet-1t-memory-expansion.yaml) gives a model, clusters of
one size (so one GPU budget) that differ in GPU, network and expansion, and a plan space that
may offload into the expansion tier. Every valid plan of every cluster is evaluated. Reports:
- spread: the fastest over the slowest feasible plan-and-cluster choice (COMET: up to 7.7x),
  and the same over each cluster's best plan only (choosing the cluster alone);
- expansion: per GPU and network, the best throughput with the expansion tier over the best
  without it (COMET: up to 1.4x where HBM capacity binds).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search_spaces import Space, SpecError, load_spec  # noqa: E402
from tuner.engine.evaluation import evaluate_chunks  # noqa: E402

DEFAULT_SPEC = ROOT / "search_spaces" / "examples" / "comet-1t-memory-expansion.yaml"


def per_cluster(space: Space) -> list[dict[str, Any]]:
    """Best and worst feasible throughput (tokens/s) of each cluster, and its plan counts."""
    rows = []
    for values in space.cluster_combinations():
        try:
            cluster = space.cluster(values)
        except SpecError:
            continue
        best, worst, feasible, total = 0.0, np.inf, 0, 0
        for chunk in evaluate_chunks(space, cluster, {}):
            ok = chunk.scores.feasible
            tput = chunk.scores.objectives[:, 0]
            total += ok.size
            feasible += int(np.count_nonzero(ok))
            if np.any(ok):
                best, worst = max(best, float(tput[ok].max())), min(worst, float(tput[ok].min()))
        rows.append({**{k: v for k, v in values.items() if v is not None},
                     "best": best, "worst": worst if feasible else 0.0,
                     "feasible": feasible, "plans": total})
    return rows


def expansion_gains(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per GPU and network: best with the expansion tier / best without it."""
    gains = []
    keys = sorted({(r["gpu"], r["scale_out_bandwidth"]) for r in rows})
    for gpu, net in keys:
        mine = [r for r in rows if r["gpu"] == gpu and r["scale_out_bandwidth"] == net]
        without = max((r["best"] for r in mine if not r.get("expansion.capacity")), default=0.0)
        with_ = max((r["best"] for r in mine if r.get("expansion.capacity")), default=0.0)
        gains.append({"gpu": gpu, "scale_out_bandwidth": net, "without": without,
                      "with": with_, "speedup": with_ / without if without else float("inf")})
    return gains


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("spec", nargs="?", default=str(DEFAULT_SPEC))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    space = Space.from_spec(load_spec(args.spec))
    rows = per_cluster(space)
    feasible = [r for r in rows if r["feasible"]]
    best = max(r["best"] for r in feasible)
    spread = best / min(r["worst"] for r in feasible)
    cluster_spread = best / min(r["best"] for r in feasible)
    gains = expansion_gains(rows)
    out = {"clusters": len(rows), "plans": sum(r["plans"] for r in rows),
           "feasible_plans": sum(r["feasible"] for r in rows), "spread": spread,
           "cluster_spread": cluster_spread, "expansion": gains, "per_cluster": rows}
    if args.json:
        print(json.dumps(out, indent=1, default=float))
        return 0
    print(f"{out['clusters']} clusters, {out['plans']:,} valid plans, "
          f"{out['feasible_plans']:,} fit in memory")
    print(f"spread at one budget: fastest / slowest feasible plan-and-cluster = {spread:.1f}x; "
          f"over each cluster's best plan = {cluster_spread:.2f}x")
    print("memory expansion (best with the tier / best without):")
    for g in gains:
        print(f"  {g['gpu']:<10} scale-out {g['scale_out_bandwidth'] / 1e9 * 8:>4.0f} Gbit/s: "
              f"{g['without']:>9,.0f} -> {g['with']:>9,.0f} tokens/s = {g['speedup']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
