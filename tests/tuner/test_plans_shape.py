"""scoring.plans_shape reads the shape of a report's plans without adding its step-time terms:
it must stay the shape of `report.step_time_s` (StepTime.total_s adds every field), on grids of
one GPU type, on clusters of several (pools) and for one plan."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cost import evaluate_grid
from search_spaces import Space, load_spec
from tuner.engine.scoring import plans_shape

EXAMPLES = Path(__file__).resolve().parents[2] / "search_spaces" / "examples"


@pytest.mark.parametrize("example", ["llama3-70b-64-h100", "llama3-70b-owned-a100-plus-rented",
                                     "comet-1t-memory-expansion", "llama3-70b-h100-fixed"])
def test_plans_shape_is_the_step_times_shape(example: str) -> None:
    space = Space.from_spec(load_spec(EXAMPLES / f"{example}.yaml"))
    seen = 0
    for part in space.cluster_grids():
        report = evaluate_grid(space.model, part.cluster, space.training, part.grid.plan(),
                               efficiency=space.efficiency)
        assert plans_shape(report) == np.shape(report.step_time_s)
        seen += 1
        if seen == 3:
            break
    assert seen


def test_plans_shape_of_one_plan() -> None:
    space = Space.from_spec(load_spec(EXAMPLES / "llama3-70b-h100-fixed.yaml"))
    part = next(iter(space.cluster_grids()))
    plan = part.grid.flat_plan(np.array([0]))
    scalar = type(plan)(**{k: float(np.ravel(getattr(plan, k))[0])
                           for k in type(plan).__dataclass_fields__})
    report = evaluate_grid(space.model, part.cluster, space.training, scalar,
                           efficiency=space.efficiency)
    assert plans_shape(report) == np.shape(report.step_time_s)
