"""Where a stored study stands, read from the storage alone: finished or not, and the status
that GET /v1/studies/{name} answers (tuner.serve.models.StudyStatus)."""

from __future__ import annotations

import time
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from studies import SEARCH_ATTR, search_settings, swept, target_trials

from ..engine.search import summary

__all__ = ["SERVE_ATTR", "finished", "status"]

SERVE_ATTR = "serve"
"""The user attribute of a study launched by the server (tuner.serve.runner)."""
_UNFINISHED = (TrialState.RUNNING, TrialState.WAITING)


def finished(study: optuna.Study, trials: list[FrozenTrial] | None = None) -> bool:
    """True when there is nothing left to run: an exhaustive study swept, or an Optuna one
    at its target of complete trials with none running or waiting (judged on `trials`, the
    study's trials as read by the caller, when given)."""
    settings = study.user_attrs.get(SEARCH_ATTR)
    if not isinstance(settings, dict):  # not prepared by a search: nothing to run
        return True
    if settings.get("sampler") == "exhaustive":
        return swept(study) is not None
    if trials is None:
        trials = study.get_trials(deepcopy=False)
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    return complete >= target_trials(study) and not any(t.state in _UNFINISHED for t in trials)


def _state(study: optuna.Study, trials: list[FrozenTrial], live: int, deadline: Any) -> str:
    if finished(study, trials):
        return "done"
    if live:
        return "running"
    if isinstance(deadline, (int, float)) and deadline <= time.time():
        return "timed_out"
    return "stopped"


def status(study: optuna.Study, *, live: int, outside: int = 0, error: str | None
           ) -> dict[str, Any]:
    """The study's StudyStatus object; `live` worker processes of the server and `outside`
    others (studies.live_workers) run it now, `error` is the last failure of one."""
    trials = list(study.get_trials(deepcopy=False))
    count = {state: sum(t.state == state for t in trials) for state in TrialState}
    record = study.user_attrs.get(SERVE_ATTR)
    deadline = record.get("deadline") if isinstance(record, dict) else None
    # the state before the summary: each reads the storage anew, and a sweep that ends
    # between the two reads must not show as done and not optimal (a sweep stays swept)
    state = _state(study, trials, live + outside, deadline)
    out = summary(study)
    settings = search_settings(study) if SEARCH_ATTR in study.user_attrs else {}
    return {
        "study": study.study_name, "state": state,
        "target": target_trials(study), "completed": count[TrialState.COMPLETE],
        "running": count[TrialState.RUNNING], "waiting": count[TrialState.WAITING],
        "failed": count[TrialState.FAIL], "pruned": count[TrialState.PRUNED],
        "sampler": settings.get("sampler"), "requested_sampler": settings.get("requested"),
        "optimal": out["optimal"], "evaluated": out["evaluated"],
        "feasible_plans": out.get("feasible_plans"),
        "directions": [d.name.lower() for d in study.directions],
        "workers": live, "outside_workers": outside, "error": error,
    }
