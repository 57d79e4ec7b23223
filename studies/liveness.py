"""Workers running a study now, as its storage records them, whoever started them (a server,
or `tuner worker NAME` by hand in another process or on another machine).

- RDB storages: a running trial whose heartbeat is at most `grace_s` old (the database's
  clock), or which has not beaten yet and started at most `grace_s` ago. A heartbeat names
  no process: such a worker is anonymous (None).
- Journal files: a running trial whose worker (studies.journal's WORKER_ATTR) is not gone by
  studies.recovery's rules; the worker's record, or None for a trial that names none yet.

A worker takes a moment between two trials with none running: a study is looked at a few
times (LOOKS, LOOK_EVERY_S apart) while it shows none."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import optuna
import sqlalchemy
import sqlalchemy.orm
from optuna.storages._rdb.models import TrialHeartbeatModel
from optuna.trial import FrozenTrial, TrialState

from .recovery import JOURNAL_STALE_S, WORKER_ATTR, _journal_stale

__all__ = ["LIVE_GRACE_S", "LOOK_EVERY_S", "live_workers"]

LIVE_GRACE_S = 20.0
"""Seconds a heartbeat shows its worker alive: twice the command line's default --heartbeat
(a worker started with a longer one may look gone between two beats)."""
LOOKS = 3
LOOK_EVERY_S = 0.1
"""Seconds between two looks at a study that shows no live worker."""


def live_workers(study: optuna.Study, *, grace_s: float = LIVE_GRACE_S, looks: int = LOOKS
                 ) -> list[dict[str, Any] | None]:
    """The study's live workers (the module's rules): one entry per distinct worker record
    (host, pid, start), and one None per running trial whose worker is not named; looked at
    up to `looks` times while none shows."""
    for look in range(looks):
        found = _look(study, grace_s)
        if found or look >= looks - 1:
            return found
        time.sleep(LOOK_EVERY_S)
    return []


def _look(study: optuna.Study, grace_s: float) -> list[dict[str, Any] | None]:
    running = list(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
    if not running:
        return []
    storage = getattr(study._storage, "_backend", study._storage)
    if isinstance(storage, optuna.storages.RDBStorage):
        return [None for _ in _beating(storage, running, grace_s)]
    stale = {t.number for t in _journal_stale(study, JOURNAL_STALE_S)}
    named: dict[tuple[Any, Any], dict[str, Any]] = {}
    anonymous: list[dict[str, Any] | None] = []
    for trial in (t for t in running if t.number not in stale):
        owner = trial.system_attrs.get(WORKER_ATTR)
        if isinstance(owner, dict) and owner.get("trial") == trial.number:
            named[(owner.get("host"), owner.get("pid"))] = owner
        else:
            anonymous.append(None)
    return [*named.values(), *anonymous]


def _beating(storage: optuna.storages.RDBStorage, running: list[FrozenTrial],
             grace_s: float) -> list[FrozenTrial]:
    """The running trials that beat within `grace_s` (the database's clock, as Optuna
    compares), or that never beat and started within `grace_s` (local time, as stored)."""
    grace = timedelta(seconds=grace_s)
    with sqlalchemy.orm.Session(storage.engine) as session:
        now = session.execute(sqlalchemy.func.now()).scalar()
        beats = dict(session.execute(sqlalchemy.select(
            TrialHeartbeatModel.trial_id, TrialHeartbeatModel.heartbeat).where(
            TrialHeartbeatModel.trial_id.in_([t._trial_id for t in running]))).tuples().all())
    if now is None:
        return []
    now = now.replace(tzinfo=None)
    started_after = datetime.now() - grace
    return [t for t in running
            if (t._trial_id in beats and now - beats[t._trial_id] <= grace)
            or (t._trial_id not in beats and t.datetime_start is not None
                and t.datetime_start >= started_after)]
