"""An exhaustive sweep kept in its study: the best plans as finished trials (not a trial per
plan), the counts of plans evaluated and feasible, and a mark that the study's problem was
swept, so that running the same search again adds nothing."""

from __future__ import annotations

import json
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution

from search_spaces import Space
from studies import (
    EQUIVALENT_ATTR,
    RESULT_ATTR,
    complete_count,
    exclusively,
    set_target_trials,
    store_swept,
)

from .evaluation import label, result_of
from .exhaustive import SweepSummary

__all__ = ["EXHAUSTIVE_ATTR", "write_sweep"]

EXHAUSTIVE_ATTR = "exhaustive"
"""The user attribute (True) of a trial that an exhaustive sweep stored."""


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def write_sweep(study: optuna.Study, space: Space, summary: SweepSummary) -> int:
    """Add the sweep's best plans to the study as finished trials, leaving out those an
    earlier sweep already stored; mark the problem as swept and make the trial target the
    trials the study holds (so that `tuner resume` and workers have nothing left to run).
    As the study's only writer (studies.exclusively), so that sweeps started at once store
    their plans once; on SQLite in one transaction, stored whole or not at all, with one wait
    for the disk. Returns the trials added."""
    with exclusively(study):
        return _write(study, space, summary)


def _write(study: optuna.Study, space: Space, summary: SweepSummary) -> int:
    distributions = {k: CategoricalDistribution([label(v) for v in space.choices[k]])
                     for k in space.searched}
    stored = {_key(t.params) for t in study.get_trials(deepcopy=False)
              if t.user_attrs.get(EXHAUSTIVE_ATTR)}
    added = 0
    results: list[dict[str, Any] | None] = [None] * len(summary.best)
    if summary.results is not None:  # worked out by a forked sweep
        results = list(summary.results)
    for (candidate, knobs), result in zip(summary.best, results, strict=True):
        if _key(knobs) in stored:
            continue
        trial = optuna.trial.create_trial(
            params=knobs, distributions={k: distributions[k] for k in knobs},
            values=list(candidate.objectives),
            user_attrs={RESULT_ATTR: result or result_of(space, candidate).as_dict(),
                        EXHAUSTIVE_ATTR: True,
                        EQUIVALENT_ATTR: list(candidate.extra.get("equivalent", []))},
            system_attrs={f"constraints:{k}": v for k, v in candidate.constraints.items()},
        )
        study.add_trial(trial)
        added += 1
    store_swept(study, {"evaluated": summary.evaluated, "feasible_plans": summary.feasible,
                        "seconds": summary.seconds, "stored_trials": len(summary.best)})
    set_target_trials(study, complete_count(study))
    return added
