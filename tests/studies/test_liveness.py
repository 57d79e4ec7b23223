"""A worker between two trials has none running: studies.live_workers looks on while the
study's last trial finished moments ago (the worker will ask its next one), and answers at
once for a study none has touched for a while."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import optuna
import pytest

from studies import live_workers
from studies.liveness import BETWEEN_TRIALS_S, LOOK_EVERY_S, LOOKS


def _study(tmp_path: Path) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 'w.db'}", study_name="s")


def test_a_worker_between_two_trials_is_seen_when_it_asks_its_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker asks after the plain looks; the time after the last finish that the looks
    go on is made long, so that a loaded machine that stalls this test for a moment (the
    timer late, the ask slow) does not make the ask come after it: the study is answered as
    soon as it is seen."""
    study = _study(tmp_path)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    monkeypatch.setattr("studies.liveness.BETWEEN_TRIALS_S", 60.0)
    slow_s = LOOKS * LOOK_EVERY_S + 0.5  # longer than the plain looks
    asked = threading.Timer(slow_s, study.ask)
    started = time.monotonic()  # before the timer starts: it asks slow_s after, at least
    asked.start()
    try:
        found = live_workers(study)
        assert found == [None], "the worker that asked its next trial is live"
        assert time.monotonic() - started >= slow_s
    finally:
        asked.join()


def test_a_study_whose_worker_just_left_is_looked_at_a_while(tmp_path: Path) -> None:
    study = _study(tmp_path)
    assert live_workers(study) == []  # no trial at all
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    finished = study.trials[-1].datetime_complete
    assert finished is not None
    assert live_workers(study) == []  # finished just now: looked at a while, none came
    # looked at until BETWEEN_TRIALS_S after the finish, however late the call came (a
    # loaded machine may stall this test between the trial and the call)
    assert datetime.now() >= finished + timedelta(seconds=BETWEEN_TRIALS_S)


@pytest.mark.parametrize("looks", [0, 1])
def test_a_study_no_trial_finished_lately_is_answered_at_once(
        tmp_path: Path, looks: int) -> None:
    """A trial that finished an hour ago: no wait for a next trial (BETWEEN_TRIALS_S), at
    most the plain looks; the bound is the wait it must not make, not a moment a loaded
    machine can exceed by a stall."""
    study = _study(tmp_path)
    long_ago = datetime.now() - timedelta(hours=1)
    study.add_trial(optuna.trial.FrozenTrial(
        number=0, state=optuna.trial.TrialState.COMPLETE, value=0.5, datetime_start=long_ago,
        datetime_complete=long_ago, params={"x": 0.5},
        distributions={"x": optuna.distributions.FloatDistribution(0, 1)}, user_attrs={},
        system_attrs={}, intermediate_values={}, trial_id=0))
    started = time.monotonic()
    assert live_workers(study, looks=looks) == []
    assert time.monotonic() - started < BETWEEN_TRIALS_S - 0.5
