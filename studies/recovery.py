"""Trials whose worker is gone: failed, and queued again (same parameters) while the study
still needs trials.

The rules, by storage:

- RDB (SQLite, PostgreSQL, MySQL) with heartbeats: a running trial whose heartbeat is older
  than the grace period is stale (Optuna's rule), and so is one that never beat and started
  more than the grace period ago (its worker died while the sampler proposed it).
- Journal files have no heartbeats. Each running trial records its worker (studies.journal)
  as the system attribute `worker` = {host, pid, start (the process's start time), trial
  (its number)}. A running trial is stale when its worker ran on this host and that process
  is gone (no such pid, or a pid reused by a process started at another time), when it
  names no worker JOURNAL_UNSTAMPED_S after it started (its worker died before recording
  itself), or when it started more than `stale_after_s` (JOURNAL_STALE_S, 5 minutes) ago: a
  worker on another host. A tuner trial takes well under a second, so a trial that
  old has no live worker.

A failed trial is queued again at most `max_retry` times (its `retry_history`).
"""

from __future__ import annotations

import copy
import os
import socket
import warnings
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import optuna
import sqlalchemy
import sqlalchemy.orm
from optuna.storages._rdb.models import TrialHeartbeatModel
from optuna.trial import FrozenTrial, TrialState

from .backend import backend as backend_of

__all__ = ["JOURNAL_STALE_S", "JOURNAL_UNSTAMPED_S", "WORKER_ATTR", "fail_silent_trials",
           "process_gone", "process_identity", "recover_stale_trials", "waiting_retries",
           "worker_identity"]

JOURNAL_UNSTAMPED_S = 60.0
"""Seconds after which a running trial of a journal storage that names no worker is stale: a
live worker names itself within one storage call of starting the trial (studies.journal),
which can wait out the 30 s after which a dead process's lock on the journal is broken."""
JOURNAL_STALE_S = 300.0
"""Seconds after which a running trial of a journal storage is stale, whatever its worker."""
WORKER_ATTR = "worker"
_MAX_RETRY = 3


def _start_ticks(pid: int) -> str:
    """The process's start time since boot (Linux /proc, clock ticks); '' elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return fields[19]  # field 22 of proc(5), counted after the command name
    except (OSError, IndexError):
        return ""


def worker_identity() -> dict[str, Any]:
    """This process as a worker: host name, pid and start time."""
    return process_identity(os.getpid())


def process_identity(pid: int) -> dict[str, Any]:
    """Process `pid` of this host as a worker record: host name, pid and start time (the
    record stays true when the pid is later reused: its start time differs)."""
    return {"host": socket.gethostname(), "pid": pid, "start": _start_ticks(pid)}


def process_gone(owner: dict[str, Any]) -> bool:
    """True when the worker record `owner` (process_identity) ran on this host and that
    process no longer exists (False for another host's: it cannot be known from here)."""
    return _process_gone(owner)


def _process_gone(owner: dict[str, Any]) -> bool:
    """True when `owner` ran on this host and its process no longer exists."""
    if owner.get("host") != socket.gethostname() or not isinstance(owner.get("pid"), int):
        return False
    pid = owner["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    start = _start_ticks(pid)
    return bool(start and owner.get("start") and start != owner["start"])


def _older_than(trial: FrozenTrial, seconds: float) -> bool:
    cutoff = datetime.now() - timedelta(seconds=seconds)  # datetime_start is local time
    return trial.datetime_start is not None and trial.datetime_start < cutoff


def _running(study: optuna.Study) -> list[FrozenTrial]:
    return list(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))


def _journal_stale(study: optuna.Study, stale_after_s: float) -> list[FrozenTrial]:
    stale = []
    for trial in _running(study):
        owner = trial.system_attrs.get(WORKER_ATTR)  # a retry carries its original's
        named = owner if isinstance(owner, dict) and owner.get("trial") == trial.number \
            else None
        if (named is not None and _process_gone(named)) or _older_than(trial, stale_after_s) \
                or (named is None and _older_than(trial, JOURNAL_UNSTAMPED_S)):
            stale.append(trial)
    return stale


def _silent(study: optuna.Study, backend: optuna.storages.RDBStorage) -> list[FrozenTrial]:
    """Running trials older than the grace period that never sent a heartbeat."""
    grace = backend.grace_period or 2 * (backend.heartbeat_interval or 0)
    old = {t._trial_id: t for t in _running(study) if _older_than(t, grace)}
    if not old:
        return []
    with sqlalchemy.orm.Session(backend.engine) as session:
        beaten = set(session.scalars(sqlalchemy.select(TrialHeartbeatModel.trial_id).where(
            TrialHeartbeatModel.trial_id.in_(list(old)))))
    return [t for i, t in sorted(old.items()) if i not in beaten]


def _fail(study: optuna.Study, trial_ids: Iterable[int]) -> list[int]:
    """Fail the trials still running; the ids this call failed (not another worker)."""
    failed = []
    for trial_id in trial_ids:
        try:
            if study._storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                failed.append(trial_id)
        except optuna.exceptions.UpdateFinishedTrialError:  # finished or failed meanwhile
            continue
    return failed


def _retry(study: optuna.Study, failed: list[int]) -> None:
    """Queue the failed trials again: the storage's stale-trial callback, or (journal) the
    same retry with its max_retry."""
    if not failed:
        return
    backend = backend_of(study)
    callback = (backend.get_heartbeat_stale_trial_callback()
                if isinstance(backend, optuna.storages.RDBStorage) else None)
    if callback is None:
        with warnings.catch_warnings():  # experimental in Optuna 5
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            callback = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=_MAX_RETRY)
    for trial_id in failed:
        callback(study, copy.deepcopy(study._storage.get_trial(trial_id)))


