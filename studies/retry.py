"""SQLite under several worker processes: calls that find the database locked are retried.

SQLite lets one writer in at a time. The driver waits (its `timeout`) for an ordinary lock,
but gives up at once where waiting could deadlock (a reader that wants to write while another
connection writes), and Optuna then raises. Each storage call runs in one transaction that is
rolled back on error, so the whole call is safe to repeat: RetryingSQLiteStorage repeats it
with exponential backoff and full jitter (AWS Architecture Blog, "Exponential Backoff and
Jitter", 2015) until it goes through or RETRY_BUDGET_S have passed.

A run of writes that belong together (an exhaustive sweep's best plans with the study's mark
that it was swept) can be made one transaction (`one_transaction`): each Optuna call commits
its own, and on SQLite each commit waits for the disk (an fsync of the write-ahead log: 5 ms on
this project's machine, some 20 of them on the critical path of a one-second exhaustive
search).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import optuna
import sqlalchemy
import sqlalchemy.event
import sqlalchemy.orm

from .backend import backend

__all__ = ["RETRY_BUDGET_S", "RetryingSQLiteStorage", "is_locked_error", "one_transaction",
           "retried"]

RETRY_BUDGET_S = 120.0
"""Seconds one storage call keeps retrying a locked database before the error propagates."""
_FIRST_WAIT_S = 0.02
_LONGEST_WAIT_S = 1.0
_LOCKED = ("database is locked", "database table is locked", "database is busy")

_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")


def is_locked_error(err: BaseException) -> bool:
    """True when `err`, or an error it was raised from, is SQLite's 'database is locked'."""
    seen: BaseException | None = err
    for _ in range(8):  # Optuna wraps SQLAlchemy, which wraps sqlite3
        if seen is None:
            return False
        if any(text in str(seen).lower() for text in _LOCKED):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def retried(call: Callable[[], _T]) -> _T:
    """`call()`, repeated while it finds the database locked, up to RETRY_BUDGET_S."""
    deadline = time.monotonic() + RETRY_BUDGET_S
    wait = _FIRST_WAIT_S
    while True:
        try:
            return call()
        except Exception as err:
            if not is_locked_error(err) or time.monotonic() > deadline:
                raise
        time.sleep(random.uniform(0, wait))
        wait = min(2 * wait, _LONGEST_WAIT_S)


def _retrying(method: _F) -> _F:
    """`method`, repeated on a locked database; nested calls leave it to the outermost."""

    @functools.wraps(method)
    def call(self: RetryingSQLiteStorage, *args: Any, **kwargs: Any) -> Any:
        if getattr(self._depth, "n", 0):
            return method(self, *args, **kwargs)

        def once() -> Any:
            self._depth.n = 1
            try:
                return method(self, *args, **kwargs)
            finally:
                self._depth.n = 0
        return retried(once)

    return call  # type: ignore[return-value]


