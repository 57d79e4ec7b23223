"""Stopping a search cleanly: Ctrl-C (SIGINT), SIGTERM, or a request from another thread.

A `Stop` is a request to stop that the search looks at between trials and between grids of an
exhaustive sweep. Where stopping at once is safe (the cost model inside a trial, never a
storage call), the section runs `with stop.interruptible():` and a signal interrupts it on
the spot by raising `Interrupted`, which Optuna does not catch (it is no Exception), so the
trial is neither completed nor failed: the search puts it back in the queue (WAITING) for the
next run to retry with the same parameters.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["EXIT_INTERRUPTED", "Interrupted", "Stop", "handle_signals"]

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

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
