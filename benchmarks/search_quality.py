"""Search quality and speed on the shipped examples, with SQLite storage.

For each example: the exhaustive optimum (every valid plan evaluated: what the default
sampler, auto, returns on these spaces), then TPE (each trial sweeping the cheap knobs in one
vectorised call; the default before auto, and what auto runs on spaces too large to sweep)
with 300 trials over 5 seeds, and, to show what the sweep buys, the same search sampling every
knob (one plan per trial).
Reports the share of the optimum's throughput reached (median over seeds), and the trials and
seconds it took to get within 1%.

    python benchmarks/search_quality.py [--trials 300] [--seeds 5] [--examples a,b] [--json]
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
from optuna.trial import TrialState

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search_spaces import Space, load_spec  # noqa: E402
from studies import open_storage  # noqa: E402
from tuner.engine.exhaustive import sweep  # noqa: E402
from tuner.engine.search import SearchOptions, run_search  # noqa: E402

EXAMPLES = ("gpt3-175b-1024-a100", "llama3-70b-64-h100", "llama3-405b-2048-h100")


def _within(study: optuna.Study, target: float) -> tuple[int | None, float | None]:
    """Trials and seconds until a feasible trial reached `target` (None if never)."""
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    start = trials[0].datetime_start if trials else None
    for count, t in enumerate(trials, start=1):
        feasible = all(v <= 0 for v in t.constraints.values())
        if t.state == TrialState.COMPLETE and feasible and t.value is not None \
                and t.value >= target and t.datetime_complete and start:
            return count, (t.datetime_complete - start).total_seconds()
    return None, None


def _best(study: optuna.Study) -> float:
    values = [t.value for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if t.value is not None and all(v <= 0 for v in t.constraints.values())]
    return max(values, default=0.0)


def run_one(name: str, *, trials: int, seeds: int, sweep_inner: bool, optimum: float,
            folder: Path) -> dict[str, Any]:
    path = ROOT / "search_spaces" / "examples" / f"{name}.yaml"
    spec, text = load_spec(path), path.read_text()
    runs = []
    for seed in range(seeds):
        storage = open_storage(f"sqlite:///{folder}/{name}-{sweep_inner}-{seed}.db")
        started = time.perf_counter()
        study = run_search(spec, text, storage, SearchOptions(
            sampler="tpe", trials=trials, seed=seed, sweep_inner=sweep_inner))
        seconds = time.perf_counter() - started
        n, s = _within(study, 0.99 * optimum)
        runs.append({"seed": seed, "share": _best(study) / optimum, "seconds": seconds,
                     "trials_to_1pct": n, "seconds_to_1pct": s})
    shares = [r["share"] for r in runs]
    reached = [r for r in runs if r["trials_to_1pct"] is not None]
    return {
        "median_share": statistics.median(shares), "min_share": min(shares),
        "median_seconds": statistics.median(r["seconds"] for r in runs),
        "seeds_within_1pct": len(reached),
        "median_trials_to_1pct": statistics.median(r["trials_to_1pct"] for r in reached)
        if reached else None,
        "median_seconds_to_1pct": statistics.median(r["seconds_to_1pct"] for r in reached)
        if reached else None,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    parser.add_argument("--no-flat", action="store_true", help="skip the one-plan-per-trial run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.examples.split(","):
            spec = load_spec(ROOT / "search_spaces" / "examples" / f"{name}.yaml")
            space = Space.from_spec(spec)
            exhaustive = sweep(space)
            optimum = max(c.objectives[0] for c, _ in exhaustive.best)
            entry: dict[str, Any] = {
                "valid_plans": exhaustive.evaluated, "feasible_plans": exhaustive.feasible,
                "exhaustive_seconds": exhaustive.seconds, "optimum_tokens_per_s": optimum}
            modes = [("sweep", True)] + ([] if args.no_flat else [("flat", False)])
            for mode, inner in modes:
                entry[mode] = run_one(name, trials=args.trials, seeds=args.seeds,
                                      sweep_inner=inner, optimum=optimum, folder=Path(tmp))
            report[name] = entry
            if not args.json:
                _print(name, entry, args.trials)
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


def _print(name: str, entry: dict[str, Any], trials: int) -> None:
    print(f"{name}: {entry['valid_plans']:,} valid plans, {entry['feasible_plans']:,} feasible;"
          f" exhaustive {entry['exhaustive_seconds']:.2f} s, optimum "
          f"{entry['optimum_tokens_per_s']:,.0f} tokens/s")
    for mode in ("sweep", "flat"):
        if mode not in entry:
            continue
        e = entry[mode]
        print(f"  {mode:<5} {trials} trials: median {100 * e['median_share']:.2f}% of optimum "
              f"(worst seed {100 * e['min_share']:.2f}%), {e['median_seconds']:.1f} s; within "
              f"1% in {e['seeds_within_1pct']}/{len(e['runs'])} seeds, median "
              f"{e['median_trials_to_1pct']} trials / {e['median_seconds_to_1pct'] or 0:.1f} s")


if __name__ == "__main__":
    raise SystemExit(main())
