"""The default search on a space too large to sweep in its budget, against a long reference
run: the exhaustive sweep of the whole space (minutes), which gives the true optimum.

    python benchmarks/large_space.py [--seeds N] [--trials N] [--small] [--json]

The space (benchmarks/specs/large-codesign.yaml): Llama 3 70B on 5,184 clusters (six GPU
types, 1 to 2048 nodes of 4 or 8 GPUs, three networks, on-demand or spot, three memory
expansion tiers at two bandwidths), every plan of each, some 1.3 billion valid plans;
objective: the shortest time to train for at most $30M. `auto` finds it too large and runs
TPE over the clusters, each trial sweeping one cluster's whole plan space. Reported: the
default search's best time to train over the optimum's (1.0 is optimal; median and worst
over seeds), the trials and seconds it took to get within 1%, and the reference run's time.
`--small` keeps 1 to 8 nodes of 8 GPUs and one network (a check that the script works).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.trial import TrialState

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search_spaces import Space, parse_spec  # noqa: E402
from studies import open_storage  # noqa: E402
from tuner.engine.auto import count_plans  # noqa: E402
from tuner.engine.exhaustive import sweep  # noqa: E402
from tuner.engine.search import SearchOptions, run_search  # noqa: E402

SPEC = ROOT / "benchmarks" / "specs" / "large-codesign.yaml"


def load(small: bool) -> tuple[Any, str]:
    data = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    if small:
        data["cluster"].update({"nodes": {"min": 1, "max": 8, "powers_of_two": True},
                                "gpus_per_node": 8, "scale_out_bandwidth": "400 Gbit/s"})
        data["search"]["exhaustive_budget"] = 0.01  # still too large for `auto`
    text = yaml.safe_dump(data, sort_keys=False)
    return parse_spec(data, file=str(SPEC), name=data["name"]), text


def _progress(study: optuna.Study, optimum: float) -> tuple[float, int | None, float | None]:
    """Best feasible days, and the trials and seconds to within 1% of `optimum`."""
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    start = trials[0].datetime_start if trials else None
    best, hit = float("inf"), None
    for count, t in enumerate(trials, start=1):
        ok = t.state == TrialState.COMPLETE and all(v <= 0 for v in t.constraints.values())
        if ok and t.value is not None:
            best = min(best, t.value)
            if hit is None and t.value <= 1.01 * optimum and t.datetime_complete and start:
                hit = (count, (t.datetime_complete - start).total_seconds())
    return best, hit[0] if hit else None, hit[1] if hit else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spec, text = load(args.small)
    space = Space.from_spec(spec)
    plans, _, _ = count_plans(space)
    reference = sweep(space)
    optimum = reference.best[0][0].objectives[0]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            storage = open_storage(f"sqlite:///{tmp}/large-{seed}.db")
            started = time.perf_counter()
            study = run_search(spec, text, storage, SearchOptions(trials=args.trials, seed=seed))
            seconds = time.perf_counter() - started
            best, trials, to_1pct = _progress(study, optimum)
            runs.append({"seed": seed, "ratio": best / optimum, "seconds": seconds,
                         "sampler": study.user_attrs["search"]["sampler"],
                         "trials_to_1pct": trials, "seconds_to_1pct": to_1pct})
    ratios = [r["ratio"] for r in runs]
    report = {"plans": plans, "clusters": len(list(space.cluster_combinations())),
              "optimum_days": optimum, "reference_seconds": reference.seconds,
              "reference_plans_per_s": reference.evaluated / reference.seconds,
              "median_ratio": statistics.median(ratios), "worst_ratio": max(ratios),
              "within_1pct": sum(r["trials_to_1pct"] is not None for r in runs), "runs": runs}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{plans:,} valid plans on {report['clusters']:,} clusters; reference (exhaustive): "
          f"optimum {optimum:.2f} days in {reference.seconds:.0f} s "
          f"({report['reference_plans_per_s']:,.0f} plans/s)")
    for r in runs:
        print(f"  seed {r['seed']}: {r['sampler']} (auto), {args.trials} trials in "
              f"{r['seconds']:.0f} s: {r['ratio']:.4f} x the optimum's time to train; within 1% "
              f"after {r['trials_to_1pct']} trials / {r['seconds_to_1pct'] or 0:.0f} s")
    print(f"  default search: median {report['median_ratio']:.4f}, worst "
          f"{report['worst_ratio']:.4f} x the optimum; within 1% in {report['within_1pct']}/"
          f"{len(runs)} seeds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
