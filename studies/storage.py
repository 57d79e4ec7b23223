"""Where studies live: the storage URL (CLI, environment, default), its redaction for output,
and opening it as an Optuna RDBStorage (heartbeats, retries of stale trials, SQLite lock
retries) or a JournalStorage (a log file on a shared file system)."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import optuna
import optuna.storages.journal
import sqlalchemy
import sqlalchemy.exc
from sqlalchemy.engine import make_url

from .errors import StudyError
from .foreign import foreign_tables
from .journal import StampingJournalStorage
from .readonly import read_only_url, writable
from .recovery import fail_silent_trials
from .retry import RetryingSQLiteStorage
from .template import copy_template

__all__ = ["CONNECT_TIMEOUT_S", "DEFAULT_STORAGE_URL", "ENV_VAR", "JOURNAL_SCHEME",
           "close_storage", "directory_problem", "fail_silent_trials", "open_storage",
           "redact_url", "storage_url"]

DEFAULT_STORAGE_URL = "sqlite:///studies.db"
"""SQLite file `studies.db` in the current directory. (Until version 0.1 it was
`studies/studies.db`: a folder named like the `studies` package, which shadowed the package for
`python -m tuner` run there; studies.locate still finds studies in it.)"""

ENV_VAR = "TUNER_STORAGE"
JOURNAL_SCHEME = "journal://"
"""`journal:///abs/path/study.log`: an Optuna journal file, for workers on a shared file system."""
CONNECT_TIMEOUT_S = 5
"""Seconds to wait for a database server to accept a connection."""

_PASSWORD = re.compile(r"(?P<head>://[^:/?#@]*:)[^@/?#]*(?P<tail>@)")


def storage_url(cli_value: str | None) -> str:
    """The storage URL: the CLI value, else $TUNER_STORAGE, else DEFAULT_STORAGE_URL. An
    empty (or blank) one given is a StudyError, not the default: `--storage "$VAR"` with the
    variable unset would otherwise put studies in ./studies.db unannounced."""
    if cli_value is not None:
        if not cli_value.strip():
            raise StudyError("--storage is empty; give a storage URL (e.g. "
                             "sqlite:///studies.db), or leave --storage out for "
                             f"${ENV_VAR} or the default {DEFAULT_STORAGE_URL}")
        return cli_value
    env = os.environ.get(ENV_VAR)
    if env is None:
        return DEFAULT_STORAGE_URL
    if not env.strip():
        raise StudyError(f"${ENV_VAR} is set but empty; set it to a storage URL (e.g. "
                         f"sqlite:///studies.db), or unset it for the default "
                         f"{DEFAULT_STORAGE_URL}")
    return env


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


def _journal_path(url: str) -> Path | None:
    """The file of a journal storage: `journal:///abs/path.log`, or a bare path ending in
    .log or .journal; None for other URLs."""
    if url.startswith(JOURNAL_SCHEME):
        return Path(url[len(JOURNAL_SCHEME):])
    if "://" not in url and url.endswith((".log", ".journal")):
        return Path(url)
    return None


def directory_problem(parent: Path) -> str:
    """Why no file can be made in `parent` ('' when it is a directory): it, or a folder
    above it, is a file; or it does not exist (and is not made: a typo would put a file far
    from where the user looks)."""
    if parent.is_dir():
        return ""
    blocker = next((p for p in (parent, *parent.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        return f"{blocker} is a file, not a directory"
    return f"directory {parent} does not exist; create it (mkdir -p {parent})"


def _prepare_dir(url: str, path: Path) -> None:
    """The directory of a storage file must exist (it is not made: a typo in --storage would
    put a database far from where the user looks) and be writable."""
    parent = path.expanduser().parent
    problem = directory_problem(parent)
    if problem:
        raise StudyError(f"storage {redact_url(url)}: {problem}, or give --storage (or "
                         f"{ENV_VAR}) a file in an existing directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StudyError(f"storage {redact_url(url)}: directory {parent} is not writable; "
                         f"give --storage (or {ENV_VAR}) a writable place")
    if path.expanduser().exists() and not os.access(path.expanduser(), os.R_OK | os.W_OK):
        raise StudyError(f"storage {redact_url(url)}: file {path} is not readable and "
                         f"writable; fix its permissions or give --storage (or {ENV_VAR}) "
                         "another file")


def _engine_kwargs(url: str, sqlite: bool) -> dict[str, Any]:
    """SQLite waits up to 60 s on a lock instead of failing; servers give up connecting
    after CONNECT_TIMEOUT_S and check pooled connections before use (pool_pre_ping)."""
    if sqlite:
        return {"connect_args": {"timeout": 60}}
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    try:
        backend = make_url(url).get_backend_name()
    except Exception:  # reported by RDBStorage itself
        return kwargs
    if backend in ("postgresql", "mysql", "mariadb"):
        kwargs["connect_args"] = {"connect_timeout": CONNECT_TIMEOUT_S}
    return kwargs


def open_storage(
    url: str,
    *,
    heartbeat_interval_s: int | None = 10,
    grace_period_s: int | None = None,
    max_retry: int = 3,
    create: bool = True,
    read_only: bool = False,
) -> optuna.storages.BaseStorage:
    """Open (creating the tables or file if needed) the storage at `url`: an RDBStorage for a
    SQLAlchemy URL, a JournalStorage for `journal:///PATH` or a `.log`/`.journal` path. A new
    SQLite file is a copy of the empty database Optuna made once (studies.template).

    With `heartbeat_interval_s` (seconds), running trials of an RDB storage beat; one silent
    for `grace_period_s` (default twice the interval) is failed and retried up to `max_retry`
    times (a journal has no heartbeats: see studies.recovery). With `create=False` a file
    that does not exist is an error, not a new database (for commands that only read or
    join). With `read_only` (commands that only read: an existing file, never written) a file
    in a directory this process may not write is opened read-only (studies.readonly). Raises
    StudyError, one line with the redacted URL, when the storage cannot be used."""
    journal = _journal_path(url)
    if journal is None:
        _refuse_memory(url)
    path = journal or _sqlite_path(url)
    if path is not None and not create and not path.expanduser().is_file():
        raise StudyError(f"storage {redact_url(url)}: no file {path}; run `tuner search SPEC` "
                         f"to make a study there, or give --storage (or {ENV_VAR})")
    if path is not None and journal is None:
        _refuse_foreign(url, path.expanduser())
    if path is not None and read_only and not writable(path.expanduser()):
        return _open_read_only(url, path.expanduser(), journal is not None)
    if path is not None:
        _prepare_dir(url, path)
    if journal is not None:
        return _open_journal(url, journal.expanduser())
    copied = path is not None and create and copy_template(path.expanduser())
    if path is not None and create and not copied:
        _write_ahead_log(url, path.expanduser())
    try:
        with warnings.catch_warnings():  # heartbeats are experimental in Optuna 5
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            heartbeat = _heartbeat(heartbeat_interval_s, grace_period_s, max_retry)
            if path is None:
                return optuna.storages.RDBStorage(
                    url, engine_kwargs=_engine_kwargs(url, False), **heartbeat)
            return RetryingSQLiteStorage(
                url, engine_kwargs=_engine_kwargs(url, True), **heartbeat,
                skip_table_creation=copied, skip_compatibility_check=copied,
                template_copy=copied)
    except Exception as err:
        raise _storage_error(url, err) from err


def close_storage(storage: optuna.storages.BaseStorage) -> None:
    """Close the database connections of an RDB storage now: this thread's session (Optuna's
    `RDBStorage.remove_session`) and the connections its engine's pool keeps (SQLAlchemy's
    `Engine.dispose`). SQLite then checkpoints the write-ahead log into the file and removes
    the -wal and -shm files, as it does when the last connection is closed at exit. A journal
    file holds no connection: nothing to do. The storage stays usable (the pool opens new
    connections when asked)."""
    if isinstance(storage, optuna.storages.RDBStorage):
        storage.remove_session()
        storage.engine.dispose()


def _open_read_only(url: str, path: Path, journal: bool) -> optuna.storages.BaseStorage:
    """A storage file this process may read but not write, opened for reading only."""
    if journal:
        return _open_journal(url, path)
    try:
        return RetryingSQLiteStorage(read_only_url(path), engine_kwargs={})
    except Exception as err:
        raise _storage_error(url, err) from err


def _refuse_memory(url: str) -> None:
    """An in-memory SQLite database lives and dies with one connection: nothing would be
    stored, and the heartbeat thread would see another, empty database."""
    try:
        parsed = make_url(url)
    except Exception:  # reported by RDBStorage itself
        return
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise StudyError(f"storage {redact_url(url)} is an in-memory database, which keeps "
                         "nothing; give a file, e.g. sqlite:///studies.db")


def _refuse_foreign(url: str, path: Path) -> None:
    """A SQLite file that holds another program's tables and none of Optuna's is refused
    before anything is written to it (Optuna would add its tables beside them)."""
    tables = foreign_tables(path)
    if not tables:
        return
    shown = ", ".join(tables[:3]) + (f" and {len(tables) - 3} more" if len(tables) > 3 else "")
    raise StudyError(f"storage {redact_url(url)}: {path} holds another program's tables "
                     f"({shown}) and none of Optuna's; give --storage (or {ENV_VAR}) a new "
                     "file or an existing study database")


def _write_ahead_log(url: str, path: Path) -> None:
    """Put a new SQLite file in write-ahead-log mode (kept in the file): readers no longer
    block the writer, and a commit costs one sync instead of several. An existing database
    keeps its mode (a command never changes a file it was not asked to write)."""
    if path.is_file() and path.stat().st_size > 0:
        return
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=60)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as err:
        raise _storage_error(url, sqlalchemy.exc.OperationalError("", None, err)) from err


def _open_journal(url: str, path: Path) -> optuna.storages.JournalStorage:
    """A journal file (append-only log, safe on NFS through a link-based lock) whose running
    trials record their worker (studies.journal)."""
    try:
        return StampingJournalStorage(optuna.storages.journal.JournalFileBackend(str(path)),
                                      url=url)
    except OSError as err:
        raise StudyError(f"storage {redact_url(url)}: cannot open {path} "
                         f"({err.strerror}); give --storage (or {ENV_VAR}) a writable "
                         "file") from err
    except Exception as err:  # a file that is not a journal
        raise StudyError(f"storage {redact_url(url)}: {path} is not an Optuna journal "
                         f"({type(err).__name__}); give --storage (or {ENV_VAR}) another "
                         "file") from err


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


def _driver(url: str) -> str:
    try:
        parsed = make_url(url)
    except Exception:
        return "the driver"
    return f"the driver of {parsed.drivername}"


def _server_said(url: str, err: sqlalchemy.exc.OperationalError) -> str:
    """' (what the driver said: 'FATAL: database "x" does not exist', 'Connection refused',
    ...)' on one line, the URL's password masked; '' when it said nothing."""
    said = " ".join(str(err.orig if err.orig is not None else "").split())
    try:
        password = make_url(url).password
    except Exception:  # an unparsable URL has no password to mask
        password = None
    if password:
        said = said.replace(str(password), "***")
    return f" ({said[:300]})" if said else ""


def _storage_error(url: str, err: Exception) -> StudyError:
    """A one-line StudyError for a storage that cannot be opened; never shows a password."""
    shown = redact_url(url)
    sqlite = _sqlite_path(url) is not None
    if isinstance(err, sqlalchemy.exc.NoSuchModuleError):
        what = ("names a database SQLAlchemy does not know; use sqlite:///FILE, "
                "postgresql+psycopg://... or mysql+pymysql://...")
    elif isinstance(err, sqlalchemy.exc.ArgumentError):
        what = ("is not a storage URL; give one such as sqlite:///studies.db or a journal "
                "file, journal:///PATH.log")
    elif isinstance(err, ImportError):
        what = f"needs {_driver(url)}, which is not installed; install it or use sqlite:///FILE"
    elif isinstance(err, sqlalchemy.exc.OperationalError) and sqlite:
        what = "cannot be opened as a SQLite file; check the path and its permissions"
    elif isinstance(err, sqlalchemy.exc.OperationalError):
        what = (f"does not answer or refused the connection{_server_said(url, err)}; check "
                "host, port, database name and credentials")
    elif isinstance(err, RuntimeError) and "version" in str(err).lower():
        what = ("holds an Optuna schema of another version; run `optuna storage upgrade "
                "--storage URL` or use another storage")
    else:
        what = f"cannot be opened ({type(err).__name__}); check the URL and the database"
    return StudyError(f"storage {shown} {what}")
