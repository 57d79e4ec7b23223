"""Reading studies back: the list of studies in a storage, the best plan(s) of one, and its
trials as flat rows, CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any, Literal

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from cost import PlanRecord, PlanResult
from search_spaces.misses import miss_key

from .errors import StudyError
from .metadata import load_study, target_trials
from .records import RESULT_ATTR, TrialResult, equivalent_plans, is_feasible, result_of

__all__ = ["best_payload", "best_results", "export_page", "export_trials", "list_studies",
           "nearest_result", "studies_page", "trials_table"]

_STATES = {"complete": TrialState.COMPLETE, "pruned": TrialState.PRUNED,
           "fail": TrialState.FAIL, "running": TrialState.RUNNING}


def _direction_names(study: optuna.Study) -> list[str]:
    return [d.name.lower() for d in study.directions]


def _best_values(study: optuna.Study, trials: list[FrozenTrial]) -> list[float] | None:
    """The best feasible value of each objective, each on its own (None: nothing feasible)."""
    feasible = [t for t in trials if is_feasible(t) and t.values is not None]
    if not feasible:
        return None
    best = []
    for i, direction in enumerate(study.directions):
        pick = max if direction == StudyDirection.MAXIMIZE else min
        best.append(pick(t.values[i] for t in feasible))
    return best


def _summary(study: optuna.Study) -> dict[str, Any]:
    trials = study.get_trials(deepcopy=False)
    attrs = study.user_attrs
    target = target_trials(study)
    counts = {name: sum(t.state == state for t in trials) for name, state in _STATES.items()}
    return {
        "name": study.study_name,
        "directions": _direction_names(study),
        "objectives": list(attrs.get("objectives", [])),
        "target_trials": target,
        "trials": len(trials),
        **counts,
        "best_values": _best_values(study, trials),
        "cost_model_version": attrs.get("cost_model_version"),
        # the names `tuner search --json`, `tuner worker --json` and the HTTP API's status
        # give the same counts (target_trials, complete and fail kept for the programs that
        # read them)
        "target": target,
        "completed": counts["complete"],
        "failed": counts["fail"],
    }


def list_studies(storage: optuna.storages.BaseStorage) -> list[dict[str, Any]]:
    """One summary per study, by name: directions, objectives, trial target, counts by state
    (complete, pruned, fail, running), best feasible value(s), cost-model version."""
    return studies_page(storage, offset=0, limit=None)[0]


def studies_page(storage: optuna.storages.BaseStorage, *, offset: int, limit: int | None
                 ) -> tuple[list[dict[str, Any]], int]:
    """The summaries (list_studies) of the studies `offset` to `offset + limit` (None: all)
    by name, and how many studies the storage holds; a study deleted meanwhile is left
    out."""
    names = sorted(optuna.study.get_all_study_names(storage))
    page = names[offset:] if limit is None else names[offset:offset + limit]
    summaries = [_summary_if_there(storage, name) for name in page]
    return [s for s in summaries if s is not None], len(names)


def _summary_if_there(storage: optuna.storages.BaseStorage, name: str
                      ) -> dict[str, Any] | None:
    try:
        return _summary(load_study(storage, name))
    except (StudyError, KeyError):
        if name in optuna.study.get_all_study_names(storage):
            raise
        return None  # deleted since the names were read


def _plan_key(trial: FrozenTrial) -> str:
    result = result_of(trial)
    if result is None:
        return f"trial:{trial.number}"
    return json.dumps({"plan": result.plan.as_dict(), "cluster": result.cluster.as_dict()},
                      sort_keys=True)


def _result_key(result: PlanResult) -> str:
    """Equal for plans of one cluster whose step time, memory and price agree to 1e-9
    relative (equivalent layouts: selective recompute under flash attention, ...)."""
    figures = (result.step_time_s, result.memory_total_bytes, result.cost_to_train_usd,
               result.time_to_train_days)
    return json.dumps({"cluster": result.cluster.as_dict(),
                       "figures": [f"{float(x):.9e}" for x in figures]}, sort_keys=True)


def _with_trial(trial: FrozenTrial, equivalents: tuple[PlanRecord, ...] = ()
                ) -> TrialResult | None:
    result = result_of(trial)
    if result is None:
        return None
    value: float | list[float] | None = trial.value if len(trial.values or []) == 1 \
        else trial.values
    return TrialResult(trial=trial.number, value=value, result=result,
                       equivalents=(*equivalent_plans(trial), *equivalents))


def _distinct(trials: list[FrozenTrial], top: int | None) -> list[TrialResult]:
    """The first `top` distinct results, in order: a trial whose plan was seen is left out,
    one whose result equals a kept one's joins it as an equivalent plan."""
    seen: set[str] = set()
    groups: dict[str, list[tuple[FrozenTrial, PlanResult]]] = {}
    for trial in trials:
        key = _plan_key(trial)
        result = result_of(trial)
        if key in seen or result is None:
            continue
        seen.add(key)
        same = _result_key(result)
        if same not in groups and top is not None and len(groups) >= top:
            continue
        groups.setdefault(same, []).append((trial, result))
    out = [_with_trial(members[0][0], tuple(r.plan for _, r in members[1:]))
           for members in groups.values()]
    return [r for r in out if r is not None]


