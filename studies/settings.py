"""How a study is searched, stored with it so that `tuner resume` and `tuner worker` carry on
as it was started: the sampler actually used (an `auto` search resolves to `exhaustive` or an
Optuna sampler), its seed, which knobs a trial sweeps, and what `auto` measured; and whether
an exhaustive sweep of the study's problem is already stored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from .metadata import stored_spec

__all__ = ["SEARCH_ATTR", "SWEPT_ATTR", "began", "search_settings", "store_search_settings",
           "store_swept", "swept"]

SEARCH_ATTR = "search"
SWEPT_ATTR = "exhaustive"


def store_search_settings(study: optuna.Study, settings: Mapping[str, Any]) -> None:
    """Keep `settings` (builtin types: sampler, seed, swept knobs, ...) with the study."""
    study.set_user_attr(SEARCH_ATTR, dict(settings))


def began(study: optuna.Study) -> bool:
    """Whether the study's search began: its settings stored, or a trial made (a study of an
    earlier tuner). False for one stopped while `auto` counted its space, before either."""
    return SEARCH_ATTR in study.user_attrs or bool(study.get_trials(deepcopy=False))


def search_settings(study: optuna.Study) -> dict[str, Any]:
    """The stored settings; for a study of an earlier tuner, those of its spec's `search`."""
    stored = study.user_attrs.get(SEARCH_ATTR)
    if isinstance(stored, dict):
        return dict(stored)
    search = stored_spec(study).search
    sampler = "tpe" if search.sampler == "auto" else search.sampler
    return {"sampler": sampler, "requested": search.sampler, "seed": search.seed}


def store_swept(study: optuna.Study, summary: Mapping[str, Any]) -> None:
    """Mark the study's problem as swept exhaustively: plans evaluated and feasible, seconds,
    the problem's digest (a sweep of the same problem is not run or stored again)."""
    study.set_user_attr(SWEPT_ATTR, {**summary,
                                     "problem_digest": study.user_attrs.get("problem_digest")})
    study.set_user_attr("evaluated", int(summary["evaluated"]))
    study.set_user_attr("feasible_plans", int(summary["feasible_plans"]))
    study.set_user_attr("exhaustive_seconds", float(summary["seconds"]))


def swept(study: optuna.Study) -> dict[str, Any] | None:
    """The stored exhaustive sweep of the study's problem, or None (one read of the study's
    attributes: each `study.user_attrs` reads and copies them all)."""
    attrs = study.user_attrs
    mark = attrs.get(SWEPT_ATTR)
    if isinstance(mark, dict) and mark.get("problem_digest") == attrs.get("problem_digest"):
        return mark
    return None
