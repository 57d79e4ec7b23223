"""What a command that runs a search (`tuner search`, `resume`, `worker`) says when SIGINT or
SIGTERM stops it, at any moment: the search itself routes them to a stop request and says what
it stored (tuner.engine.interrupt); before the search begins and after it ends the signal
raises Interrupted where the process is (interrupt.raise_on_signals), and `Said` adds what is
stored and how to go on. The group (tuner.cli.main) prints the line and exits with 130."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from ..engine.interrupt import Interrupted, Stop, handle_signals

__all__ = ["NOTHING_STORED", "Said", "as_it_was", "finished"]

T = TypeVar("T")

NOTHING_STORED = "before the search began: nothing was stored; run the same command again"


def as_it_was(name: str) -> str:
    """Before a stored study's search began: nothing of it changed."""
    quoted = shlex.quote(name)
    return (f"before the search began: study {quoted} is as it was; `tuner resume {quoted}` "
            "continues it")


def finished(name: str) -> str:
    """After a study's search ended: it is stored whole."""
    quoted = shlex.quote(name)
    return f"the search had ended: study {quoted} is stored; `tuner best {quoted}` shows it"


class Said:
    """What a signal outside the search says: `before()` until the search has ended, then
    `after()` (`before()` where none is given yet)."""

    def __init__(self, before: Callable[[], str], after: Callable[[], str] | None = None
                 ) -> None:
        self.before, self.after = before, after or before
        self.ended = False

    @contextmanager
    def around(self) -> Iterator[None]:
        """The command's whole body: an Interrupted that says nothing yet says where it came."""
        try:
            yield
        except Interrupted as err:
            if not err.detail:
                err.detail = (self.after if self.ended else self.before)()
            raise

    def run(self, work: Callable[[Stop], T]) -> T:
        """Run the search, `work`, with SIGINT and SIGTERM routed to a stop request: an
        interrupted search raises Interrupted saying what it stored; a signal that came as
        it finished (no stop check saw it) raises Interrupted with `after()` once it has
        returned: the command stops there all the same."""
        with handle_signals(Stop()) as stop:
            out = work(stop)
        self.ended = True
        if stop.requested is not None:
            raise Interrupted(stop.requested, self.after())
        return out
