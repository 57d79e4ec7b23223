"""One writer at a time on a study, for a block that reads what is stored and writes what is
missing (an exhaustive sweep's best plans): two such blocks started at once must not both
read before either writes.

- SQLite (RetryingSQLiteStorage): the block is one transaction begun with BEGIN IMMEDIATE
  (studies.retry), stored whole or not at all.
- PostgreSQL: Optuna commits each call on its own, so the block holds a session-level
  advisory lock keyed by the study (`pg_advisory_lock`, PostgreSQL's "Advisory Locks"), on a
  connection of its own; the server releases it if the process dies.
- A journal file: the block holds `flock(LOCK_EX)` on the journal file itself, an open file
  description of its own (Optuna's own lock is a link beside the file, which this does not
  touch); the kernel releases it if the process dies. Where there is no `fcntl` (Windows),
  nothing is locked.
- Other database servers: each call keeps its own transaction, unlocked.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator

import optuna
import sqlalchemy

from .backend import backend
from .retry import RetryingSQLiteStorage

__all__ = ["ADVISORY_NAMESPACE", "exclusively"]

ADVISORY_NAMESPACE = zlib.crc32(b"cluster-tuner one writer") & 0x7FFFFFFF
"""The first key of the two-key advisory lock (a signed 32-bit int); the study's id is the
second, so that other applications' advisory locks on the same server never collide with it."""


@contextlib.contextmanager
def exclusively(study: optuna.Study) -> Iterator[None]:
    """The block as the only writer of `study` among the blocks that ask the same (see the
    module's docstring for what each storage does)."""
    storage = backend(study)
    if isinstance(storage, RetryingSQLiteStorage):
        with storage.one_transaction():
            yield
        return
    if isinstance(storage, optuna.storages.RDBStorage) \
            and storage.engine.dialect.name == "postgresql":
        with _advisory_lock(storage.engine, study._study_id):
            yield
        return
    if isinstance(storage, optuna.storages.JournalStorage):
        path = getattr(storage._backend, "_file_path", None)  # a JournalFileBackend's
        if isinstance(path, str):
            with _flocked(path):
                yield
            return
    yield


@contextlib.contextmanager
def _advisory_lock(engine: sqlalchemy.Engine, study_id: int) -> Iterator[None]:
    keys = {"namespace": ADVISORY_NAMESPACE, "study": int(study_id)}
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:namespace, :study)"), keys)
        connection.commit()  # the lock is the session's, not the transaction's
        try:
            yield
        finally:
            connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:namespace, :study)"),
                               keys)
            connection.commit()


@contextlib.contextmanager
def _flocked(path: str) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    with open(path, "rb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