def _numbers(study: optuna.Study, trial_ids: list[int]) -> list[int]:
    return [study._storage.get_trial_number_from_id(i) for i in trial_ids]


def fail_silent_trials(study: optuna.Study) -> list[int]:
    """Fail the running trials that never sent a heartbeat and started more than the grace
    period ago, and queue them again; their numbers. Only for RDB storages with heartbeats.

    Optuna fails only a trial whose heartbeat went stale: a worker killed between creating a
    trial and its first heartbeat (while the sampler proposes) leaves it RUNNING for ever, and
    a resumed study would never be done with it. A live worker beats within moments of
    creating its trial, far inside the grace period."""
    backend = backend_of(study)
    if not isinstance(backend, optuna.storages.RDBStorage) or not backend.heartbeat_interval:
        return []
    failed = _fail(study, [t._trial_id for t in _silent(study, backend)])
    _retry(study, failed)
    return _numbers(study, failed)


def recover_stale_trials(
    study: optuna.Study, *, target: int | None = None, stale_after_s: float = JOURNAL_STALE_S,
) -> list[int]:
    """Fail the running trials whose worker is gone (the module's rules) and queue them
    again; the numbers of the trials this call failed.

    With a trial `target` (complete trials), only as many are queued again as the study still
    needs beyond its complete and live running trials: a retry the target no longer needs
    would be left waiting, or overshoot it."""
    backend = backend_of(study)
    if isinstance(backend, optuna.storages.RDBStorage):
        if not backend.heartbeat_interval:
            return []
        stale_ids = list(backend._get_stale_trial_ids(study._study_id))
        stale_ids += [t._trial_id for t in _silent(study, backend)]
    else:
        stale_ids = [t._trial_id for t in _journal_stale(study, stale_after_s)]
    failed = _fail(study, sorted(set(stale_ids)))
    if failed:
        wanted = len(failed) if target is None else max(0, target - _pending(study))
        _retry(study, failed[:wanted])
    return _numbers(study, failed)


def waiting_retries(study: optuna.Study) -> int:
    """Queued retries of failed trials (not plans enqueued by a warm start)."""
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    with warnings.catch_warnings():  # experimental in Optuna 5
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retried = optuna.storages.RetryHeartbeatStaleTrialCallback.retried_trial_number
        return sum(retried(t) is not None for t in waiting)


def _pending(study: optuna.Study) -> int:
    """Trials that are or will be complete without a retry: complete, running, waiting."""
    states = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING)
    return len(study.get_trials(deepcopy=False, states=states))
