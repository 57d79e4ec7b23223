"""A worker between two trials has none running: studies.live_workers looks on while the
study's last trial finished moments ago (the worker will ask its next one), and answers at
once for a study none has touched for a while."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import optuna
import pytest

from studies import live_workers
from studies.liveness import BETWEEN_TRIALS_S, LOOK_EVERY_S, LOOKS


def _study(tmp_path: Path) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 'w.db'}", study_name="s")


def test_a_worker_between_two_trials_is_seen_when_it_asks_its_next(tmp_path: Path) -> None:
    study = _study(tmp_path)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    slow_s = LOOKS * LOOK_EVERY_S + 0.5  # longer than the plain looks
    asked = threading.Timer(slow_s, study.ask)
    asked.start()
    try:
        started = time.monotonic()
        found = live_workers(study)
        assert found == [None], "the worker that asked its next trial is live"
        assert time.monotonic() - started >= slow_s
    finally:
        asked.join()


def test_a_study_whose_worker_just_left_is_looked_at_a_while(tmp_path: Path) -> None:
    study = _study(tmp_path)
    assert live_workers(study) == []  # no trial at all
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    started = time.monotonic()
    assert live_workers(study) == []  # finished just now: looked at a while, none came
    assert time.monotonic() - started >= BETWEEN_TRIALS_S - 1.0


@pytest.mark.parametrize("looks", [0, 1])
def test_a_study_no_trial_finished_lately_is_answered_at_once(
        tmp_path: Path, looks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    study = _study(tmp_path)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    monkeypatch.setattr("studies.liveness.BETWEEN_TRIALS_S", 0.0)  # finished "long ago"
    started = time.monotonic()
    assert live_workers(study, looks=looks) == []
    assert time.monotonic() - started < 1.0
