"""Where studies live: the storage URL (CLI, environment, default), its redaction for output,
and opening it as an Optuna RDBStorage with heartbeats and retries of stale trials."""

from __future__ import annotations

import copy
import os
import re
import warnings
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
import sqlalchemy.exc
import sqlalchemy.orm
from optuna.storages._rdb.models import TrialHeartbeatModel
from optuna.trial import TrialState
from sqlalchemy.engine import make_url

from .errors import StudyError

__all__ = ["DEFAULT_STORAGE_URL", "ENV_VAR", "fail_silent_trials", "open_storage", "redact_url",
           "storage_url"]

DEFAULT_STORAGE_URL = "sqlite:///studies/studies.db"
"""SQLite file `studies/studies.db`, relative to the current directory."""

ENV_VAR = "TUNER_STORAGE"

_PASSWORD = re.compile(r"(?P<head>://[^:/?#@]*:)[^@/?#]*(?P<tail>@)")


def storage_url(cli_value: str | None) -> str:
    """The storage URL: the CLI value, else $TUNER_STORAGE, else DEFAULT_STORAGE_URL."""
    if cli_value:
        return cli_value
    return os.environ.get(ENV_VAR) or DEFAULT_STORAGE_URL


def redact_url(url: str) -> str:
    """`url` with any password replaced by `***`, safe to print or log."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparseable URL may still hold a password
        return _PASSWORD.sub(r"\g<head>***\g<tail>", str(url))


def _sqlite_path(url: str) -> Path | None:
    """The database file of a sqlite URL; None for other backends and in-memory databases."""
    try:
        parsed = make_url(url)
    except Exception:
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    if parsed.database == ":memory:" or parsed.database.startswith("file:"):
        return None
    return Path(parsed.database)


def _prepare_sqlite_dir(url: str, path: Path) -> None:
    """Create the parent directory of a SQLite file; it must be writable."""
    parent = path.expanduser().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StudyError(f"storage {redact_url(url)}: cannot create directory {parent} "
                         f"({err.strerror}); give --storage (or {ENV_VAR}) a writable "
                         "place") from err
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StudyError(f"storage {redact_url(url)}: directory {parent} is not writable; "
                         f"give --storage (or {ENV_VAR}) a writable place")


def _engine_kwargs(sqlite: bool) -> dict[str, Any]:
    """SQLite waits up to 60 s on a lock instead of failing; servers check pooled
    connections before use (pool_pre_ping)."""
    if sqlite:
        return {"connect_args": {"timeout": 60}}
    return {"pool_pre_ping": True}


def open_storage(
    url: str,
    *,
    heartbeat_interval_s: int | None = 10,
    grace_period_s: int | None = None,
    max_retry: int = 3,
    create: bool = True,
) -> optuna.storages.RDBStorage:
    """Open (creating the tables if needed) the RDB storage at `url`.

    With `heartbeat_interval_s` (seconds), running trials beat; one silent for
    `grace_period_s` (default twice the interval) is failed and retried up to `max_retry`
    times. With `create=False` a SQLite file that does not exist is an error, not a new
    database (for commands that only read). Raises StudyError, one line with the redacted URL,
    when the storage cannot be used.
    """
    path = _sqlite_path(url)
    if path is not None and not create and not path.expanduser().is_file():
        raise StudyError(f"storage {redact_url(url)}: no file {path}; run `tuner search SPEC` "
                         f"to make a study there, or give --storage (or {ENV_VAR})")
    if path is not None:
        _prepare_sqlite_dir(url, path)
    try:
        with warnings.catch_warnings():  # heartbeats are experimental in Optuna 5
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(
                url, engine_kwargs=_engine_kwargs(path is not None),
                **_heartbeat(heartbeat_interval_s, grace_period_s, max_retry))
    except Exception as err:
        raise _storage_error(url, err) from err


def _heartbeat(interval_s: int | None, grace_s: int | None, max_retry: int) -> dict[str, Any]:
    """RDBStorage's heartbeat arguments: beat every `interval_s`, fail a trial silent for
    `grace_s` (default 2 * interval) and queue it again, at most `max_retry` times."""
    if interval_s is None:
        return {}
    return {
        "heartbeat_interval": interval_s,
        "grace_period": grace_s,
        "heartbeat_stale_trial_callback":
            optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=max_retry),
    }


def fail_silent_trials(study: optuna.Study) -> list[int]:
    """Fail the running trials that never sent a heartbeat and started more than the grace
    period ago, and hand them to the storage's stale-trial callback (which queues them again);
    their numbers.

    Optuna fails only a trial whose heartbeat went stale: a worker killed between creating a
    trial and its first heartbeat (while the sampler proposes) leaves it RUNNING for ever, and
    a resumed study would never be done with it. A live worker beats within moments of
    creating its trial, far inside the grace period."""
    storage = study._storage  # Optuna's cache in front of the RDBStorage
    backend = getattr(storage, "_backend", storage)
    if not isinstance(backend, optuna.storages.RDBStorage) or not backend.heartbeat_interval:
        return []
    grace = backend.grace_period or 2 * backend.heartbeat_interval
    cutoff = datetime.now() - timedelta(seconds=grace)  # datetime_start is local time too
    old = {t._trial_id: t.number
           for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
           if t.datetime_start is not None and t.datetime_start < cutoff}
    if not old:
        return []
    with sqlalchemy.orm.Session(backend.engine) as session:
        beaten = set(session.scalars(sqlalchemy.select(TrialHeartbeatModel.trial_id).where(
            TrialHeartbeatModel.trial_id.in_(list(old)))))
    failed = []
    for trial_id in sorted(set(old) - beaten):
        try:
            if storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                failed.append(trial_id)
        except optuna.exceptions.UpdateFinishedTrialError:  # another worker finished it
            continue
    callback = backend.get_heartbeat_stale_trial_callback()
    for trial_id in failed:
        if callback is not None:
            callback(study, copy.deepcopy(storage.get_trial(trial_id)))
    return [old[i] for i in failed]


def _driver(url: str) -> str:
    try:
        parsed = make_url(url)
    except Exception:
        return "the driver"
    return f"the driver of {parsed.drivername}"


def _storage_error(url: str, err: Exception) -> StudyError:
    """A one-line StudyError for a storage that cannot be opened; never shows a password."""
    shown = redact_url(url)
    sqlite = _sqlite_path(url) is not None
    if isinstance(err, sqlalchemy.exc.NoSuchModuleError):
        what = ("names a database SQLAlchemy does not know; use sqlite:///FILE, "
                "postgresql+psycopg://... or mysql+pymysql://...")
    elif isinstance(err, sqlalchemy.exc.ArgumentError):
        what = "is not a storage URL; give one such as sqlite:///studies/studies.db"
    elif isinstance(err, ImportError):
        what = f"needs {_driver(url)}, which is not installed; install it or use sqlite:///FILE"
    elif isinstance(err, sqlalchemy.exc.OperationalError) and sqlite:
        what = "cannot be opened as a SQLite file; check the path and its permissions"
    elif isinstance(err, sqlalchemy.exc.OperationalError):
        what = "does not answer or refused the connection; check host, port and credentials"
    elif isinstance(err, RuntimeError) and "version" in str(err).lower():
        what = ("holds an Optuna schema of another version; run `optuna storage upgrade "
                "--storage URL` or use another storage")
    else:
        what = f"cannot be opened ({type(err).__name__}); check the URL and the database"
    return StudyError(f"storage {shown} {what}")
