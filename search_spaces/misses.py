"""How near an infeasible plan is to feasible: one rule for the exhaustive sweep's nearest miss,
a trial's plan when none of its swept plans is feasible, and a study's nearest trial
(studies.listing). Here, beside the spec's `constraints`, so that the evaluation path imports
neither Optuna nor SQLAlchemy for it.

A plan's constraint values are the fractions by which it exceeds each limit (<= 0: met;
tuner.engine.scoring): its memory over the GPU's usable HBM (`hbm`) and over the expansion
tier (`expansion`), and the spec's `max_cost`, `max_days`, `max_gpus`, `max_hourly_cost` and
`memory_headroom`. A plan whose memory does not fit cannot run at all, so it comes after every
plan that fits, however far either misses the user's limits: among the plans that fit, the
nearest is the one whose largest limit is exceeded least; among those that do not, the one
whose memory exceeds the least (then its limits). A budget no plan meets is then named by a
plan that runs (the cheapest that fits, say), not by one that needs four times the GPU's
memory because it is cheaper still.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["MEMORY_CONSTRAINTS", "miss_key", "nearest", "nearest_index"]

MEMORY_CONSTRAINTS = ("hbm", "expansion")
"""Constraints a plan must meet to run at all; the others are the user's limits."""


def miss_key(constraints: Mapping[str, Any]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(how far the memory exceeds what the plan has, 0 where it fits; the largest value of the
    user's limits, -inf where the spec sets none), elementwise over arrays of plans or for one
    plan's floats: compare misses by the first, then the second."""
    memory = [np.asarray(constraints[k], dtype=np.float64)
              for k in MEMORY_CONSTRAINTS if k in constraints]
    limits = [np.asarray(v, dtype=np.float64) for k, v in constraints.items()
              if k not in MEMORY_CONSTRAINTS]
    over = np.maximum(np.max(np.stack(memory), axis=0), 0.0) if memory else np.float64(0.0)
    rest = np.max(np.stack(limits), axis=0) if limits else np.full(np.shape(over), -np.inf)
    return np.asarray(over, dtype=np.float64), np.asarray(rest, dtype=np.float64)


def nearest(constraints: Mapping[str, Any], eligible: Any = True
            ) -> tuple[int, tuple[float, float]]:
    """The index (into the flattened arrays) of the nearest miss among the `eligible` plans
    (the structurally valid ones), earlier plans winning ties, and its miss_key ((inf, inf)
    where none is eligible)."""
    over, rest = miss_key(constraints)
    shape = np.broadcast_shapes(np.shape(over), np.shape(rest), np.shape(eligible))
    over = np.where(np.broadcast_to(eligible, shape), np.broadcast_to(over, shape),
                    np.inf).ravel()
    rest = np.where(np.isinf(over), np.inf, np.broadcast_to(rest, shape).ravel())
    i = _first_least(over, rest)
    return i, (float(over[i]), float(rest[i]))


def _first_least(first: NDArray[np.float64], second: NDArray[np.float64]) -> int:
    """The index that `np.lexsort((second, first))` puts first (the least `first`, then the
    least `second`, then the earliest), found with two minimum passes instead of a sort of
    every plan; NaN, which a sort puts last and a minimum returns, is left to the sort."""
    if np.isnan(first).any() or np.isnan(second).any():
        return int(np.lexsort((second, first))[0])
    ties = np.flatnonzero(first == first.min())
    return int(ties[np.argmin(second[ties])])


def nearest_index(constraints: Mapping[str, Any], eligible: Any = True) -> int:
    """nearest's index alone."""
    return nearest(constraints, eligible)[0]
