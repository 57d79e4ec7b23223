"""Objectives and constraint values of an array of evaluated plans, and the best of them."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

from cost import CostReport
from search_spaces import Constraints, required_free_bytes
from search_spaces.misses import nearest_index

__all__ = ["DIRECTIONS", "Scores", "best_index", "plans_shape", "score"]

DIRECTIONS = {"throughput": "maximize", "time_to_train": "minimize", "cost": "minimize"}
"""Each objective of shared/SPEC.md and the way Optuna should optimise it."""

_GIB = float(2**30)


@dataclass(frozen=True, eq=False)
class Scores:
    """Per plan: objective values (one column per objective) and constraint values (<= 0 is
    feasible: the fraction by which a limit is exceeded, so samplers learn how far off)."""

    objectives: NDArray[np.float64]  # shape (plans, objectives)
    constraints: dict[str, NDArray[np.float64]]  # name -> (plans,)

    @property
    def violation(self) -> NDArray[np.float64]:
        """The largest constraint value of each plan (<= 0: feasible)."""
        return np.max(np.stack(list(self.constraints.values())), axis=0)

    @property
    def feasible(self) -> NDArray[np.bool_]:
        return self.violation <= 0


def _objective(report: CostReport, name: str) -> NDArray[np.float64]:
    if name == "throughput":
        return np.asarray(report.tokens_per_s, dtype=np.float64)
    if name == "time_to_train":
        return np.asarray(report.price.time_to_train_s, dtype=np.float64) / 86400.0
    return np.asarray(report.price.cost_to_train_usd, dtype=np.float64)


def score(report: CostReport, objectives: tuple[str, ...], limits: Constraints) -> Scores:
    """Objective values in the objectives' own units (tokens/s, days, USD) and constraints:
    HBM and expansion use (always), and the spec's max_cost, max_days, max_gpus,
    max_hourly_cost and memory_headroom."""
    shape = plans_shape(report)
    memory = report.memory
    constraints = {
        "hbm": memory.total_bytes / report.hbm_usable_bytes - 1.0,
        "expansion": (memory.expansion_bytes - report.expansion_capacity_bytes)
        / np.maximum(report.expansion_capacity_bytes, _GIB),
    }
    bounded = {
        "max_cost": report.price.cost_to_train_usd,
        "max_days": report.price.time_to_train_s / 86400.0,
        "max_gpus": report.gpus,
        "max_hourly_cost": report.price.cost_per_hour_usd,
    }
    for name, value in bounded.items():
        limit = getattr(limits, name)
        if limit is not None:
            constraints[name] = np.asarray(value, dtype=np.float64) / float(limit) - 1.0
    if limits.memory_headroom is not None:
        constraints["memory_headroom"] = headroom_excess(report, limits.memory_headroom)
    constraints = {k: np.broadcast_to(_finite(v), shape) for k, v in constraints.items()}
    columns = [np.broadcast_to(_objective(report, n), shape) for n in objectives]
    return Scores(objectives=np.stack(columns, axis=-1), constraints=constraints)


def plans_shape(report: CostReport) -> tuple[int, ...]:
    """The shape of the report's plans, `np.shape(report.step_time_s)`, without adding the
    step-time terms of every plan: their shapes broadcast (StepTime.total_s adds every field of
    StepTime). Here, not in `cost`, whose code is the cost model's version (studies.identity)."""
    step = report.step
    return np.broadcast_shapes(*(np.shape(getattr(step, f.name)) for f in fields(step)))


def _finite(value: NDArray[np.float64] | float) -> NDArray[np.float64]:
    """A constraint value with NaN (undefined: never feasible) made inf and inf made 1e9,
    so that it orders; copied only where there is one (one pass to look, where
    `np.nan_to_num` makes several)."""
    value = np.asarray(value)
    if np.isfinite(value).all():
        return value
    return np.nan_to_num(value, nan=np.inf, posinf=1e9)


def headroom_excess(report: CostReport, headroom: str | float) -> NDArray[np.float64]:
    """How far a plan's memory plus the HBM it must leave free (constraints.memory_headroom)
    exceeds the usable HBM, as a fraction of the usable HBM (<= 0: the headroom is left)."""
    usable = np.asarray(report.hbm_usable_bytes, dtype=np.float64)
    required = required_free_bytes(headroom, usable)
    return np.asarray((report.memory.total_bytes + required) / usable - 1.0, dtype=np.float64)


def best_index(scores: Scores, directions: list[str]) -> int:
    """The best feasible plan by the first objective (ties by the second); with none
    feasible, the nearest miss (search_spaces.misses)."""
    feasible = scores.feasible
    if not np.any(feasible):
        return nearest_index(scores.constraints)
    keys = []
    for column, direction in zip(scores.objectives.T, directions, strict=True):
        keys.append(-column if direction == "maximize" else column)
    order = np.lexsort([np.where(feasible, k, np.inf) for k in reversed(keys)])
    return int(order[0])
