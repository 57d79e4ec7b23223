"""Co-design: cluster choices searched with the plan, budgets and deadlines, Pareto fronts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from studies import best_results, open_storage
from tests.tuner.specs import space, spec, tiny
from tuner.engine.exhaustive import sweep
from tuner.engine.objective import PlanObjective
from tuner.engine.search import SearchOptions, run_search

LIMITS = {"max_cost": 400.0, "max_days": 0.5, "max_gpus": 16, "max_hourly_cost": 60.0}


def codesign(name: str, constraints: dict[str, float] | None = None) -> dict[str, Any]:
    return tiny(
        name,
        training={"global_batch": 64, "tokens": 2e10, "precision": "bf16"},
        cluster={"gpu": ["a100-80gb", "h100-80gb", "v100-32gb"], "nodes": [1, 2, 4],
                 "gpus_per_node": 8, "pricing": ["on_demand", "spot"],
                 "revocations_per_node_hour": 0.05},
        objective=["time_to_train", "cost"],
        constraints=dict(LIMITS if constraints is None else constraints))


def within_limits(result: dict[str, Any]) -> bool:
    return (result["cost_to_train_usd"] <= LIMITS["max_cost"]
            and result["time_to_train_days"] <= LIMITS["max_days"]
            and result["cluster"]["gpus"] <= LIMITS["max_gpus"]
            and result["cost_per_hour_usd"] <= LIMITS["max_hourly_cost"])


@pytest.mark.parametrize("sampler", ["tpe", "nsga2", "random", "exhaustive"])
def test_reported_plans_respect_budget_and_deadline(tmp_path: Path, sampler: str) -> None:
    data = codesign(f"codesign-{sampler}")
    storage = open_storage(f"sqlite:///{tmp_path}/c.db")
    study = run_search(spec(data), "", storage, SearchOptions(sampler=sampler, trials=30,
                                                               seed=1))
    front = [r.as_dict() for r in best_results(study)]
    assert front, "the limits leave feasible plans"
    assert all(r["feasible"] and within_limits(r) for r in front)
    # the limits bind: without them more plans are feasible
    bound, free = sweep(space(data)), sweep(space(codesign("free", constraints={})))
    assert bound.feasible < free.feasible


def test_exhaustive_front_is_non_dominated_and_in_limits() -> None:
    summary = sweep(space(codesign("front")))
    points = np.array([c.objectives for c, _ in summary.best])
    assert len(points) >= 2
    for i, p in enumerate(points):
        others = np.delete(points, i, axis=0)
        assert not np.any(np.all(others <= p, axis=1) & np.any(others < p, axis=1))
    assert all(c.feasible for c, _ in summary.best)


def test_a_codesign_trial_sweeps_the_whole_plan_of_its_cluster() -> None:
    objective = PlanObjective(space(codesign("sweep")))
    assert all(k.startswith("cluster.") for k in objective.knobs)


def test_spot_is_cheaper_but_slower_with_revocations() -> None:
    data = codesign("spot", constraints={})
    data["cluster"] = {"gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 8,
                       "pricing": ["on_demand", "spot"], "revocations_per_node_hour": 0.5}
    best = {c.cluster.pricing: c for c, _ in sweep(space(data)).best}
    assert best["spot"].objectives[0] > best["on_demand"].objectives[0]  # days
    assert best["spot"].objectives[1] < best["on_demand"].objectives[1]  # USD
