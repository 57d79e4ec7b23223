"""fail_silent_trials: a running trial that never sent a heartbeat is failed and queued again
once it is older than the grace period; younger ones, beating ones and storages without
heartbeats are left alone."""

from __future__ import annotations

import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from studies import fail_silent_trials, open_storage


def _study(tmp_path: Path, heartbeat: int | None) -> optuna.Study:
    storage = open_storage(f"sqlite:///{tmp_path / 'h.db'}", heartbeat_interval_s=heartbeat,
                           grace_period_s=1 if heartbeat else None)
    return optuna.create_study(study_name="h", storage=storage)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used")
def test_an_old_silent_trial_is_failed_and_queued_again(tmp_path: Path) -> None:
    study = _study(tmp_path, heartbeat=1)
    silent = study.ask()
    # younger than the grace period: looked at through a storage whose grace (60 s) no stall
    # of a loaded machine outlasts, where 1 s could pass between the ask and the look
    patient = open_storage(f"sqlite:///{tmp_path / 'h.db'}", heartbeat_interval_s=1,
                           grace_period_s=60)
    assert fail_silent_trials(optuna.load_study(study_name="h", storage=patient)) == []
    beating = study.ask()
    study._storage.record_heartbeat(beating._trial_id)  # type: ignore[attr-defined]
    time.sleep(1.2)
    assert fail_silent_trials(study) == [silent.number]
    states = {t.number: t.state for t in study.get_trials()}
    assert states[silent.number] == TrialState.FAIL
    assert states[beating.number] == TrialState.RUNNING  # Optuna's own check handles it
    [retry] = study.get_trials(states=(TrialState.WAITING,))
    assert retry.system_attrs["failed_trial"] == silent.number
    assert fail_silent_trials(study) == []


def test_without_heartbeats_nothing_is_failed(tmp_path: Path) -> None:
    study = _study(tmp_path, heartbeat=None)
    study.ask()
    assert fail_silent_trials(study) == []
    assert [t.state for t in study.get_trials()] == [TrialState.RUNNING]
