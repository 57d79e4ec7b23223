"""SQLite under several worker processes: calls that find the database locked are retried.

SQLite lets one writer in at a time. The driver waits (its `timeout`) for an ordinary lock,
but gives up at once where waiting could deadlock (a reader that wants to write while another
connection writes), and Optuna then raises. Each storage call runs in one transaction that is
rolled back on error, so the whole call is safe to repeat: RetryingSQLiteStorage repeats it
with exponential backoff and full jitter (AWS Architecture Blog, "Exponential Backoff and
Jitter", 2015) until it goes through or RETRY_BUDGET_S have passed.
"""

from __future__ import annotations

import functools
import inspect
import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import optuna
import sqlalchemy
import sqlalchemy.event

__all__ = ["RETRY_BUDGET_S", "RetryingSQLiteStorage", "is_locked_error", "retried"]

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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._depth = threading.local()
        self._exclusive = threading.local()
        _retrying(optuna.storages.RDBStorage.__init__)(self, *args, **kwargs)
        sqlalchemy.event.listen(self.engine, "begin", self._begin)

    def _begin(self, connection: sqlalchemy.Connection) -> None:
        if getattr(self._exclusive, "on", False):
            connection.exec_driver_sql("BEGIN IMMEDIATE")


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