def best_results(study: optuna.Study, *, top: int = 1) -> list[TrialResult]:
    """The best feasible plans with their trial numbers and values.

    One objective: the `top` best distinct results in the study's direction. Two objectives:
    the Pareto front of feasible trials, by the first objective. A plan stored twice is shown
    once; plans with the same result (equivalent layouts) are one entry, the others listed as
    its `equivalents`. [] when nothing is feasible."""
    if len(study.directions) == 1:
        feasible = [t for t in study.get_trials(deepcopy=False)
                    if is_feasible(t) and RESULT_ATTR in t.user_attrs]
        sign = -1.0 if study.direction == StudyDirection.MAXIMIZE else 1.0
        ranked = sorted(feasible, key=lambda t: (sign * float(t.values[0]), t.number))
        return _distinct(ranked, max(top, 0))
    front = [t for t in study.best_trials if is_feasible(t) and RESULT_ATTR in t.user_attrs]
    front.sort(key=lambda t: (*t.values, t.number))
    return _distinct(front, None)


def nearest_result(study: optuna.Study) -> TrialResult | None:
    """The infeasible plan nearest to feasible (search_spaces.misses: one that fits in memory
    before one that does not, then the least excess), earlier trials winning ties; None where
    no finished trial holds a result with constraint values. What `tuner search` names when no
    plan is feasible."""
    missed = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if t.constraints and not is_feasible(t) and RESULT_ATTR in t.user_attrs]
    if not missed:
        return None
    return _with_trial(min(missed, key=lambda t: (*map(float, miss_key(t.constraints)),
                                                  t.number)))


def best_payload(study: optuna.Study, *, top: int = 1) -> dict[str, Any]:
    """`tuner best NAME --json` (and the HTTP API's best): the study's name, its best plans
    (best_results) and, where none is feasible, the `nearest` miss (nearest_result)."""
    results = best_results(study, top=top)
    out: dict[str, Any] = {"study": study.study_name, "best": [r.as_dict() for r in results]}
    nearest = None if results else nearest_result(study)
    if nearest is not None:
        out["nearest"] = nearest.as_dict()
    return out


def _flatten(data: dict[str, Any], prefix: str, row: dict[str, Any], *, keep_lists: bool
             ) -> None:
    """`data` as flat keys (`plan.tp`) into `row`. A list is kept as it is (`keep_lists`: JSON
    holds lists), else a list of mappings gets a key per item and field (`pools[1].layers`,
    as the params name `cluster.pools[1].gpu`) and a list of values is joined by '; '."""
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            _flatten(value, f"{name}.", row, keep_lists=keep_lists)
        elif isinstance(value, list) and keep_lists:
            row[name] = value
        elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    _flatten(item, f"{name}[{i}].", row, keep_lists=False)
                else:
                    row[f"{name}[{i}]"] = item
        elif isinstance(value, list):
            row[name] = "; ".join(str(v) for v in value)
        else:
            row[name] = value


def _trial_row(trial: FrozenTrial, *, keep_lists: bool = False) -> dict[str, Any]:
    """One flat row: number, state, value(s), params, duration (s), result, constraints."""
    row: dict[str, Any] = {"number": trial.number, "state": trial.state.name}
    values = trial.values or []
    if len(values) <= 1:
        row["value"] = values[0] if values else None
    else:
        row.update({f"values_{i}": v for i, v in enumerate(values)})
    row.update({f"params.{k}": v for k, v in trial.params.items()})
    duration = trial.duration
    row["duration_s"] = duration.total_seconds() if duration is not None else None
    stored = result_of(trial)
    _flatten(stored.as_dict() if stored is not None else {}, "", row, keep_lists=keep_lists)
    # the values the sampler saw, in the result's columns (`constraints.hbm`, which they
    # equal), not in a second set: a pruned trial has them without a result
    row.update({f"constraints.{k}": v for k, v in trial.constraints.items()})
    return row


def trials_table(study: optuna.Study, *, keep_lists: bool = False) -> list[dict[str, Any]]:
    """One flat row per trial, by number: `plan.tp`, `cluster.gpu`, `memory_per_gpu_bytes.total`,
    `time_breakdown_s.<term>`, `constraints.<key>`, ... (SI units, as in PLAN_RESULT); lists
    (`violations`, a cluster's `pools`) as _flatten writes them."""
    return [_trial_row(t, keep_lists=keep_lists) for t in study.get_trials(deepcopy=False)]


def _json_safe(value: Any) -> Any:
    """`value` with non-finite floats as null (JSON has no NaN), inside lists and mappings
    too."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value


def export_page(study: optuna.Study, *, offset: int, limit: int | None
                ) -> tuple[list[dict[str, Any]], int]:
    """The JSON export's rows (export_trials) of the trials `offset` to `offset + limit`
    (None: all) by number, and how many trials the study holds. Optuna reads every trial of
    the study still; only the rows of the page are built."""
    trials = study.get_trials(deepcopy=False)
    page = trials[offset:] if limit is None else trials[offset:offset + limit]
    rows = [{k: _json_safe(v) for k, v in _trial_row(t, keep_lists=True).items()}
            for t in page]
    return rows, len(trials)


def _empty_header(study: optuna.Study) -> list[str]:
    """The columns every trial's row starts with (_trial_row), for a study without trials, so
    that a script reading the CSV by column finds a header (a blank line before)."""
    values = ["value"] if len(study.directions) == 1 else [
        f"values_{i}" for i in range(len(study.directions))]
    return ["number", "state", *values, "duration_s"]


def export_trials(study: optuna.Study, fmt: Literal["csv", "json"]) -> str:
    """The trials table as CSV (header: the union of the rows' keys in first-seen order) or as
    a JSON list of row objects."""
    if fmt == "json":
        return json.dumps(export_page(study, offset=0, limit=None)[0], indent=2)
    if fmt != "csv":
        raise StudyError(f"export format {fmt!r} is unknown; use 'csv' or 'json'")
    rows = trials_table(study)
    header = list(dict.fromkeys(key for row in rows for key in row)) or _empty_header(study)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
