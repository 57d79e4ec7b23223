"""One trial's result as stored: a PlanResult (cost.result) kept as its `as_dict` object in
the trial's user attributes, and whether the trial is feasible (complete, every constraint
value <= 0)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from cost import PlanRecord, PlanResult

__all__ = ["EQUIVALENT_ATTR", "RESULT_ATTR", "TrialResult", "equivalent_plans", "is_feasible",
           "record_result", "result_of"]

RESULT_ATTR = "result"
EQUIVALENT_ATTR = "equivalent_plans"
"""A trial's user attribute: other plans (as_dict) with the same result, not stored as trials
of their own (an exhaustive sweep's equivalent layouts)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialResult:
    """A stored trial's plan result, its number and objective value(s)."""

    trial: int
    value: float | list[float] | None
    result: PlanResult
    equivalents: tuple[PlanRecord, ...] = ()  # other plans with the same result

    def as_dict(self) -> dict[str, Any]:
        """PLAN_RESULT (shared/SPEC.md) plus "trial", "value", and "equivalent": the plans
        of the other stored trials whose result is the same (when there are any)."""
        out = {**self.result.as_dict(), "trial": self.trial, "value": self.value}
        if self.equivalents:
            out["equivalent"] = [p.as_dict() for p in self.equivalents]
        return out


def record_result(trial: optuna.Trial | FrozenTrial, result: PlanResult) -> None:
    """Store one plan's result on `trial` (as JSON, through Optuna's user attributes)."""
    trial.set_user_attr(RESULT_ATTR, result.as_dict())


def result_of(trial: FrozenTrial) -> PlanResult | None:
    """The result stored on `trial`, or None (pruned before evaluation, or failed)."""
    stored = trial.user_attrs.get(RESULT_ATTR)
    return PlanResult.from_dict(stored) if isinstance(stored, dict) else None


def is_feasible(trial: FrozenTrial) -> bool:
    """True for a COMPLETE trial whose constraint values (Optuna's, <= 0 feasible) all hold."""
    if trial.state != TrialState.COMPLETE:
        return False
    return all(value <= 0.0 for value in trial.constraints.values())


def equivalent_plans(trial: FrozenTrial) -> tuple[PlanRecord, ...]:
    """The plans stored on `trial` as equivalent to its own (EQUIVALENT_ATTR)."""
    stored = trial.user_attrs.get(EQUIVALENT_ATTR) or []
    return tuple(PlanRecord.from_dict(p) for p in stored if isinstance(p, dict))
