"""Exhaustive search: every valid plan of every cluster, evaluated grid by grid.

The plans of clusters that share a GPU and pricing are evaluated together, as grids of valid
layouts times every combination of the knobs no rule ties to the layout
(search_spaces.grid, cost.evaluate_grid), so that each term of the model is computed once per
distinct combination of the knobs it reads. Records the best plans (the TOP best, or the
Pareto front of two objectives) as trials of the study, not a trial per plan, with the counts
of plans evaluated and feasible as study attributes. Where no plan is feasible, the sweep
keeps the nearest miss instead (search_spaces.misses: the valid plan that fits in memory and
exceeds the spec's limits least, else the one nearest to fitting), so
that the user sees what the closest layout lacks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from cost import PlanRecord, evaluate_grid
from cost.codec import encode
from search_spaces import Space
from search_spaces.grid import ClusterGrid
from search_spaces.misses import nearest

from .evaluation import Candidate, label
from .interrupt import Stop
from .scoring import DIRECTIONS, Scores, score

__all__ = ["TOP", "SweepSummary", "pareto_mask", "sweep"]

TOP = 64
"""Plans a single-objective sweep keeps before equal results are grouped."""
GROUPS = 10
"""Distinct results a single-objective sweep stores (as many trials), each with the other
plans of the same result (equivalent layouts) listed on its trial."""


@dataclass(frozen=True)
class SweepSummary:
    """The best plans (candidate and its searched knobs' values), the plans evaluated and
    feasible, the seconds it took, and whether it saw the whole space (False: stopped).
    `results`: each best plan's PlanResult.as_dict(), what its trial stores, when the sweep's
    process worked them out (a forked sweep does, off the critical path: tuner.engine.forked);
    None otherwise (stored_sweep works them out)."""

    best: list[tuple[Candidate, dict[str, Any]]]
    """The best feasible plans; where none is feasible, the nearest miss alone (its
    constraint values say by how much it misses)."""
    evaluated: int
    feasible: int
    seconds: float
    complete: bool = True
    results: list[dict[str, Any]] | None = None


def pareto_mask(points: np.ndarray) -> np.ndarray:
    """Non-dominated rows of a (n, 2) array to minimise: sort by the first column and keep
    the rows that improve the running minimum of the second (Kung et al. 1975)."""
    if len(points) == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((points[:, 1], points[:, 0]))
    second = points[order, 1]
    running = np.minimum.accumulate(second)
    keep_sorted = np.concatenate(([True], second[1:] < running[:-1]))
    mask = np.zeros(len(points), dtype=bool)
    mask[order[keep_sorted]] = True
    return mask


class _Best:
    """The running best of a sweep: the TOP smallest keys (one objective), or the Pareto front
    (two), keys being objective values signed so that smaller is better. Earlier plans win
    ties, as in one stable sort of every plan."""

    def __init__(self, objectives: int) -> None:
        self.two = objectives == 2
        self.keys = np.zeros((0, objectives))
        self.items: list[Any] = []

    def candidates(self, keys: np.ndarray) -> np.ndarray:
        """Indices (rows of `keys`, (n, objectives): feasible plans in sweep order) of the
        plans that may enter."""
        if self.two and len(self.keys):
            idx = np.flatnonzero(~_dominated(self.keys, keys))
        elif not self.two and len(self.keys) >= TOP:
            idx = np.flatnonzero(keys[:, 0] < self.keys[-1, 0])
        else:
            idx = np.arange(len(keys))
        if self.two:
            idx = idx[pareto_mask(keys[idx])]
        elif len(idx) > TOP:
            idx = idx[np.argsort(keys[idx, 0], kind="stable")[:TOP]]
        return idx

    def add(self, keys: np.ndarray, items: list[Any]) -> None:
        """Merge new entries (their keys and what to keep of each)."""
        pool_keys = np.concatenate([self.keys, keys])
        pool = self.items + items
        if self.two:
            keep = np.flatnonzero(pareto_mask(pool_keys))
            keep = keep[np.lexsort((pool_keys[keep, 1], pool_keys[keep, 0]))]
        else:
            keep = np.argsort(pool_keys[:, 0], kind="stable")[:TOP]
        self.keys = pool_keys[keep]
        self.items = [pool[i] for i in keep]


def _items(part: ClusterGrid, report: Any, scores: Scores, objectives: np.ndarray,
           idx: np.ndarray) -> list[Any]:
    """What a sweep keeps of the plans `idx` (flat indices) of one grid: the grid, the index,
    the objective values, the constraint values by name and the memory per GPU (bytes)."""
    where = np.unravel_index(idx, part.grid.shape)  # read in place: no flattened copies
    constraints = {k: v[where] for k, v in scores.constraints.items()}
    memory = np.broadcast_to(report.memory.total_bytes, part.grid.shape)[where]
    return [(part, int(i), objectives[i], {k: float(v[n]) for k, v in constraints.items()},
             float(memory[n])) for n, i in enumerate(idx)]


class _Nearest:
    """The valid plan nearest to feasible seen so far (search_spaces.misses: one that fits in
    memory before one that does not, then the least excess); earlier plans win ties."""

    def __init__(self) -> None:
        self.key: tuple[float, float] = (np.inf, np.inf)
        self.item: Any = None

    def consider(self, part: ClusterGrid, report: Any, scores: Scores,
                 objectives: np.ndarray) -> None:
        """Keep the grid's nearest valid plan if it misses by less."""
        valid = np.broadcast_to(report.valid, part.grid.shape).ravel()
        i, key = nearest({k: np.ravel(v) for k, v in scores.constraints.items()}, valid)
        if valid[i] and key < self.key:
            self.key = key
            self.item = _items(part, report, scores, objectives, np.array([i]))[0]


def _feasible(valid: np.ndarray, scores: Scores, shape: tuple[int, ...]
              ) -> tuple[int, np.ndarray]:
    """The count of valid plans of a grid and the flat indices (ascending) of its feasible
    ones: valid, and every constraint value <= 0. One boolean array of the grid's shape is
    narrowed in place, constraint by constraint."""
    ok = np.array(np.broadcast_to(valid, shape), dtype=bool)  # a copy, contiguous
    count = int(np.count_nonzero(ok))
    below = np.empty(shape, dtype=bool)
    for limit in scores.constraints.values():
        np.less_equal(limit, 0, out=below)
        ok &= below
    return count, np.flatnonzero(ok)


def _dominated(front: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """True for the rows of `keys` that a point of `front` (sorted by its first column) weakly
    dominates: the least second value among front points whose first is <= theirs."""
    running = np.minimum.accumulate(front[:, 1])
    j = np.searchsorted(front[:, 0], keys[:, 0], side="right")
    return (j > 0) & (running[np.maximum(j - 1, 0)] <= keys[:, 1])


def sweep(space: Space, *, combinations: Iterable[Mapping[str, Any]] | None = None,
          stop: Stop | None = None, progress: Callable[[int], None] | None = None,
          skip: Callable[[], bool] | None = None) -> SweepSummary:
    """Evaluate every valid plan of the space (or of the given `combinations` of the cluster
    knobs) and keep the best feasible ones. A stop request, or `skip()` turning True (the
    result is not wanted after all), ends it early between grids (the summary says it is
    incomplete); `progress` is told the plans of each grid done."""
    start = time.perf_counter()
    signs = np.array([-1.0 if DIRECTIONS[o] == "maximize" else 1.0
                      for o in space.spec.objective])
    best = _Best(len(signs))
    nearest = _Nearest()
    evaluated = feasible = 0
    for part in space.cluster_grids(combinations):
        if (stop is not None and stop.requested) or (skip is not None and skip()):
            return _summary(space, best, evaluated, feasible, start, complete=False)
        report = evaluate_grid(space.model, part.cluster, space.training, part.grid.plan(),
                               efficiency=space.efficiency)
        scores = score(report, space.spec.objective, space.spec.constraints)
        valid, ok = _feasible(report.valid, scores, part.grid.shape)
        evaluated += valid
        feasible += len(ok)
        objectives = scores.objectives.reshape(-1, len(signs))
        if not feasible and valid:  # none feasible yet: keep the nearest miss
            nearest.consider(part, report, scores, objectives)
        keys = objectives[ok] * signs  # the feasible plans' only: a fraction of the grid
        idx = best.candidates(keys)
        if len(idx):
            best.add(keys[idx], _items(part, report, scores, objectives, ok[idx]))
        if progress is not None:
            progress(part.grid.size)
    if not best.items and nearest.item is not None:
        best.items = [nearest.item]
    return _summary(space, best, evaluated, feasible, start, complete=True)


def _summary(space: Space, best: _Best, evaluated: int, feasible: int, start: float, *,
             complete: bool) -> SweepSummary:
    """The kept plans as candidates with their searched knobs' values; a plan whose objective
    values and memory equal those of the plan before it is listed as its equivalent."""
    groups: list[list[tuple[Candidate, dict[str, Any]]]] = []
    last: tuple[Any, ...] = ()
    for part, i, objectives, constraints, memory in best.items:
        row = int(np.unravel_index(i, part.grid.shape)[0])
        owner = int(part.owner[row])
        plan = part.grid.flat_plan(np.array([i]))
        scalar = type(plan)(**{k: float(np.ravel(getattr(plan, k))[0])
                               for k in type(plan).__dataclass_fields__})
        candidate = Candidate(cluster=part.clusters[owner], plan=scalar,
                              objectives=tuple(float(x) for x in objectives),
                              constraints=constraints)
        entry = (candidate, _knobs(space, part, owner, scalar))
        key, last = last, (candidate.objectives, memory)
        if groups and key == last:
            groups[-1].append(entry)
        elif best.two or len(groups) < GROUPS:
            groups.append([entry])
        else:
            break
    out = []
    for (candidate, knobs), *others in groups:
        alike = [PlanRecord.of(c.plan, gpus=float(np.ravel(c.cluster.gpus)[0])).as_dict()
                 for c, _ in others]
        out.append((replace(candidate, extra={"equivalent": alike}) if alike else candidate,
                    knobs))
    return SweepSummary(best=out, evaluated=evaluated, feasible=feasible,
                        seconds=time.perf_counter() - start, complete=complete)


def _knobs(space: Space, part: ClusterGrid, owner: int, plan: Any) -> dict[str, Any]:
    """The searched knobs' user values of one plan (the trial's params)."""
    out: dict[str, Any] = {}
    for name in space.searched:
        if name.startswith("cluster."):
            out[name] = label(part.values[owner][name[len("cluster."):]])
            continue
        number = float(getattr(plan, name))
        codes = encode(name, space.choices[name])
        out[name] = label(space.choices[name][int(np.flatnonzero(codes == number)[0])])
    return out
