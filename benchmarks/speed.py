"""Speed of the cost model: one evaluation, plans per second in one vectorised batch, and
plans per second on grids (cost.evaluate_grid), as the exhaustive sweep evaluates them.

    python benchmarks/speed.py [--plans N]

The batch is N plans of GPT-3 175B on 1024 A100-80GB drawn from every knob (tp, pp, virtual
stages, micro-batch, recompute, sequence parallelism, ZeRO, offload), valid or not: the model
evaluates them all and flags the invalid ones. The grids are the valid plans of the same model
and cluster with every knob open (tp, pp up to 98, virtual stages, micro-batch, recompute,
sequence parallelism, ZeRO, gradient reduction): valid layouts times the other knobs' values,
each term computed once per distinct combination of the knobs it reads.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost import ClusterSpec, Plan, TrainingSpec, evaluate, evaluate_grid
from search_spaces import Space, parse_spec
from search_spaces.catalog import gpu_catalog, model_catalog

GRID_SPEC = {
    "name": "speed-grid", "model": "gpt3-175b",
    "training": {"global_batch": 1536, "precision": "bf16", "tokens": 300e9},
    "cluster": {"gpu": "a100-80gb", "nodes": 128, "gpus_per_node": 8},
    "plan": {"tp": [1, 2, 4, 8], "pp": {"min": 1, "max": 98}, "cp": [1, 2, 4],
             "virtual_stages": [1, 2, 3, 4, 6], "micro_batch": [1, 2, 4, 8],
             "recompute": ["none", "selective", "full"], "sequence_parallel": [False, True],
             "zero": [0, 1, 2, 3], "sync": ["ring", "tree", "hierarchical"]},
}


def grid_rate() -> tuple[int, float]:
    """Plans and seconds (best of 3) of evaluate_grid over every grid of GRID_SPEC."""
    space = Space.from_spec(parse_spec(GRID_SPEC, name="speed-grid"))
    cluster = space.cluster(next(space.cluster_combinations()))
    grids = list(space.grids(cluster))

    def run() -> None:
        for grid in grids:
            evaluate_grid(space.model, cluster, space.training, grid.plan()).step_time_s  # noqa: B018

    return sum(g.size for g in grids), best_of(3, run)


def random_plans(n: int, seed: int = 0) -> Plan:
    rng = np.random.default_rng(seed)
    pick = lambda values: rng.choice(np.asarray(values, dtype=np.float64), n)  # noqa: E731
    return Plan(tp=pick([1, 2, 4, 8]), pp=pick([1, 2, 4, 8, 16, 32]), dp=0, cp=1,
                virtual_stages=pick([1, 2, 3]), micro_batch=pick([1, 2, 4, 8]),
                recompute=pick([0, 1, 2]), sequence_parallel=pick([0, 1]),
                zero=pick([0, 1, 2, 3]), offload=0)


def best_of(repeats: int, fn) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plans", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    model, gpu = model_catalog()["gpt3-175b"], gpu_catalog()["a100-80gb"]
    cluster = ClusterSpec.of(gpu, nodes=128, gpus_per_node=8)
    training = TrainingSpec(global_batch=1536, precision="bf16", tokens=300e9)
    one = Plan(tp=8, pp=8, virtual_stages=3, micro_batch=1, recompute=1, sequence_parallel=1)
    single_s = best_of(50, lambda: evaluate(model, cluster, training, one))
    plans = random_plans(args.plans)
    batch_s = best_of(3, lambda: evaluate(model, cluster, training, plans).step_time_s)
    print(f"one plan:   {single_s * 1e3:.3f} ms per evaluation ({1 / single_s:,.0f} plans/s)")
    print(f"batch:      {args.plans:,} plans in {batch_s:.3f} s = "
          f"{args.plans / batch_s:,.0f} plans/s ({batch_s / args.plans * 1e9:.0f} ns per plan)")
    plans, grid_s = grid_rate()
    print(f"grids:      {plans:,} valid plans in {grid_s:.3f} s = {plans / grid_s:,.0f} plans/s "
          f"({grid_s / plans * 1e9:.0f} ns per plan)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