class RetryingSQLiteStorage(optuna.storages.RDBStorage):
    """An RDBStorage on SQLite whose calls are retried while the database is locked, and
    whose calls that decide a write on what they read hold the write lock throughout.

    Python's sqlite3 driver begins a transaction only at the first write, so the read that
    decides a write (is this waiting trial still waiting? is this trial still running?) runs
    outside it: two workers could both pop the same waiting trial and run it twice, or one
    fail a trial another has just completed. Those calls (EXCLUSIVE_CALLS) begin with BEGIN
    IMMEDIATE, which takes the write lock first (waiting for it up to the driver's timeout),
    so their read and write see one state; every other call keeps the driver's behaviour,
    under which readers do not wait for one another."""

    def __init__(self, *args: Any, template_copy: bool = False, **kwargs: Any) -> None:
        """RDBStorage's arguments; `template_copy`: the file is a copy of studies.template's,
        whose alembic stamp is not read (_skip_alembic_on_template_copies)."""
        self._depth = threading.local()
        self._exclusive = threading.local()
        self._batch = threading.local()
        _TEMPLATE_COPY.on = template_copy
        try:
            _retrying(optuna.storages.RDBStorage.__init__)(self, *args, **kwargs)
        finally:
            _TEMPLATE_COPY.on = False
        sqlalchemy.event.listen(self.engine, "begin", self._begin)

    def _begin(self, connection: sqlalchemy.Connection) -> None:
        if getattr(self._exclusive, "on", False):
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    @contextlib.contextmanager
    def one_transaction(self) -> Iterator[None]:
        """This thread's storage calls inside the block as one transaction, committed at its
        end (one wait for the disk instead of one per call) and rolled back whole if the
        block raises: nothing of it is stored then. It begins with BEGIN IMMEDIATE (the write
        lock taken first, waiting and retried as any call), so that no other writer comes
        between its reads and writes and no call inside finds the database locked. Each
        Optuna call's commit becomes a flush into it: its session is joined to this
        transaction with SQLAlchemy's join_transaction_mode="rollback_only", set as this
        thread's session of Optuna's scoped_session (other threads keep theirs). Nested: the
        outer block's transaction."""
        if getattr(self._batch, "on", False):
            yield
            return
        with self.engine.connect() as connection:
            retried(lambda: self._begin_immediate(connection))
            transaction = connection.get_transaction()
            session = sqlalchemy.orm.Session(bind=connection,
                                             join_transaction_mode="rollback_only")
            registry = self.scoped_session.registry
            previous = registry() if registry.has() else None
            registry.set(session)
            self._batch.on = True
            self._depth.n = 1  # a locked database is retried around the whole block only
            try:
                yield
                if transaction is None or not transaction.is_active:
                    raise optuna.exceptions.StorageInternalError(
                        "a call inside one transaction rolled it back; nothing was stored")
                connection.commit()
            finally:
                self._batch.on = False
                self._depth.n = 0
                session.close()
                if previous is None:
                    registry.clear()
                else:
                    registry.set(previous)

    def _begin_immediate(self, connection: sqlalchemy.Connection) -> None:
        if connection.in_transaction():  # a locked BEGIN left one begun: start again
            connection.rollback()
        self._exclusive.on = True
        try:
            connection.begin()  # the "begin" event runs BEGIN IMMEDIATE
        finally:
            self._exclusive.on = False


def one_transaction(study: optuna.Study) -> contextlib.AbstractContextManager[None]:
    """The study's storage calls inside the block as one transaction, where its storage is
    a SQLite one of this package (RetryingSQLiteStorage.one_transaction); elsewhere (a
    journal file, a database server) each call keeps its own."""
    storage = backend(study)
    if isinstance(storage, RetryingSQLiteStorage):
        return storage.one_transaction()
    return contextlib.nullcontext()


EXCLUSIVE_CALLS = ("create_new_trial", "set_trial_state_values")
"""RDBStorage calls that read, then write on what they read."""


def _exclusive(method: _F) -> _F:
    """`method`, its transactions begun with BEGIN IMMEDIATE (RetryingSQLiteStorage)."""

    @functools.wraps(method)
    def call(self: RetryingSQLiteStorage, *args: Any, **kwargs: Any) -> Any:
        self._exclusive.on = True
        try:
            return method(self, *args, **kwargs)
        finally:
            self._exclusive.on = False

    return call  # type: ignore[return-value]


_TEMPLATE_COPY = threading.local()
"""Set while this thread opens a RetryingSQLiteStorage on a copy of studies.template's file."""


def _skip_alembic_on_template_copies() -> None:
    """Opening an RDBStorage reads the database's alembic stamp (`_VersionManager.
    _init_alembic`, which stamps a database that has none), and to read it imports alembic,
    whose `ddl` package imports SQLAlchemy's PostgreSQL, MySQL, MSSQL and Oracle dialects:
    0.13-0.16 s on the critical path of a new study, half of opening it. A copy of
    studies.template's file was stamped at the head revision by this very version of Optuna
    (the template is made per Optuna, SQLAlchemy and SQLite version), which is what the read
    would find, so on a copy it is skipped; every other storage reads it as Optuna does. Where
    Optuna's internals are not as this expects, nothing is changed."""
    module = getattr(getattr(optuna.storages, "_rdb", None), "storage", None)
    manager = getattr(module, "_VersionManager", None)
    original = getattr(manager, "_init_alembic", None)
    if manager is None or not callable(original):
        return

    @functools.wraps(original)
    def init_alembic(self: Any) -> None:
        if not getattr(_TEMPLATE_COPY, "on", False):
            original(self)

    manager._init_alembic = init_alembic


def _wrap_public_methods() -> None:
    base = optuna.storages.RDBStorage
    names = [n for n, v in vars(base).items()
             if inspect.isfunction(v) and (not n.startswith("_") or n == "_get_stale_trial_ids")]
    for name in names:
        method = getattr(base, name)
        if name in EXCLUSIVE_CALLS:
            method = _exclusive(method)
        setattr(RetryingSQLiteStorage, name, _retrying(method))


_wrap_public_methods()
_skip_alembic_on_template_copies()
