"""Workers running a study now, as its storage records them, whoever started them (a server,
or `tuner worker NAME` by hand in another process or on another machine).

- RDB storages: a running trial whose heartbeat is at most `grace_s` old (the database's
  clock), or which has not beaten yet and started at most `grace_s` ago. A heartbeat names
  no process: such a worker is anonymous (None).
- Journal files: a running trial whose worker (studies.journal's WORKER_ATTR) is not gone by
  studies.recovery's rules; the worker's record, or None for a trial that names none yet.

A worker takes a moment between two trials with none running: a study is looked at a few
times (LOOKS, LOOK_EVERY_S apart) while it shows none, and while its last trial finished at
most BETWEEN_TRIALS_S ago (a worker telling one trial and asking the next on a loaded machine,
or on a database other workers write to, takes longer than the looks: it showed as gone)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any, cast

import optuna
import sqlalchemy
import sqlalchemy.orm
from optuna.storages._rdb.models import TrialHeartbeatModel, TrialModel
from optuna.trial import FrozenTrial, TrialState

from .backend import backend
from .recovery import JOURNAL_STALE_S, WORKER_ATTR, _journal_stale
from .retry import retried

__all__ = ["LIVE_GRACE_S", "LOOK_EVERY_S", "live_workers"]

LIVE_GRACE_S = 20.0
"""Seconds a heartbeat shows its worker alive: twice the command line's default --heartbeat
(a worker started with a longer one may look gone between two beats)."""
LOOKS = 3
LOOK_EVERY_S = 0.1
"""Seconds between two looks at a study that shows no live worker."""
BETWEEN_TRIALS_S = 3.0
"""Seconds after a trial finished during which a study that shows no live worker is looked
at again: its worker may be between two trials."""


def live_workers(study: optuna.Study, *, grace_s: float = LIVE_GRACE_S, looks: int = LOOKS
                 ) -> list[dict[str, Any] | None]:
    """The study's live workers (the module's rules): one entry per distinct worker record
    (host, pid, start), and one None per running trial whose worker is not named; looked at
    up to `looks` times while none shows, and on while the last trial finished at most
    BETWEEN_TRIALS_S ago."""
    found: list[dict[str, Any] | None] = []
    for look in range(looks):
        if look:
            time.sleep(LOOK_EVERY_S)
        found = _look(study, grace_s)
        if found:
            return found
    age_s = _since_last_finished_s(study) if looks else None
    if age_s is None:
        return found
    deadline = time.monotonic() + BETWEEN_TRIALS_S - min(max(age_s, 0.0), BETWEEN_TRIALS_S)
    while not found and time.monotonic() < deadline:
        time.sleep(LOOK_EVERY_S)
        found = _look(study, grace_s)
    return found


def _since_last_finished_s(study: optuna.Study) -> float | None:
    """Seconds since the study's last trial finished, or None when none has; an RDB storage
    is asked for the one time (naive UTC, as Optuna's RDBStorage stores it), not all trials."""
    storage = backend(study)
    if isinstance(storage, optuna.storages.RDBStorage):
        column = TrialModel.__table__.c.datetime_complete

        def read() -> datetime | None:
            with sqlalchemy.orm.Session(storage.engine) as session:
                return cast("datetime | None", session.execute(
                    sqlalchemy.select(sqlalchemy.func.max(column)).where(
                        TrialModel.__table__.c.study_id == study._study_id)).scalar())
        last = retried(read)
        if last is None:
            return None
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        return (now - last.replace(tzinfo=None)).total_seconds()
    done = [t.datetime_complete for t in study.get_trials(deepcopy=False)
            if t.datetime_complete is not None]
    if not done:
        return None
    last = max(done)
    now = datetime.now(last.tzinfo) if last.tzinfo is not None else datetime.now()
    return (now - last).total_seconds()


def _look(study: optuna.Study, grace_s: float) -> list[dict[str, Any] | None]:
    running = list(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
    if not running:
        return []
    storage = backend(study)
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

    def read() -> tuple[Any, dict[int, datetime]]:
        with sqlalchemy.orm.Session(storage.engine) as session:
            return session.execute(sqlalchemy.func.now()).scalar(), dict(session.execute(
                sqlalchemy.select(TrialHeartbeatModel.trial_id, TrialHeartbeatModel.heartbeat)
                .where(TrialHeartbeatModel.trial_id.in_([t._trial_id for t in running])))
                .all())
    now, beats = retried(read)
    if now is None:
        return []
    now = now.replace(tzinfo=None)
    started_after = datetime.now() - grace
    return [t for t in running
            if (t._trial_id in beats and now - beats[t._trial_id] <= grace)
            or (t._trial_id not in beats and t.datetime_start is not None
                and t.datetime_start >= started_after)]
