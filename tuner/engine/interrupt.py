"""Stopping a search cleanly: Ctrl-C (SIGINT), SIGTERM, or a request from another thread.

A `Stop` is a request to stop that the search looks at between trials and between grids of an
exhaustive sweep. Where stopping at once is safe (the cost model inside a trial, never a
storage call), the section runs `with stop.interruptible():` and a signal interrupts it on
the spot by raising `Interrupted`, which Optuna does not catch (it is no Exception), so the
trial is neither completed nor failed: the search puts it back in the queue (WAITING) for the
next run to retry with the same parameters.

Outside those sections a command's process is never without a handler: its entry point
(tuner.main) calls `raise_on_signals()` before it imports anything, so that a signal while it
imports, opens a storage or prints its report raises `Interrupted` where the process is (the
command then says what is stored and exits with 130, as a stopped search does), except inside
`held()`, whose block (closing a storage's connections) finishes first.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["EXIT_INTERRUPTED", "Interrupted", "Stop", "default_signals", "handle_signals",
           "held", "raise_on_signals"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)

EXIT_INTERRUPTED = 130
"""The exit status of a command stopped by a signal (128 + SIGINT, as shells report it)."""


class Interrupted(BaseException):
    """A search stopped by a signal or a stop request; `signum` names the signal, `detail`
    (filled in by the search) what is stored and how to go on."""

    def __init__(self, signum: int, detail: str = "") -> None:
        self.signum = signum
        self.detail = detail
        super().__init__(signal.Signals(signum).name)

    @property
    def line(self) -> str:
        """One line for the user: what stopped the search, what was kept, how to go on."""
        name = signal.Signals(self.signum).name
        return f"interrupted ({name}): {self.detail}" if self.detail else f"interrupted ({name})"


class Stop:
    """A request to stop a search (`requested`: the signal number, None while running)."""

    def __init__(self) -> None:
        self.requested: int | None = None
        self._depth = 0

    def request(self, signum: int = signal.SIGINT) -> None:
        """Ask the search to stop at its next safe point (any thread may call it)."""
        if self.requested is None:
            self.requested = signum

    def check(self) -> None:
        """Raise Interrupted if a stop was requested."""
        if self.requested is not None:
            raise Interrupted(self.requested)

    @property
    def interruptible_now(self) -> bool:
        return self._depth > 0

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """A section that a signal may interrupt at once (no storage call inside)."""
        self.check()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1


@contextmanager
def handle_signals(stop: Stop) -> Iterator[Stop]:
    """Route SIGINT and SIGTERM to `stop` while the block runs (main thread only; elsewhere
    the block runs with the handlers as they are): the first signal requests the stop, and
    interrupts an interruptible section; the handlers are restored on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        first = stop.requested is None
        stop.request(signum)
        if first and stop.interruptible_now:
            raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in _SIGNALS}
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if stop.requested is not None:  # the process is on its way out: see _Held.raised
            _Held.raised = True


class _Held:
    """`held()` blocks running, and the first signal that came while they ran."""

    depth = 0
    pending: int | None = None
    raised = False
    """An Interrupted was raised: the process is on its way out, and a second Ctrl-C does not
    cut its cleanup (closing its storages) short."""


def _raise(signum: int, frame: FrameType | None) -> None:
    if _Held.raised:
        return
    if _Held.depth:
        _Held.pending = _Held.pending or signum
        return
    _Held.raised = True
    raise Interrupted(signum)


def raise_on_signals() -> None:
    """SIGINT and SIGTERM raise Interrupted wherever this process is (outside handle_signals'
    blocks, which route them to a Stop, and `held()`'s, which finish first): a command's
    entry point calls it before it imports anything. Main thread only."""
    for s in _SIGNALS:
        signal.signal(s, _raise)


def default_signals() -> None:
    """Python's own handling back (SIGINT raises KeyboardInterrupt, SIGTERM ends the process),
    for a server that handles them itself (uvicorn's graceful shutdown, which raises the
    signal again once it is done)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def held() -> Iterator[None]:
    """A block that a signal must not cut (closing a storage's connections, which checkpoints
    SQLite's write-ahead log): with raise_on_signals' handler in place, a signal while it runs
    raises Interrupted once the block is done."""
    _Held.depth += 1
    try:
        yield
    finally:
        _Held.depth -= 1
        if not _Held.depth and _Held.pending is not None:
            signum, _Held.pending, _Held.raised = _Held.pending, None, True
            raise Interrupted(signum)
