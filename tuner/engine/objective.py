"""The Optuna objective: a trial chooses the layout and the cluster, one vectorised call
sweeps every combination of the cheap knobs, and the best plan is the trial's result."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from search_spaces import INNER_KNOBS, OUTER_PLAN_KNOBS, Space, SpecError
from search_spaces.wording import counted
from studies import RESULT_ATTR

from .evaluation import best_plan, cluster_values, label, result_of
from .interrupt import Stop
from .scoring import DIRECTIONS

__all__ = ["SWEEP_BUDGET", "PlanObjective", "label", "swept_knobs"]


@dataclass(frozen=True)
class _Outcome:
    values: tuple[float, ...]
    constraints: dict[str, float]
    attrs: dict[str, Any]


SWEEP_BUDGET = 50_000
"""Most plan combinations one trial sweeps (about 30 ms of cost model)."""


def swept_knobs(space: Space, *, sweep_inner: bool, plans_per_cluster: int | None = None,
                trial_plans: int = SWEEP_BUDGET) -> set[str]:
    """The knobs a trial sweeps instead of sampling: the cheap ones (INNER_KNOBS), and when
    the cluster itself is searched (co-design) also the layout (tp, pp, cp, dp), so that a
    trial asks "how fast is this cluster at its best", as long as one cluster's plans stay
    within `trial_plans`: its valid plans when `plans_per_cluster` is known (counted by
    `auto`), else every combination of the plan knobs' values."""
    if not sweep_inner:
        return set()
    swept = set(INNER_KNOBS)
    if any(k.startswith("cluster.") for k in space.searched):
        layout = plans_per_cluster if plans_per_cluster is not None else math.prod(
            len(space.choices[k]) for k in (*INNER_KNOBS, *OUTER_PLAN_KNOBS))
        if layout <= trial_plans:
            swept |= set(OUTER_PLAN_KNOBS)
    return swept


class PlanObjective:
    """Callable for `study.optimize`. With `sweep_inner` (default) a trial samples the
    expensive knobs and sweeps the rest (swept_knobs) in one cost-model call; without it every
    searched knob is sampled (one plan per trial). Plans proposed again are answered from a
    cache, never re-evaluated."""

    def __init__(self, space: Space, *, sweep_inner: bool = True,
                 swept: Iterable[str] | None = None, stop: Stop | None = None) -> None:
        self.space = space
        self.directions = [DIRECTIONS[o] for o in space.spec.objective]
        swept = set(swept_knobs(space, sweep_inner=sweep_inner) if swept is None else swept)
        self.knobs = [k for k in space.searched if k not in swept]
        self.stop = stop
        self.running: int | None = None  # the number of the trial being evaluated
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
        self.running = trial.number
        params = {k: trial.suggest_categorical(k, list(self._labels[k])) for k in self.knobs}
        key = tuple(params.values())
        outcome = self._cache.get(key)
        if outcome is None:
            chosen = {k: self._labels[k][v] for k, v in params.items()}
            if self.stop is None:
                outcome = self._evaluate(chosen)
            else:  # a signal stops the evaluation at once (never a storage call)
                with self.stop.interruptible():
                    outcome = self._evaluate(chosen)
            self._cache[key] = outcome
        else:
            trial.set_user_attr("cached", True)
        if isinstance(outcome, str):
            trial.set_user_attr("pruned_reason", outcome)
            raise optuna.TrialPruned(outcome)
        with warnings.catch_warnings():  # a retried trial carries its original's (equal) values
            warnings.filterwarnings("ignore", message="The constraint value is ignored")
            for name, value in outcome.constraints.items():
                trial.set_constraint(name, value)
        for name, value in outcome.attrs.items():
            trial.set_user_attr(name, value)
        if self.stop is not None:  # stopped while this trial ran: it goes back to the queue
            self.stop.check()
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
            return f"no structurally valid plan with {fixed} on {counted(int(cluster.gpus), 'GPU')}"
        result = result_of(self.space, candidate)
        attrs: dict[str, Any] = {RESULT_ATTR: result.as_dict(),
                                 "plans_evaluated": candidate.evaluated,
                                 "plans_feasible": candidate.feasible_plans}
        return _Outcome(candidate.objectives, candidate.constraints, attrs)
