"""A progress bar for an exhaustive sweep: tqdm's (Optuna's own dependency), on stderr, only
when asked for (a terminal, not a pipe or --json)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["plans_bar"]


@contextmanager
def plans_bar(total: int | None, *, enabled: bool) -> Iterator[Callable[[int], None] | None]:
    """A callable that advances a bar by a number of plans (None when not `enabled`)."""
    if not enabled:
        yield None
        return
    from tqdm.auto import tqdm  # only where a bar is shown

    with tqdm(total=total, unit=" plans", unit_scale=True, desc="exhaustive sweep",
              leave=False, dynamic_ncols=True) as bar:
        yield bar.update
