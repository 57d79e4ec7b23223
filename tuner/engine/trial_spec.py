"""One trial of a stored study as a fixed spec: the study's spec with the trial's plan and
cluster written in, so that `tuner explain NAME` and `tuner plan NAME --as spec` show and
export exactly the plan the study found (its best, or a trial the user names)."""

from __future__ import annotations

import copy
import shlex
from dataclasses import dataclass
from typing import Any

import optuna
import yaml
from optuna.trial import TrialState

from cost import PlanRecord, PlanResult
from search_spaces import StudySpec, parse_spec
from studies import (
    best_results,
    complete_count,
    nearest_result,
    result_of,
    stored_spec,
    swept,
)

from ..errors import TunerError

__all__ = ["ChosenPlan", "chosen_plan", "fixed_plan_values"]


@dataclass(frozen=True)
class ChosenPlan:
    """A trial's plan: its number, stored result, the fixed spec's data (YAML-ready) and the
    fixed spec itself (its file the study's, so that a relative calibration path holds)."""

    trial: int
    result: PlanResult
    data: dict[str, Any]
    spec: StudySpec


def _trial(study: optuna.Study, number: int | None
           ) -> tuple[optuna.trial.FrozenTrial, PlanResult]:
    """The trial `number`, or the study's best (the first of a Pareto front)."""
    if number is None:
        best = best_results(study, top=1)
        if not best:
            raise TunerError(_no_feasible(study))
        number = best[0].trial
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    trial = trials.get(number)
    result = result_of(trial) if trial is not None else None
    if trial is None or trial.state != TrialState.COMPLETE or result is None:
        state = "no such trial" if trial is None else f"state {trial.state.name}"
        raise TunerError(f"study '{study.study_name}' trial {number} has no result ({state}); "
                         f"choose a complete trial ({_listing(study.study_name)})")
    return trial, result


def _listing(name: str) -> str:
    """Advice to list a study's trials, as typed: `tuner export` needs the study's name."""
    return f"`tuner export {shlex.quote(name)}` lists them"


def _no_feasible(study: optuna.Study) -> str:
    """Why study has no best plan and which trial to name instead: after an exhaustive sweep
    no plan of its space is feasible and more trials cannot find one (studies.swept); the
    nearest miss is the trial to look at (studies.nearest_result)."""
    name = study.study_name
    nearest = nearest_result(study)
    if nearest is None and swept(study) is None and not complete_count(study):
        # nothing is known of the constraints yet: relaxing them would not help
        return (f"study '{name}' has no trial completed yet; run them (`tuner resume "
                f"{shlex.quote(name)}`), then name a plan")
    if swept(study) is not None:
        why = ("an exhaustive sweep saw every plan of its space and none fits memory and the "
               "constraints; relax the constraints or widen the space")
    else:
        why = (f"no trial so far fits memory and the constraints; run more trials (`tuner "
               f"resume {shlex.quote(name)}`) or relax the constraints")
    pick = (f"the nearest miss is trial {nearest.trial} (--trial {nearest.trial})"
            if nearest is not None else f"--trial N picks any trial ({_listing(name)})")
    return f"study '{name}' has no feasible plan: {why}; {pick}"


_POOL_KNOBS = ("placement", "batch_shares")
"""Plan knobs of clusters of several GPU types (at their defaults on one GPU type)."""


def fixed_plan_values(plan: PlanRecord, knobs: frozenset[str], *, pools: bool = False
                      ) -> dict[str, Any]:
    """The plan section of a fixed spec: every knob the workload uses (dp as the count it
    resolves to: on pools, the GPUs of the pools the plan uses), and any other knob that is
    not at its default; an unset sync and an unset shard_group (0: every data-parallel rank)
    left out, and the knobs of pools on one GPU type."""
    values = plan.as_dict()
    defaults = PlanRecord().as_dict()
    out = {}
    for name, value in values.items():
        if name == "sync" and value == "auto":
            continue
        if name == "parameter_servers" and values.get("sync") != "parameter_server":
            continue
        if name == "shard_group" and not value:
            continue
        if name in _POOL_KNOBS and not pools:
            continue
        if name in knobs or value != defaults.get(name):
            out[name] = value
    return out


def _gpu_value(options: Any, label: Any) -> Any:
    """The spec value a trial's GPU label stands for (a custom GPU's mapping by name)."""
    for option in options.values() if hasattr(options, "values") else ():
        if not isinstance(option, str) and getattr(option, "name", None) == label:
            return option.model_dump(mode="json")
    return label


def _set_cluster_value(spec: StudySpec, cluster: dict[str, Any], knob: str, label: Any) -> None:
    """Write a trial's cluster choice into a spec's cluster mapping: `expansion.<field>`,
    `pools[i].<field>` (into that pool) or a field of the cluster."""
    if knob.startswith("expansion."):
        cluster.setdefault("expansion", {})[knob.split(".", 1)[1]] = label
    elif knob.startswith("pools["):
        index, field = knob[len("pools["):].split("].", 1)
        pool = cluster["pools"][int(index)]
        options = (spec.cluster.pools or ())[int(index)].gpu
        pool[field] = _gpu_value(options, label) if field == "gpu" else label
    else:
        cluster[knob] = _gpu_value(spec.cluster.gpu, label) if knob == "gpu" else label


def chosen_plan(study: optuna.Study, number: int | None = None) -> ChosenPlan:
    """The study's best plan (or trial `number`'s) as a fixed spec."""
    trial, result = _trial(study, number)
    spec = stored_spec(study)
    data = copy.deepcopy(yaml.safe_load(study.user_attrs["spec_text"]))
    data["name"] = f"{study.study_name}-trial-{trial.number}"
    data.pop("search", None)
    cluster = data.setdefault("cluster", {})
    for key, label in trial.params.items():
        if not key.startswith("cluster."):
            continue
        _set_cluster_value(spec, cluster, key[len("cluster."):], label)
    if "expansion" in cluster and not result.cluster.expansion_capacity_bytes:
        # capacity 0 chosen from a list: no tier. Its bandwidth, alone, is refused in a spec
        # ("holds nothing to offload"): `tuner plan --as spec` and `tuner explain NAME` failed
        del cluster["expansion"]
    data["plan"] = fixed_plan_values(result.plan, spec.model.to_model_spec().knobs,
                                     pools=spec.cluster.pools is not None)
    fixed = parse_spec(data, file=spec.file, name=data["name"])
    return ChosenPlan(trial=trial.number, result=result, data=data, spec=fixed)
