"""Leaving a command's process without paying for the interpreter's last garbage collections.

At exit CPython clears every module and runs its cyclic garbage collector over all the objects
left, which after Optuna, SQLAlchemy and alembic are imported and a storage opened is some
hundreds of thousands: 0.15-0.25 s of a `tuner search` of one second, measured on this project's
2-core machine (the same process with `gc.freeze()` as its last statement left in 0.02 s). So a
command that is done closes its storages' connections itself, and the collector's objects are
frozen at exit (`gc.freeze`, registered with atexit: the collector leaves them alone from then
on; see Python's `gc` docs), so the interpreter exits without traversing them. Registered, not
called at once, so that a caller running the command in its own process (CliRunner in the
tests) keeps its collector until it exits. Everything else at exit happens as before: the
other atexit handlers (logging flushes its handlers), stdout and stderr flushed, objects
without a reference cycle freed. What frozen objects in a cycle would have run when collected
at exit is only the closing of a storage's database connections, done here first
(studies.close_storage: SQLite checkpoints its write-ahead log and removes its -wal and -shm
files as at a normal exit).
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..engine.interrupt import held

if TYPE_CHECKING:
    import optuna

__all__ = ["freeze_at_exit", "leave"]


def leave(storages: Iterable[optuna.storages.BaseStorage]) -> None:
    """Close `storages` now and freeze the garbage collector's objects at exit; call it when
    the command is done with its storages."""
    from studies import close_storage

    with held():  # a signal now waits for the connections to close (tuner.engine.interrupt)
        for storage in storages:
            close_storage(storage)
    freeze_at_exit()


def freeze_at_exit() -> None:
    """Freeze the garbage collector's objects at exit (once, however many commands this
    process runs), for a command that holds no storage (`tuner evaluate`, `tuner catalog`: no
    Optuna imported, so this imports none)."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
