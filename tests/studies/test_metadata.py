"""Our metadata in a study's user attributes: create, continue, refuse another problem."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

import cost
from studies import (
    SCHEMA_VERSION,
    StudyError,
    cost_model_version,
    create_or_continue,
    load_study,
    spec_digest,
    stored_spec,
    target_trials,
)

from .builders import gpt3_text, spec_of, storage_in

DIRECTIONS = ["maximize"]


def test_create_stores_the_metadata(tmp_path: Path) -> None:
    text = gpt3_text()
    spec = spec_of(text)
    study = create_or_continue(storage_in(tmp_path), spec, text, directions=DIRECTIONS,
                               target_trials=20)
    attrs = study.user_attrs
    assert attrs["schema_version"] == SCHEMA_VERSION
    assert attrs["spec_text"] == text and attrs["spec_digest"] == spec_digest(spec)
    assert attrs["cost_model_version"] == cost_model_version()
    assert attrs["cost_model_version"].startswith(cost.COST_MODEL_VERSION + "+")
    assert attrs["objectives"] == ["throughput"] and attrs["spec_file"] == "gpt3.yaml"
    assert target_trials(study) == 20


def test_the_same_spec_continues_and_sets_the_new_target(tmp_path: Path) -> None:
    storage, text = storage_in(tmp_path), gpt3_text()
    first = create_or_continue(storage, spec_of(text), text, directions=DIRECTIONS,
                               target_trials=20)
    first.add_trial(optuna.trial.create_trial(value=1.0))
    again = create_or_continue(storage, spec_of(text), text, directions=DIRECTIONS,
                               target_trials=50)
    assert again._study_id == first._study_id and len(again.trials) == 1
    assert target_trials(load_study(storage, "gpt3")) == 50


def test_more_trials_or_another_sampler_continue(tmp_path: Path) -> None:
    storage, text = storage_in(tmp_path), gpt3_text()
    create_or_continue(storage, spec_of(text), text, directions=DIRECTIONS, target_trials=5)
    other = text + "search: {sampler: random, trials: 500, seed: 3}\n"
    study = create_or_continue(storage, spec_of(other), other, directions=DIRECTIONS,
                               target_trials=500)
    assert target_trials(study) == 500


def test_a_changed_plan_is_refused_naming_plan(tmp_path: Path) -> None:
    storage = storage_in(tmp_path)
    text = gpt3_text(tp=[1, 2, 4, 8])
    create_or_continue(storage, spec_of(text), text, directions=DIRECTIONS, target_trials=5)
    changed = gpt3_text(tp=[1, 2])
    with pytest.raises(StudyError) as caught:
        create_or_continue(storage, spec_of(changed), changed, directions=DIRECTIONS,
                           target_trials=5)
    message = str(caught.value)
    assert "plan.tp differs: stored [1, 2, 4, 8], now [1, 2]" in message
    assert "name:" in message and "tuner resume gpt3" in message
    assert len(message.splitlines()) == 1


def test_a_missing_study_is_a_study_error(tmp_path: Path) -> None:
    with pytest.raises(StudyError, match=r"no study named 'nope'.*tuner studies"):
        load_study(storage_in(tmp_path), "nope")


def test_stored_spec_round_trips(tmp_path: Path) -> None:
    text = gpt3_text(micro_batch=[1, 2])
    spec = spec_of(text)
    study = create_or_continue(storage_in(tmp_path), spec, text, directions=DIRECTIONS,
                               target_trials=5)
    again = stored_spec(load_study(storage_in(tmp_path), "gpt3"))
    assert again.name == "gpt3" and again.file == "gpt3.yaml"
    assert spec_digest(again) == spec_digest(spec) == study.user_attrs["spec_digest"]


def test_a_study_not_made_by_the_tuner_has_no_spec(tmp_path: Path) -> None:
    storage = storage_in(tmp_path)
    optuna.create_study(study_name="foreign", storage=storage)
    with pytest.raises(StudyError, match="holds no spec"):
        stored_spec(load_study(storage, "foreign"))


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    storage = storage_in(tmp_path)
    optuna.create_study(study_name="future", storage=storage).set_user_attr(
        "schema_version", SCHEMA_VERSION + 1)
    with pytest.raises(StudyError, match="upgrade"):
        load_study(storage, "future")
