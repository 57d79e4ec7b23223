"""Plans as a grid, so that the cost model evaluates each term once per distinct combination of
the knobs it reads (cost.evaluate_grid).

A grid is a list of layouts, the rows (every combination of the knobs the structural rules
relate to each other: tp, pp, dp, cp, virtual_stages, micro_batch, sequence_parallel, and any
knob a workload adds), times every combination of the grid knobs, one axis each (recompute,
zero, offload, sync, parameter_servers: knobs no rule ties to the layout). Only valid layouts
are listed, so a grid holds valid plans only (the model's `valid` flag still has the last word).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from cost import ClusterSpec, MixedCluster, Plan, TrainingSpec, Workload
from cost.degrees import degrees
from cost.validity import rules

__all__ = ["GRID_KNOBS", "LAYOUT_ROWS", "ClusterGrid", "PlanGrid", "global_rules_pass",
           "layout_rows", "no_op_duplicates", "stack_clusters"]

GRID_KNOBS = ("recompute", "zero", "offload", "sync", "parameter_servers")
"""Knobs that no structural rule relates to another knob (cost.validity: each is checked value
by value), in the order of their axes."""
LAYOUT_ROWS = 1 << 18
"""Most layout combinations checked against the rules at a time (memory stays bounded)."""


@dataclass(frozen=True)
class PlanGrid:
    """Valid layouts (`layouts`: knob -> one model number per row) times every combination of
    `axes` (grid knob -> its values, one axis each after the rows' axis); `single` holds the
    grid knobs that have one value. Plan number i of the grid is np.unravel_index(i, shape)."""

    layouts: Mapping[str, np.ndarray]
    axes: tuple[tuple[str, np.ndarray], ...]
    single: Mapping[str, float]

    @property
    def rows(self) -> int:
        return len(next(iter(self.layouts.values())))

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.rows, *(len(v) for _, v in self.axes))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def plan(self) -> Plan:
        """The grid as a Plan whose fields broadcast together: layouts along axis 0, each
        grid knob along its own axis."""
        ndim = 1 + len(self.axes)
        fields: dict[str, object] = {
            name: values.reshape((-1,) + (1,) * (ndim - 1))
            for name, values in self.layouts.items()}
        for axis, (name, values) in enumerate(self.axes, start=1):
            shape = [1] * ndim
            shape[axis] = -1
            fields[name] = values.reshape(shape)
        fields.update(self.single)
        return Plan(**fields)  # type: ignore[arg-type]

    def values_at(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """Each knob's model number for the plans at flat indices `flat` of the grid."""
        index = np.unravel_index(np.asarray(flat, dtype=np.int64), self.shape)
        out = {name: values[index[0]] for name, values in self.layouts.items()}
        for axis, (name, values) in enumerate(self.axes, start=1):
            out[name] = values[index[axis]]
        for name, value in self.single.items():
            out[name] = np.full(np.shape(index[0]), value)
        return out

    def flat_plan(self, flat: np.ndarray) -> Plan:
        """The plans at flat indices `flat`, as a flat Plan (one entry per index)."""
        return Plan(**self.values_at(flat))


def split_knobs(coded: Mapping[str, np.ndarray], *, max_plans: int
                ) -> tuple[list[str], list[str]]:
    """(layout knobs, grid axes): the grid knobs with several values become axes while one
    row's combinations stay within `max_plans`; every other knob is a column of the layouts."""
    axes: list[str] = []
    per_row = 1
    for name in GRID_KNOBS:
        n = len(coded[name])
        if n > 1 and per_row * n <= max_plans:
            axes.append(name)
            per_row *= n
    layout = [name for name in coded if name not in axes
              and (name not in GRID_KNOBS or len(coded[name]) > 1)]
    return layout, axes


def global_rules_pass(workload: Workload, cluster: ClusterSpec | MixedCluster,
                      training: TrainingSpec) -> bool:
    """False when a rule that reads no knob (the GPU lacks the precision) refuses the cluster."""
    d = degrees(cluster, training, Plan())
    return not any(bool(np.any(r.broken(d))) for r in rules(workload, cluster, training)
                   if not r.knobs)


def layout_rows(workload: Workload, cluster: ClusterSpec | MixedCluster, training: TrainingSpec,
                coded: Mapping[str, np.ndarray], layout: Sequence[str]
                ) -> Iterator[dict[str, np.ndarray]]:
    """The combinations of the `layout` knobs' values (`coded`: model numbers) that break no
    rule reading only layout knobs, in product order, at most LAYOUT_ROWS checked at a time.
    Sequence parallelism at tp 1 is dropped where the plan without it is a choice too
    (no_op_duplicates)."""
    readable = set(layout) | {"gpus"}
    checked = [r for r in rules(workload, cluster, training)
               if r.knobs and set(r.knobs) <= readable]
    base = {name: float(values[0]) for name, values in coded.items() if name not in layout}
    for chunk in _product(coded, layout):
        d = degrees(cluster, training, Plan(**{**base, **chunk}))  # type: ignore[arg-type]
        ok = np.ones(len(next(iter(chunk.values()))), dtype=bool)
        for rule in checked:
            ok &= ~np.broadcast_to(rule.broken(d), ok.shape)
        if "sequence_parallel" in chunk and "tp" in chunk:
            ok &= ~no_op_duplicates(chunk, coded["sequence_parallel"])
        if np.any(ok):
            yield {name: values[ok] for name, values in chunk.items()}


def no_op_duplicates(chunk: Mapping[str, np.ndarray], sequence_parallel: np.ndarray
                     ) -> np.ndarray:
    """The rows that run sequence parallelism at tp 1, where it changes nothing, when the
    space offers the same plan without it (`sequence_parallel`: the knob's model numbers):
    that plan stands for both. Where sequence parallelism is the only choice
    (`sequence_parallel: true`), its tp 1 plans are the space's plans at tp 1 and stay."""
    if not np.any(np.asarray(sequence_parallel) == 0):
        return np.zeros(np.shape(chunk["tp"]), dtype=bool)
    return (np.asarray(chunk["sequence_parallel"]) != 0) & (np.asarray(chunk["tp"]) <= 1)


def _product(coded: Mapping[str, np.ndarray], names: Sequence[str]
             ) -> Iterator[dict[str, np.ndarray]]:
    """The cartesian product of the named knobs' values as flat columns, LAYOUT_ROWS rows at
    most at a time (the leading knobs iterated, the trailing ones vectorised)."""
    sizes = [len(coded[n]) for n in names]
    split = 0
    while math.prod(sizes[split:]) > LAYOUT_ROWS and split < len(names) - 1:
        split += 1
    head, tail = list(names[:split]), list(names[split:])
    grids = np.meshgrid(*(coded[n] for n in tail), indexing="ij")
    flat = {n: g.ravel() for n, g in zip(tail, grids, strict=True)}
    rows = flat[tail[0]].size if tail else 1
    for combo in itertools.product(*(coded[n] for n in head)):
        yield {**{n: np.full(rows, x) for n, x in zip(head, combo, strict=True)}, **flat}


@dataclass(frozen=True)
class ClusterGrid:
    """A PlanGrid whose rows belong to several clusters of one GPU and pricing: row r is a
    layout of clusters[owner[r]] (the knob values of which are values[owner[r]]); `cluster`
    holds their fields as arrays along the rows' axis (stack_clusters), so that one call of
    the cost model evaluates them all."""

    grid: PlanGrid
    cluster: ClusterSpec | MixedCluster
    clusters: tuple[ClusterSpec | MixedCluster, ...]
    values: tuple[Mapping[str, Any], ...]
    owner: np.ndarray


_SHARED = ("gpu", "pricing")
"""ClusterSpec fields that clusters evaluated together must share (not arrays)."""


def stack_clusters(clusters: Sequence[ClusterSpec], owner: np.ndarray, ndim: int
                   ) -> ClusterSpec:
    """One ClusterSpec for rows owned by `clusters` (owner[r]: the index of row r's cluster):
    a field the clusters agree on stays as it is, any other becomes an array of shape
    (rows, 1, ..., 1) (`ndim` axes) holding each row's cluster's value."""
    first = clusters[0]
    out: dict[str, Any] = {}
    for f in fields(ClusterSpec):
        value = getattr(first, f.name)
        if f.name in _SHARED or all(_same(getattr(c, f.name), value) for c in clusters[1:]):
            out[f.name] = value
            continue
        per_cluster = np.array([float(np.ravel(getattr(c, f.name))[0]) for c in clusters])
        out[f.name] = per_cluster[owner].reshape((-1,) + (1,) * (ndim - 1))
    return ClusterSpec(**out)


def _same(a: Any, b: Any) -> bool:
    return bool(np.all(np.asarray(a) == np.asarray(b)))


def joinable(a: ClusterSpec, b: ClusterSpec) -> bool:
    """True when two clusters can be evaluated in one call (same GPU and pricing)."""
    return a.gpu == b.gpu and a.pricing == b.pricing
