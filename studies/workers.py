"""Many workers on one study: what a worker still has to run, the callback that fails (and
retries) the trials of dead workers while it runs, and the wait for other workers' trials
once the target is reached, so that a finished study holds no running or waiting trial."""

from __future__ import annotations

import time

import optuna
from optuna.trial import TrialState

from .backend import backend
from .recovery import JOURNAL_UNSTAMPED_S, recover_stale_trials, waiting_retries

__all__ = ["RECOVERY_EVERY_S", "RecoveryCallback", "complete_count", "finished_under_us",
           "settle", "settle_s", "to_run"]

RECOVERY_EVERY_S = 5.0
"""Seconds between a worker's checks for trials of dead workers while it runs."""
SETTLE_JOURNAL_S = JOURNAL_UNSTAMPED_S + 5.0
SETTLE_POLL_S = 0.2


def complete_count(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def to_run(study: optuna.Study, target: int) -> int:
    """Trials this worker should still start: the shortfall to the target, or the retries of
    dead workers' trials that wait in the queue (each replaces a trial that was in flight)."""
    return max(target - complete_count(study), waiting_retries(study))


def finished_under_us(err: Exception) -> bool:
    """True for the errors of a worker whose running trial another worker failed: updating
    it (UpdateFinishedTrialError) or telling its result ("Cannot tell a FAIL trial")."""
    return isinstance(err, optuna.exceptions.UpdateFinishedTrialError) \
        or str(err).startswith("Cannot tell a ")


class RecoveryCallback:
    """A callback failing (and retrying, as far as the target needs) the trials of dead
    workers at most every RECOVERY_EVERY_S; RDB storages also check heartbeats before each
    trial."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.last = time.monotonic()

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if time.monotonic() - self.last >= RECOVERY_EVERY_S:
            self.last = time.monotonic()
            recover_stale_trials(study, target=self.target)


def settle_s(study: optuna.Study) -> float:
    """How long a finished worker waits for other running trials: a heartbeat grace period
    and one more beat (RDB), or a little more than JOURNAL_UNSTAMPED_S (journal: dead local
    workers are known at once, or once their unnamed trial is that old; remote ones only
    after JOURNAL_STALE_S). It ends as soon as no trial runs."""
    storage = backend(study)
    interval = getattr(storage, "heartbeat_interval", None)
    if not interval:
        return SETTLE_JOURNAL_S
    return float((getattr(storage, "grace_period", None) or 2 * interval) + interval + 1)


def settle(study: optuna.Study, target: int) -> None:
    """Wait up to settle_s for the running trials of other workers, failing the stale ones
    (and retrying those the target needs); stop early when the study falls short."""
    deadline = time.monotonic() + settle_s(study)
    while True:
        recover_stale_trials(study, target=target)
        running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if not running or time.monotonic() > deadline or to_run(study, target) > 0:
            return
        time.sleep(SETTLE_POLL_S)
