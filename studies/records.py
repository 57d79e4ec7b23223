"""One trial's result as stored: the PLAN_RESULT dict (shared/SPEC.md) in the trial's user
attributes, and whether the trial is feasible (complete, every constraint value <= 0)."""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

__all__ = ["RESULT_ATTR", "is_feasible", "record_result", "result_of"]

RESULT_ATTR = "result"


def record_result(trial: optuna.Trial | FrozenTrial, result: dict[str, Any]) -> None:
    """Store one plan's PLAN_RESULT (builtin types only: it is kept as JSON) on `trial`."""
    trial.set_user_attr(RESULT_ATTR, result)


def result_of(trial: FrozenTrial) -> dict[str, Any] | None:
    """The PLAN_RESULT stored on `trial`, or None (pruned before evaluation, or failed)."""
    result = trial.user_attrs.get(RESULT_ATTR)
    return result if isinstance(result, dict) else None


def is_feasible(trial: FrozenTrial) -> bool:
    """True for a COMPLETE trial whose constraint values (Optuna's, <= 0 feasible) all hold."""
    if trial.state != TrialState.COMPLETE:
        return False
    return all(value <= 0.0 for value in trial.constraints.values())
