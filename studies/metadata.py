"""Our metadata on a stored study, kept in its user attributes (no tables of our own): the spec
as given, its canonical JSON and digest, the schema and cost-model versions, the trial target.

Creating a study of an existing name continues it when the problem is the same (same digest)
and refuses, naming the sections that differ, when it is not."""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from typing import Any

import optuna
import yaml

from search_spaces import SpecError, StudySpec, parse_spec

from .errors import StudyError
from .identity import (
    for_gpus,
    gpu_labels,
    leaf_differences,
    problem,
    problem_digest,
    problem_leaf_differences,
    shown_differences,
    without_profile_name,
)
from .metrics import name_metrics
from .retry import one_transaction
from .storage import redact_url

__all__ = [
    "SCHEMA_VERSION",
    "check_problem",
    "create_or_continue",
    "load_study",
    "nearest_name",
    "set_target_trials",
    "spec_digest",
    "stored_spec",
    "target_trials",
]

SCHEMA_VERSION = 1
_NOT_THE_PROBLEM = {"name", "search"}
"""Sections that do not change the problem: more trials, another sampler or seed continue."""
_NOT_COMPARED = _NOT_THE_PROBLEM | {"calibration"}
"""What the spec's comparison leaves out: those sections, and the calibration profile's file
name, whose contents the resolved problem compares (studies.identity, `_check_resolved`): a
profile moved or renamed with the same numbers is the same problem."""
_CREATING_WAIT_S = 10.0
"""How long a study another process is creating may take to get our metadata (`_written`)."""


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True)


def _problem(spec_json: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec_json.items() if k not in _NOT_COMPARED}


def spec_digest(spec: StudySpec) -> str:
    """sha256 (hex) of the canonical JSON of the spec without `name`, `search` and the
    calibration profile's file name: model, training, cluster, plan space, objective and
    constraints (the profile's contents are the resolved problem's: `_check_resolved`)."""
    problem = spec.model_dump(mode="json", exclude=_NOT_COMPARED)
    return hashlib.sha256(_canonical(problem).encode("utf-8")).hexdigest()


def _storage_name(storage: optuna.storages.BaseStorage) -> str:
    """The storage's redacted URL: an RDB storage's or a journal's (studies.journal), also
    behind the cache Optuna puts in front of an RDB storage (a loaded study's `_storage`)."""
    url = getattr(storage, "url", None) or getattr(getattr(storage, "_backend", None), "url",
                                                    None)
    return redact_url(url) if isinstance(url, str) else type(storage).__name__


def _mismatch(
    storage: optuna.storages.BaseStorage, study: optuna.Study, spec: StudySpec,
) -> StudyError:
    stored = json.loads(study.user_attrs.get("spec_json", "{}"))
    found = leaf_differences(_problem(stored), spec.model_dump(mode="json",
                                                           exclude=_NOT_COMPARED))
    shown = shown_differences(found, otherwise="the stored spec differs")
    return StudyError(
        f"study '{study.study_name}' in {_storage_name(storage)} holds another problem: "
        f"{shown}; give the spec another `name:` to start a new study, or run "
        f"`tuner resume {shlex.quote(study.study_name)}` to continue with the stored spec")


def _only_fields_added_since(study: optuna.Study, spec: StudySpec) -> bool:
    """True when the stored spec differs from `spec` only by fields a later version added,
    left out (null) in both: the same problem, whose digest moved with the spec's schema."""
    stored = json.loads(study.user_attrs.get("spec_json", "{}"))
    now = spec.model_dump(mode="json", exclude=_NOT_COMPARED)
    return bool(stored) and not leaf_differences(_problem(stored), now)


def _initial_attrs(spec: StudySpec, spec_text: str, target: int) -> dict[str, Any]:
    """Our metadata of a new study, in the order it is written: `spec_digest` last, so that a
    process that finds it knows the rest is there (`_written`)."""
    resolved = problem(spec)
    return {
        "schema_version": SCHEMA_VERSION,
        "spec_text": spec_text,
        "spec_json": _canonical(spec.model_dump(mode="json")),
        "problem_json": _canonical(resolved),
        "problem_digest": problem_digest(resolved),
        "cost_model_version": resolved["cost_model"],
        "target_trials": int(target),
        "objectives": list(spec.objective),
        "spec_file": spec.file,
        "spec_digest": spec_digest(spec),
    }


