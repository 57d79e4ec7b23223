"""A study stored before the spec gained optional fields (null when left out) is the same
problem: `tuner search` continues it instead of calling it another one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studies import StudyError, create_or_continue

from .builders import gpt3_text, spec_of, storage_in


def _drop_nulls(data: object) -> object:
    if isinstance(data, dict):
        return {k: _drop_nulls(v) for k, v in data.items() if v is not None}
    return data


def test_a_study_stored_without_todays_optional_fields_continues(tmp_path: Path) -> None:
    storage = storage_in(tmp_path)
    text = gpt3_text()
    spec = spec_of(text)
    study = create_or_continue(storage, spec, text, directions=["maximize"], target_trials=5)
    stored = json.loads(study.user_attrs["spec_json"])
    study.set_user_attr("spec_json", json.dumps(_drop_nulls(stored)))  # as an older version
    study.set_user_attr("spec_digest", "0" * 64)
    again = create_or_continue(storage, spec, text, directions=["maximize"], target_trials=9)
    assert again.user_attrs["target_trials"] == 9
    other = spec_of(gpt3_text(micro_batch=2))
    with pytest.raises(StudyError, match=r"plan\.micro_batch differs"):
        create_or_continue(storage, other, text, directions=["maximize"], target_trials=9)


def test_a_problem_stored_without_todays_optional_fields_continues(tmp_path: Path) -> None:
    """The resolved problem (studies.identity) holds the spec's dump too, so its digest moves
    when a field is added: continuing refused the study as "made for another problem: the
    stored problem differs", naming nothing. Now only differences of values count."""
    from studies import problem_digest

    storage = storage_in(tmp_path)
    text = gpt3_text()
    spec = spec_of(text)
    study = create_or_continue(storage, spec, text, directions=["maximize"], target_trials=5)
    problem = json.loads(study.user_attrs["problem_json"])
    older = {**problem, "spec": _drop_nulls(problem["spec"])}
    assert older != problem  # some field is null today
    study.set_user_attr("problem_json", json.dumps(older))
    study.set_user_attr("problem_digest", problem_digest(older))
    again = create_or_continue(storage, spec, text, directions=["maximize"], target_trials=9)
    assert again.user_attrs["target_trials"] == 9
    gpus = {name: {**gpu, "hbm_capacity_bytes": 1.0}
            for name, gpu in older["catalog"]["gpus"].items()}
    changed = {**older, "catalog": {**older["catalog"], "gpus": gpus}}
    study.set_user_attr("problem_json", json.dumps(changed))
    study.set_user_attr("problem_digest", problem_digest(changed))
    with pytest.raises(StudyError, match=r"hbm_capacity_bytes differs"):
        create_or_continue(storage, spec, text, directions=["maximize"], target_trials=9)


def test_a_gpu_of_ones_own_stored_before_compute_capability_continues(tmp_path: Path) -> None:
    """`cluster.gpu.compute_capability` was added after studies with GPUs of their own were
    stored: their spec and problem hold no such key, today's dump holds it null."""
    import yaml

    from studies import problem_digest

    data = yaml.safe_load(gpt3_text())
    data["cluster"]["gpu"] = {"name": "my-a100", "peak_flops": "312 TFLOP/s",
                              "hbm_capacity": "80 GiB", "hbm_bandwidth": "2 TB/s"}
    text = yaml.safe_dump(data, sort_keys=False)
    spec = spec_of(text)
    storage = storage_in(tmp_path)
    study = create_or_continue(storage, spec, text, directions=["maximize"], target_trials=5)
    stored_spec = json.loads(study.user_attrs["spec_json"])
    assert stored_spec["cluster"]["gpu"].pop("compute_capability", 0) is None
    problem = json.loads(study.user_attrs["problem_json"])
    assert problem["spec"]["cluster"]["gpu"].pop("compute_capability", 0) is None
    study.set_user_attr("spec_json", json.dumps(stored_spec))  # as the version before stored
    study.set_user_attr("spec_digest", "0" * 64)
    study.set_user_attr("problem_json", json.dumps(problem))
    study.set_user_attr("problem_digest", problem_digest(problem))
    again = create_or_continue(storage, spec, text, directions=["maximize"], target_trials=9)
    assert again.user_attrs["target_trials"] == 9
