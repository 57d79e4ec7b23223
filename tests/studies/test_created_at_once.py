"""Two processes creating the same study at once (two `tuner search` of one spec, started
together by a scheduler): the second found the study Optuna had just made, before the first
had written our metadata into it, and refused the same spec as another problem ("cluster
differs: stored null"), exit code 2. It waits for the metadata and continues the study."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import optuna
import pytest

from studies import create_or_continue, spec_digest

from .builders import gpt3_text, spec_of, storage_in

DIRECTIONS = ["maximize"]


def test_a_study_being_created_is_continued_once_its_metadata_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = gpt3_text()
    spec = spec_of(text)
    storage_in(tmp_path)  # the tables, before either side opens the file
    written = optuna.Study.set_user_attr

    def slow(study: optuna.Study, key: str, value: object) -> None:
        time.sleep(0.05)  # the creator between Optuna's create_study and its last attribute
        written(study, key, value)

    monkeypatch.setattr(optuna.Study, "set_user_attr", slow)
    creator = threading.Thread(target=create_or_continue, args=(storage_in(tmp_path), spec, text),
                               kwargs={"directions": DIRECTIONS, "target_trials": 20})
    creator.start()
    other = storage_in(tmp_path)
    deadline = time.monotonic() + 10
    while not other.get_all_studies():  # Optuna has made it; our metadata is being written
        assert time.monotonic() < deadline
        time.sleep(0.005)
    try:
        study = create_or_continue(other, spec, text, directions=DIRECTIONS,
                                   target_trials=None)
    finally:
        creator.join()
    assert study.user_attrs["spec_digest"] == spec_digest(spec)
    assert study.user_attrs["target_trials"] == 20