def _written(storage: optuna.storages.BaseStorage, name: str,
             sampler: optuna.samplers.BaseSampler | None) -> optuna.Study:
    """The stored study `name` once its creator has written our metadata. Optuna creates a
    study, then its attributes are set one at a time: another process creating the same
    study at that moment (two `tuner search` of one spec at once) compared the spec with
    attributes not yet there and refused it as another problem ("cluster differs: stored
    null"). Waits for `spec_digest`, written last, up to _CREATING_WAIT_S; a study that never
    gets it (made by Optuna alone, its creator killed) is compared as it is."""
    deadline = time.monotonic() + _CREATING_WAIT_S
    while True:
        study = load_study(storage, name, sampler=sampler)
        if "spec_digest" in study.user_attrs or time.monotonic() >= deadline:
            return study
        time.sleep(0.05)


def _directions(names: list[str]) -> list[optuna.study.StudyDirection]:
    try:
        return [optuna.study.StudyDirection[name.upper()] for name in names]
    except KeyError as err:
        raise StudyError(f"direction {err.args[0].lower()!r} is unknown; "
                         "use 'minimize' or 'maximize'") from err


def create_or_continue(
    storage: optuna.storages.BaseStorage,
    spec: StudySpec,
    spec_text: str,
    *,
    directions: list[str],
    sampler: optuna.samplers.BaseSampler | None = None,
    target_trials: int | None,
) -> optuna.Study:
    """The study named `spec.name`: created with our metadata, or continued when it holds the
    same problem (studies.identity: the spec, the catalog values and calibration it resolves
    to, the cost model's version); its trial target becomes `target_trials` (the new total;
    None keeps the stored one). Raises StudyError naming what differs when the stored problem
    is another one."""
    try:
        study = optuna.create_study(study_name=spec.name, storage=storage,
                                    directions=_directions(directions),
                                    sampler=sampler)
    except optuna.exceptions.DuplicatedStudyError:
        study = _written(storage, spec.name, sampler)
        if study.user_attrs.get("spec_digest") != spec_digest(spec) and \
                not _only_fields_added_since(study, spec):
            raise _mismatch(storage, study, spec) from None
        _check_resolved(storage, study, spec)
        _follow_moved_profile(study, spec, spec_text)
        if target_trials is not None:
            set_target_trials(study, target_trials)
        return study
    with one_transaction(study):  # one wait for the disk, not one per attribute
        for key, value in _initial_attrs(spec, spec_text, target_trials or 0).items():
            study.set_user_attr(key, value)
        name_metrics(study)
    return study


def _follow_moved_profile(study: optuna.Study, spec: StudySpec, spec_text: str) -> None:
    """Store `spec` as the study's spec when it names its calibration profile at another
    place than the stored spec does (the same numbers: `_check_resolved` passed), so that
    `tuner resume` and `tuner plan` read the profile where it now is."""
    try:
        stored = stored_spec(study).calibration_path()
    except StudyError:
        return
    now = spec.calibration_path()
    if stored is None or now is None or stored.resolve() == now.resolve():
        return
    for key in ("spec_text", "spec_json", "spec_digest", "spec_file"):
        study.set_user_attr(key, _initial_attrs(spec, spec_text, 0)[key])


