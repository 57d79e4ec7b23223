"""Plans as grids (search_spaces.grid, cost.evaluate_grid): the grids of a space hold exactly
the valid plans that the flat enumeration (Space.plans) lists, and evaluating a grid, even one
of several clusters stacked, gives every number of the flat evaluation bit for bit."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cost import CostReport, Plan, evaluate, evaluate_grid
from search_spaces import Space, SpecError, load_spec, parse_spec

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "search_spaces" / "examples")
                  .glob("*.yaml"))
SEARCHED = [p for p in EXAMPLES if not load_spec(p).is_fixed]


def _key(plan: Plan, i: int) -> tuple[float, ...]:
    return tuple(float(np.ravel(getattr(plan, f.name))[i]) if np.ndim(getattr(plan, f.name))
                 else float(getattr(plan, f.name)) for f in fields(plan))


def _numbers(report: CostReport, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Every number of a report as flat arrays of the plans' shape."""
    out = {f"step.{f.name}": getattr(report.step, f.name) for f in fields(report.step)}
    out.update({f"memory.{f.name}": getattr(report.memory, f.name)
                for f in fields(report.memory)})
    out.update({f"price.{f.name}": getattr(report.price, f.name)
                for f in fields(report.price)})
    out.update(valid=report.valid, fits=report.fits, gpus=report.gpus,
               usable=report.hbm_usable_bytes)
    return {k: np.broadcast_to(v, shape).ravel() for k, v in out.items()}


def _clusters(space: Space, limit: int = 4) -> list[tuple[dict[str, Any], Any]]:
    out = []
    for values in space.cluster_combinations():
        try:
            out.append((values, space.cluster(values)))
        except SpecError:
            continue
        if len(out) == limit:
            break
    return out


@pytest.mark.parametrize("path", SEARCHED, ids=lambda p: p.stem)
def test_grids_hold_the_flat_plans_and_give_their_numbers(path: Path) -> None:
    space = Space.from_spec(load_spec(path))
    for _, cluster in _clusters(space, limit=2):
        flat: dict[tuple[float, ...], dict[str, float]] = {}
        for plans in space.plans(cluster):
            n = int(np.size(plans.tp))
            numbers = _numbers(evaluate(space.model, cluster, space.training, plans,
                                        efficiency=space.efficiency), (n,))
            for i in range(n):
                flat[_key(plans, i)] = {k: v[i] for k, v in numbers.items()}
        gridded: dict[tuple[float, ...], dict[str, float]] = {}
        for grid in space.grids(cluster):
            report = evaluate_grid(space.model, cluster, space.training, grid.plan(),
                                   efficiency=space.efficiency)
            numbers = _numbers(report, grid.shape)
            plans = grid.flat_plan(np.arange(grid.size))
            for i in range(grid.size):
                gridded[_key(plans, i)] = {k: v[i] for k, v in numbers.items()}
        assert set(gridded) == set(flat)
        differ = [k for k in flat if not all(
            (a == b) or (np.isnan(a) and np.isnan(b))
            for a, b in zip(flat[k].values(), gridded[k].values(), strict=True))]
        assert not differ, differ[:3]
        assert space.count() >= len(flat)


@pytest.mark.parametrize("name", ["llama3-70b-budget-codesign", "comet-1t-memory-expansion"])
def test_stacked_clusters_give_each_clusters_numbers(name: str) -> None:
    """Clusters of one GPU in one grid (node counts, networks, expansion and prices as arrays
    along the layouts) give what each cluster gives alone."""
    space = Space.from_spec(load_spec(EXAMPLES[0].parent / f"{name}.yaml"))
    seen = 0
    for part in space.cluster_grids(max_plans=4096):
        report = evaluate_grid(space.model, part.cluster, space.training, part.grid.plan(),
                               efficiency=space.efficiency)
        together = _numbers(report, part.grid.shape)
        rows = np.unravel_index(np.arange(part.grid.size), part.grid.shape)[0]
        plans = part.grid.flat_plan(np.arange(part.grid.size))
        for owner, cluster in enumerate(part.clusters):
            mine = np.flatnonzero(part.owner[rows] == owner)
            alone = Plan(**{f.name: np.ravel(np.broadcast_to(getattr(plans, f.name),
                                                             (part.grid.size,)))[mine]
                            for f in fields(plans)})
            single = _numbers(evaluate(space.model, cluster, space.training, alone,
                                       efficiency=space.efficiency), (len(mine),))
            for key, values in single.items():
                np.testing.assert_array_equal(together[key][mine], values, err_msg=key)
        seen += len(part.clusters)
        if seen >= 12:
            break
    assert seen >= 2


def test_a_grid_keeps_only_valid_layouts_and_dedupes_sequence_parallelism() -> None:
    space = Space.from_spec(load_spec(EXAMPLES[0].parent / "gpt3-175b-1024-a100.yaml"))
    cluster = space.cluster(next(space.cluster_combinations()))
    for grid in space.grids(cluster):
        layouts = grid.layouts
        assert np.all((layouts["sequence_parallel"] == 0) | (layouts["tp"] > 1))
        assert np.all(1024 % (layouts["tp"] * layouts["pp"] * layouts["cp"]) == 0)  # dp fills
        assert grid.size <= 1 << 16 or grid.rows == 1


@pytest.mark.parametrize("max_plans", [1, 4096])
def test_a_cluster_without_valid_plans_before_one_with_them(max_plans: int) -> None:
    """Node counts where the first cluster of a GPU admits no plan (tp·pp = 16 on one node of
    8), or a grid took every row so far (max_plans 1): the next cluster of that GPU opens the
    group again; before, `tuner search` ended in an IndexError traceback."""
    spec = parse_spec({"model": "gpt3-1.3b",
                       "training": {"global_batch": 64, "tokens": "300e9", "precision": "bf16"},
                       "cluster": {"gpu": "a100-80gb", "nodes": [1, 2, 4], "gpus_per_node": 8},
                       "plan": {"tp": 8, "pp": 2, "micro_batch": 1}})
    parts = list(Space.from_spec(spec).cluster_grids(max_plans=max_plans))
    assert sorted({c.nodes for part in parts for c in part.clusters}) == [2, 4]
    assert sum(part.grid.size for part in parts) == 2
