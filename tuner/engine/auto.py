"""`sampler: auto`, the default: sweep the whole space when that fits a time budget (the answer
is then the proven optimum), else let Optuna choose what does not fit and sweep the rest in
each trial.

The valid plans are counted without building them (per cluster, its valid layouts times the
grid knobs' values: search_spaces.grid); the sweep's time is estimated from the rate the cost
model reaches on the first grids of this very space, measured on this machine.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from cost import evaluate_grid
from search_spaces import GRID_PLANS, Space, SpecError

from .interrupt import Stop
from .scoring import score

__all__ = ["FALLBACK_SAMPLER", "TRIAL_PLANS", "AutoChoice", "choose", "count_plans",
           "measure_rate"]

FALLBACK_SAMPLER = "tpe"
"""The Optuna sampler `auto` runs where the space is too large to sweep (TPE, multivariate:
on the shipped examples it reaches the exhaustive optimum, or front, in 30-100 trials)."""
TRIAL_PLANS = 1 << 20
"""Most valid plans one trial sweeps (a quarter of a second at 4 million plans per second,
a few Optuna round trips on SQLite): a trial that picks a cluster sweeps its whole plan space
when it has no more plans than this, else it picks the layout too."""
_T = TypeVar("_T")
_MEASURE_S = 0.1
_SCAN_S = 1.0
"""Seconds measure_rate looks through the space's clusters for its first grids: a space of
many clusters with few plans each (nodes 1 to 125,000 over a dozen GPUs) yields its first grid
only once every cluster is looked at, and `auto` took four minutes before counting began."""


def _until(deadline: float, items: Iterator[_T]) -> Iterator[_T]:
    """`items` until time.monotonic() passes `deadline`."""
    for item in items:
        if time.monotonic() > deadline:
            return
        yield item


@dataclass(frozen=True)
class AutoChoice:
    """What `auto` decided and why: the sampler, the valid plans of the space (a lower bound
    when not `counted_all`: counting stops past the budget), the most plans of one cluster,
    the measured plans per second, the estimated sweep time and the budget (seconds)."""

    sampler: str
    plans: int
    counted_all: bool
    plans_per_cluster: int
    plans_per_s: float
    estimate_s: float
    budget_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def count_plans(space: Space, *, limit: int | None = None, seconds: float | None = None,
                stop: Stop | None = None) -> tuple[int, bool, int]:
    """(valid plans, whether every cluster was counted, most plans of one cluster): counting
    stops once the total passes `limit`, or after `seconds` (a space whose counting alone
    takes longer than a sweep's budget cannot be swept within it); a `stop` request
    (Ctrl-C, SIGTERM) is honoured between clusters."""
    total = most = 0
    deadline = None if seconds is None else time.monotonic() + seconds
    for values in space.cluster_combinations():
        if stop is not None:
            stop.check()
        try:
            cluster = space.cluster(values)
        except SpecError:
            continue
        here = sum(g.size for g in space.grids(cluster))
        total += here
        most = max(most, here)
        if limit is not None and total > limit:
            return total, False, most
        if deadline is not None and time.monotonic() > deadline:
            return total, False, most
    return total, True, most


def measure_rate(space: Space) -> float:
    """Plans per second of the cost model and the scores on the first grids of the space
    (at least half a grid, or a tenth of a second); 0.0 for a space without a plan."""
    plans, seconds = 0, 0.0
    clusters = _until(time.monotonic() + _SCAN_S, space.cluster_combinations())
    for part in space.cluster_grids(clusters):  # the clusters looked at by then, grouped
        start = time.perf_counter()
        report = evaluate_grid(space.model, part.cluster, space.training, part.grid.plan(),
                               efficiency=space.efficiency)
        score(report, space.spec.objective, space.spec.constraints).feasible  # noqa: B018
        seconds += time.perf_counter() - start
        plans += part.grid.size
        if plans >= GRID_PLANS // 2 or seconds >= _MEASURE_S:
            break
    return plans / seconds if seconds > 0 else 0.0


def choose(space: Space, *, budget_s: float, stop: Stop | None = None) -> AutoChoice:
    """Exhaustive when the estimated sweep takes at most `budget_s`, else FALLBACK_SAMPLER;
    counting the plans takes at most `budget_s` too, and honours a `stop` request."""
    rate = measure_rate(space)
    limit = int(rate * budget_s) if rate > 0 else None
    plans, counted_all, most = count_plans(space, limit=limit, seconds=budget_s, stop=stop)
    estimate = plans / rate if rate > 0 else 0.0
    if not counted_all:  # stopped past rate x budget plans, or after counting for the budget
        estimate = max(estimate, budget_s)
    sampler = "exhaustive" if counted_all and estimate <= budget_s else FALLBACK_SAMPLER
    return AutoChoice(sampler=sampler, plans=plans, counted_all=counted_all,
                      plans_per_cluster=most, plans_per_s=rate, estimate_s=estimate,
                      budget_s=budget_s)