def _check_resolved(storage: optuna.storages.BaseStorage, study: optuna.Study,
                    spec: StudySpec, *, advice: str = "") -> None:
    """Refuse a study whose problem resolves to other values than `spec`'s today: another
    catalog entry, calibration (for the spec's GPUs: studies.identity.for_gpus) or cost-model
    version (a study of an earlier tuner, without a stored problem, is compared by its
    cost-model version). `advice` says what to do instead."""
    attrs = study.user_attrs
    now = problem(spec)
    if "problem_digest" in attrs:
        if attrs["problem_digest"] == problem_digest(now):
            return
        gpus = gpu_labels(spec)
        stored = for_gpus(without_profile_name(json.loads(attrs.get("problem_json", "{}"))),
                          gpus)
        found = problem_leaf_differences(stored, for_gpus(now, gpus))
        # none: the same problem, whose digest moved with other GPUs' calibration or with
        # fields the spec gained since, left out (null)
        if not found:
            return
        shown = shown_differences(found, otherwise="")
    elif attrs.get("cost_model_version") in (None, now["cost_model"]):
        return
    else:
        shown = (f"the cost model's code changed: version {attrs['cost_model_version']} -> "
                 f"{now['cost_model']}")
    raise StudyError(
        f"study '{study.study_name}' in {_storage_name(storage)} was made for another "
        f"problem: {shown}; its results would not compare with new ones: "
        f"{advice or 'give the spec another `name:` to start a new study'} "
        "(this one stays readable)")


def check_problem(storage: optuna.storages.BaseStorage, study: optuna.Study) -> None:
    """Refuse to continue (resume, worker) a study whose stored spec now resolves to another
    problem (studies.identity), naming what changed and that it must be restored (the stored
    spec cannot be renamed)."""
    _check_resolved(storage, study, stored_spec(study),
                    advice="restore what changed to continue it, or run `tuner search SPEC` "
                           "with another `name:` to start a new study")


def load_study(
    storage: optuna.storages.BaseStorage,
    name: str,
    *,
    sampler: optuna.samplers.BaseSampler | None = None,
) -> optuna.Study:
    """The stored study `name`; StudyError when there is none or a newer tuner made it."""
    try:
        storage.get_study_id_from_name(name)
    except KeyError:
        raise StudyError(f"no study named '{name}' in {_storage_name(storage)}"
                         f"{_nearest_name(storage, name)}; `tuner studies` lists the studies "
                         "there") from None
    study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    version = study.user_attrs.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise StudyError(f"study '{name}' was written with metadata schema {version}, newer "
                         f"than this tuner's {SCHEMA_VERSION}; upgrade cluster-tuner")
    return study


def nearest_name(storage: optuna.storages.BaseStorage, name: str) -> str | None:
    """The stored study name nearest a mistyped one (difflib's closest match), if any."""
    import difflib  # only for a study that is not there

    names = [s.study_name for s in storage.get_all_studies()]
    near = difflib.get_close_matches(name, names, n=1)
    return near[0] if near else None


def _nearest_name(storage: optuna.storages.BaseStorage, name: str) -> str:
    """" (did you mean 'NAME'?)" for the stored study name nearest a mistyped one, else ""."""
    near = nearest_name(storage, name)
    return f" (did you mean '{near}'?)" if near is not None else ""


def stored_spec(study: optuna.Study) -> StudySpec:
    """The spec the study was made from, parsed again from the stored YAML text."""
    text = study.user_attrs.get("spec_text")
    if not isinstance(text, str):
        raise StudyError(f"study '{study.study_name}' holds no spec (it was not made by "
                         "`tuner search`); run `tuner search SPEC` with a new study name")
    file = study.user_attrs.get("spec_file") or study.study_name
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise StudyError(f"study '{study.study_name}': its stored spec is not valid YAML; "
                         "start a new study with `tuner search SPEC`") from err
    if isinstance(data, dict):
        data = {**data, "name": study.study_name}  # the study's name, whatever the text says
    try:
        return parse_spec(data, file=file, name=study.study_name)
    except SpecError as err:
        raise StudyError(f"study '{study.study_name}': its stored spec no longer parses "
                         f"({err}); start a new study with `tuner search SPEC`") from err


def target_trials(study: optuna.Study) -> int:
    """The total number of trials the study is asked to reach (0 when none is stored)."""
    return int(study.user_attrs.get("target_trials", 0))


def set_target_trials(study: optuna.Study, n: int) -> None:
    """Store `n` as the study's trial target (the total, not the remainder)."""
    if n < 0:
        raise StudyError(f"a trial target of {n} is negative; give a count of 0 or more")
    study.set_user_attr("target_trials", int(n))
