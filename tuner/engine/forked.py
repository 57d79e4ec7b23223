"""The exhaustive sweep in a forked process, beside the storage this one opens.

A short exhaustive search spends as long importing Optuna and SQLAlchemy and opening its
storage (SQLite's schema made through alembic) as it spends sweeping. A thread cannot do the
two at once on two cores: Python's global interpreter lock lets one thread run Python at a
time, and the imports and the sweep's Python between numpy calls take turns (measured with
benchmarks/sweep.py: the sweep beside an opening thread took as long as both one after the
other). So the command line forks before it imports Optuna: the child sweeps (numpy, the
spec and the space are already imported and built, nothing is imported twice) and sends back
the summary (the best plans and the counts, a few kilobytes, pickled through a pipe); this
process opens the storage meanwhile and stores the summary through Optuna as before.

The objects made before the fork are frozen first (`gc.freeze()`, as Python's `gc` docs advise
before a fork): this process's full collections while it imports Optuna and SQLAlchemy then
leave out what numpy, pydantic, the cost model, the spec and the space made, which both
processes share copy-on-write. They had taken 0.2 s of the collector's time after the fork
(measured with gc.callbacks at load 3, two full collections), on the critical path beside the
sweep; 0.06 s with the freeze. (The process's page faults stayed the same: the time was the
traversal.) They are unfrozen once the child is reaped, so that a library caller's collector
works as before.

POSIX `fork` only, and only from a process with one thread (a fork copies no other thread, so
a lock one held would stay held in the child); elsewhere nothing is forked and the sweep runs
in this process. A child that fails for any reason sends nothing, and the sweep then runs
here, so that an error is raised (and reported) exactly as without the fork.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from search_spaces import Space

from .evaluation import result_of
from .exhaustive import SweepSummary, sweep
from .interrupt import Stop, handle_signals
from .progress import plans_bar

if TYPE_CHECKING:
    from .options import SearchOptions

__all__ = ["ForkedSweep", "can_fork", "forked_sweep"]

_POLL_S = 0.05
"""How often the waiting parent looks at its stop request and at `skip` (seconds)."""


def can_fork() -> bool:
    """True where a fork is safe here: POSIX, and this process runs one thread."""
    return hasattr(os, "fork") and sys.platform != "win32" and threading.active_count() == 1


def _run_child(space: Space, write_fd: int, stop: Stop | None, progress: bool) -> None:
    """In the child: sweep (SIGINT and SIGTERM, which the parent forwards, stop it between
    grids), work out the best plans' results (one scalar evaluation each, 3 ms: the parent
    would do it on its critical path, while this process has finished), send the pickled
    summary, and leave without running the parent's exit handlers or flushing its buffers
    (os._exit)."""
    code = 1
    try:
        with handle_signals(stop or Stop()) as asked, plans_bar(None, enabled=progress) as bar:
            summary = sweep(space, stop=asked, progress=bar)
        if summary.complete:  # a stopped sweep stores nothing
            summary = replace(summary, results=[result_of(space, c).as_dict()
                                                for c, _ in summary.best])
        data = pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_fd, "wb") as out:
            out.write(data)
        code = 0
    except BaseException:  # the parent sweeps again, and reports the error as it comes
        code = 1
    finally:
        os._exit(code)


class ForkedSweep:
    """A sweep of `space` running in a child process; `result()` waits for its summary."""

    def __init__(self, space: Space, *, stop: Stop | None, progress: bool) -> None:
        self.space = space
        self._stop = stop
        read_fd, write_fd = os.pipe()
        self._thaw = gc.get_freeze_count() == 0  # frozen by us: unfrozen once the child is gone
        gc.freeze()  # see the module's docstring
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child; covered through the command line)
            os.close(read_fd)
            _run_child(space, write_fd, stop, progress)
        os.close(write_fd)
        self._pid: int | None = pid
        self._read_fd = read_fd
        self._forwarded = False

    def _forward(self, signum: int) -> None:
        """Ask the child to stop (its handlers, copied from ours, route it to its Stop)."""
        if self._pid is not None and not self._forwarded:
            self._forwarded = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signum)

    def _read(self, skip: Callable[[], bool] | None) -> bytes:
        """The child's bytes up to its exit, forwarding a stop request or `skip()` to it."""
        chunks: list[bytes] = []
        while True:
            if self._stop is not None and self._stop.requested is not None:
                self._forward(self._stop.requested)
            elif skip is not None and skip():
                self._forward(signal.SIGTERM)
            ready, _, _ = select.select([self._read_fd], [], [], _POLL_S)
            if ready:
                chunk = os.read(self._read_fd, 1 << 16)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)

    def result(self, skip: Callable[[], bool] | None = None) -> SweepSummary | None:
        """The child's summary (incomplete if it was asked to stop), or None if it failed
        (the caller then sweeps in this process)."""
        data = self._read(skip)
        status = self._reap()
        if status != 0 or not data:
            return None
        summary: SweepSummary = pickle.loads(data)
        return summary

    def _reap(self) -> int | None:
        if self._pid is None:
            return None
        _, status = os.waitpid(self._pid, 0)
        self._pid = None
        os.close(self._read_fd)
        if self._thaw:  # the child is gone
            gc.unfreeze()
        return os.waitstatus_to_exitcode(status)

    def close(self) -> None:
        """End a child whose result was never asked for (an error in this process)."""
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            self._reap()


@contextlib.contextmanager
def forked_sweep(spec_space: Callable[[], Space], *, enabled: bool, options: SearchOptions
                 ) -> Iterator[ForkedSweep | None]:
    """A ForkedSweep of the space `spec_space()` builds, or None when not `enabled` or where
    no fork is safe; the child is ended on the way out if its result was not taken."""
    if not enabled or not can_fork():
        yield None
        return
    forked = ForkedSweep(spec_space(), stop=options.stop, progress=options.progress)
    try:
        yield forked
    finally:
        forked.close()
