"""Trials whose worker is gone: failed, and queued again (same parameters) while the study
still needs trials.

The rules, by storage:

- RDB (SQLite, PostgreSQL, MySQL) with heartbeats: a running trial whose heartbeat is older
  than the grace period is stale (Optuna's rule), and so is one that never beat and started
  more than the grace period ago (its worker died while the sampler proposed it).
- Journal files have no heartbeats. Each trial records its worker as the system attribute
  `worker` = {host, pid, start (the process's start time), trial (its number)}. A running
  trial is stale when its worker ran on this host and that process is gone (no such pid, or
  a pid reused by a process started at another time), or when it started more than
  `stale_after_s` (JOURNAL_STALE_S, 5 minutes) ago: a worker on another host, or one that
  died before recording itself. A tuner trial takes well under a second, so a trial that
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

__all__ = ["JOURNAL_STALE_S", "WORKER_ATTR", "fail_silent_trials", "recover_stale_trials",
           "stamp_trial", "uses_stamps", "worker_identity"]

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
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": _start_ticks(pid)}


def uses_stamps(study: optuna.Study) -> bool:
    """True for storages without heartbeats (journal files): trials record their worker."""
    return not isinstance(_backend(study), optuna.storages.RDBStorage)


def stamp_trial(trial: optuna.Trial) -> None:
    """Record this process as the worker of `trial` (system attribute WORKER_ATTR)."""
    trial.storage.set_trial_system_attr(trial._trial_id, WORKER_ATTR,
                                        {**worker_identity(), "trial": trial.number})


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


def _backend(study: optuna.Study) -> optuna.storages.BaseStorage:
    storage = study._storage  # Optuna's cache in front of an RDBStorage
    return getattr(storage, "_backend", storage)


def _older_than(trial: FrozenTrial, seconds: float) -> bool:
    cutoff = datetime.now() - timedelta(seconds=seconds)  # datetime_start is local time
    return trial.datetime_start is not None and trial.datetime_start < cutoff


def _running(study: optuna.Study) -> list[FrozenTrial]:
    return list(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))


def _journal_stale(study: optuna.Study, stale_after_s: float) -> list[FrozenTrial]:
    stale = []
    for trial in _running(study):
        owner = trial.system_attrs.get(WORKER_ATTR)
        mine = isinstance(owner, dict) and owner.get("trial") == trial.number
        if (isinstance(owner, dict) and mine and _process_gone(owner)) \
                or _older_than(trial, stale_after_s):
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
    backend = _backend(study)
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
    backend = _backend(study)
    if not isinstance(backend, optuna.storages.RDBStorage) or not backend.heartbeat_interval:
        return []
    failed = _fail(study, [t._trial_id for t in _silent(study, backend)])
    _retry(study, failed)
    return _numbers(study, failed)


def recover_stale_trials(
    study: optuna.Study, *, retry: bool = True, stale_after_s: float = JOURNAL_STALE_S,
) -> list[int]:
    """Fail the running trials whose worker is gone (the module's rules) and, with `retry`,
    queue each again; the numbers of the trials this call failed."""
    backend = _backend(study)
    if isinstance(backend, optuna.storages.RDBStorage):
        if not backend.heartbeat_interval:
            return []
        stale_ids = list(backend._get_stale_trial_ids(study._study_id))
        stale_ids += [t._trial_id for t in _silent(study, backend)]
    else:
        stale_ids = [t._trial_id for t in _journal_stale(study, stale_after_s)]
    failed = _fail(study, sorted(set(stale_ids)))
    if retry:
        _retry(study, failed)
    return _numbers(study, failed)
