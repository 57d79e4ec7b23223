"""The Optuna objective: a trial chooses the layout and the cluster, one vectorised call
sweeps every combination of the cheap knobs, and the best plan is the trial's result."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from search_spaces import INNER_KNOBS, GPUSection, Space, SpecError
from studies import RESULT_ATTR

from .evaluation import best_plan, cluster_values, result_of
from .scoring import DIRECTIONS

__all__ = ["PlanObjective", "label"]


def label(value: Any) -> Any:
    """A value Optuna can store as a categorical choice (custom GPUs by name)."""
    return value.name if isinstance(value, GPUSection) else value


@dataclass(frozen=True)
class _Outcome:
    values: tuple[float, ...]
    constraints: dict[str, float]
    attrs: dict[str, Any]


class PlanObjective:
    """Callable for `study.optimize`. `sweep_inner` (default) sweeps INNER_KNOBS for each
    trial in one cost-model call; without it every searched knob is sampled (one plan per
    trial). Plans proposed again are answered from a cache, never re-evaluated."""

    def __init__(self, space: Space, *, sweep_inner: bool = True) -> None:
        self.space = space
        self.directions = [DIRECTIONS[o] for o in space.spec.objective]
        swept = set(INNER_KNOBS) if sweep_inner else set()
        self.knobs = [k for k in space.searched if k not in swept]
        self._labels = {k: {label(v): v for v in space.choices[k]} for k in self.knobs}
        self._cache: dict[tuple[Any, ...], _Outcome | str] = {}
        self.evaluations = 0

    def remember(self, trials: Iterable[FrozenTrial]) -> None:
        """Prime the cache with finished trials of the study (when it is continued)."""
        for t in trials:
            key = tuple(t.params.get(k) for k in self.knobs)
            if t.state == TrialState.COMPLETE and t.values is not None:
                self._cache[key] = _Outcome(tuple(t.values), dict(t.constraints),
                                            dict(t.user_attrs))

    def __call__(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        params = {k: trial.suggest_categorical(k, list(self._labels[k])) for k in self.knobs}
        key = tuple(params.values())
        outcome = self._cache.get(key)
        if outcome is None:
            outcome = self._evaluate({k: self._labels[k][v] for k, v in params.items()})
            self._cache[key] = outcome
        else:
            trial.set_user_attr("cached", True)
        if isinstance(outcome, str):
            trial.set_user_attr("pruned_reason", outcome)
            raise optuna.TrialPruned(outcome)
        for name, value in outcome.constraints.items():
            trial.set_constraint(name, value)
        for name, value in outcome.attrs.items():
            trial.set_user_attr(name, value)
        return outcome.values[0] if len(outcome.values) == 1 else outcome.values

    def _evaluate(self, chosen: dict[str, Any]) -> _Outcome | str:
        """The best plan for the chosen knobs, or the reason there is none."""
        try:
            cluster = self.space.cluster(cluster_values(self.space, chosen))
        except SpecError as err:
            return str(err)
        fixed = {k: v for k, v in chosen.items() if not k.startswith("cluster.")}
        candidate = best_plan(self.space, cluster, fixed)
        self.evaluations += 1
        if candidate is None:
            return f"no structurally valid plan with {fixed} on {int(cluster.gpus)} GPUs"
        result = result_of(self.space, candidate)
        attrs: dict[str, Any] = {RESULT_ATTR: result, "plans_evaluated": candidate.evaluated,
                                 "plans_feasible": candidate.feasible_plans}
        return _Outcome(candidate.objectives, candidate.constraints, attrs)
