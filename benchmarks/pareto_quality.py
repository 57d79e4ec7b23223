"""Pareto-search quality on the shipped co-design example, with SQLite storage.

The exhaustive front (every valid plan of every cluster) against the fronts that TPE (Optuna's
default for several objectives) and NSGA-II find within 1000 trials, by hypervolume (both
objectives minimised; reference point 1.1 x the worst value of the exhaustive front on each
axis). Each trial samples a cluster and sweeps its whole plan space in one call.

    python benchmarks/pareto_quality.py [--trials 1000] [--seeds 3] [--samplers tpe,nsga2]
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

import numpy as np
import optuna
from optuna.trial import TrialState

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search_spaces import Space, load_spec  # noqa: E402
from studies import open_storage  # noqa: E402
from tuner.engine.exhaustive import pareto_mask, sweep  # noqa: E402
from tuner.engine.search import SearchOptions, run_search  # noqa: E402

EXAMPLE = ROOT / "search_spaces" / "examples" / "llama3-70b-budget-codesign.yaml"
CHECKPOINTS = (100, 300, 1000)


def hypervolume(points: np.ndarray, reference: np.ndarray) -> float:
    """Area dominated by `points` (n, 2) and bounded by `reference`, both axes minimised."""
    inside = points[np.all(points < reference, axis=1)]
    if len(inside) == 0:
        return 0.0
    front = inside[pareto_mask(inside)]
    front = front[np.argsort(front[:, 0])]
    xs = np.append(front[1:, 0], reference[0])
    return float(np.sum((xs - front[:, 0]) * (reference[1] - front[:, 1])))


def _feasible_values(study: optuna.Study, first: int) -> np.ndarray:
    trials = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if t.number < first and all(v <= 0 for v in t.constraints.values())]
    return np.array([t.values for t in trials]).reshape(-1, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--samplers", default="tpe,nsga2")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spec, text = load_spec(EXAMPLE), EXAMPLE.read_text()
    exhaustive = sweep(Space.from_spec(spec))
    front = np.array([c.objectives for c, _ in exhaustive.best])
    reference = 1.1 * front.max(axis=0)
    best_hv = hypervolume(front, reference)
    report: dict[str, Any] = {"valid_plans": exhaustive.evaluated,
                              "feasible_plans": exhaustive.feasible,
                              "exhaustive_seconds": exhaustive.seconds,
                              "front_size": len(front)}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.samplers.split(","):
            runs = []
            for seed in range(args.seeds):
                storage = open_storage(f"sqlite:///{tmp}/{name}-{seed}.db")
                started = time.perf_counter()
                study = run_search(spec, text, storage, SearchOptions(
                    sampler=name, trials=args.trials, seed=seed))
                ratios = {n: hypervolume(_feasible_values(study, n), reference) / best_hv
                          for n in CHECKPOINTS if n <= args.trials}
                runs.append({"seed": seed, "seconds": time.perf_counter() - started,
                             "hypervolume_ratio": ratios})
            report[name] = {"runs": runs, "median_ratio": {
                n: statistics.median(r["hypervolume_ratio"][n] for r in runs)
                for n in CHECKPOINTS if n <= args.trials},
                "median_seconds": statistics.median(r["seconds"] for r in runs)}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{report['valid_plans']:,} valid plans, {report['feasible_plans']:,} feasible; "
          f"exhaustive front of {report['front_size']} plans in "
          f"{report['exhaustive_seconds']:.2f} s")
    for name in args.samplers.split(","):
        ratios = ", ".join(f"{100 * v:.1f}% at {n}" for n, v in report[name]["median_ratio"]
                           .items())
        print(f"  {name:<6} hypervolume / exhaustive (median of {args.seeds} seeds): {ratios} "
              f"trials; {report[name]['median_seconds']:.0f} s per run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
