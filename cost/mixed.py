"""Evaluate plans on a cluster of several GPU types (cost.pools.MixedCluster).

A plan may leave pools idle: every set of active pools (and, for a pipeline, every order of
them) is a way to run it, and each plan runs the fastest way that is valid and fits. Under
asynchronous parameter servers every worker runs (a worker's micro-batches make one update,
so leaving pools idle would change the batch of an update). One
pool alone is that pool's cluster evaluated as any single-type cluster (the same numbers);
several run the plan's placement: whole replicas per pool (cost.hetero_dp) or pipeline stages
across them (cost.hetero_pipeline). Every pool is paid for, used or not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from .breakdown import CostReport, MemoryUse, StepTime
from .degrees import degrees
from .efficiency import Efficiency
from .hetero_dp import data_parallel
from .hetero_pipeline import pipeline
from .inputs import Array, ClusterSpec, Plan, TrainingSpec
from .memory import hbm_usable_bytes
from .pools import MixedCluster, MixedStep, PoolUse, price_cluster, single_pool_plan
from .price import price
from .validity import valid_mask
from .workload import Workload

__all__ = ["evaluate_mixed"]

_DATA, _PIPELINE = 0.0, 1.0  # cost.codec.Placement codes
_PARAMETER_SERVER = 4.0  # cost.codec.Sync code

SingleEvaluate = Callable[[Workload, ClusterSpec, TrainingSpec, Plan, Efficiency], CostReport]


@dataclass(frozen=True, slots=True)
class _Way:
    """One way to run the plans (a set of pools, in order): its step, memory and fit."""

    step: StepTime
    memory: MemoryUse
    usable: Array
    valid: Array
    fits: Array
    pools: tuple[PoolUse, ...]
    bottleneck: Array
    expansion: Array

    @property
    def rank(self) -> Array:
        """0: valid and fits, 1: valid, 2: invalid (lower is better)."""
        return np.where(self.valid & self.fits, 0.0, np.where(self.valid, 1.0, 2.0))


def _alone(single: SingleEvaluate, workload: Workload, mixed: MixedCluster, i: int,
           training: TrainingSpec, plan: Plan, eff: Efficiency, shape: tuple[int, ...]) -> _Way:
    """Pool i alone, as its own cluster."""
    cluster = mixed.pools[i]
    report = single(workload, cluster, training, single_pool_plan(plan), eff)
    d = degrees(cluster, training, single_pool_plan(plan))

    def full(v: Any) -> Array:
        return np.broadcast_to(np.asarray(v, dtype=np.float64), shape)

    step = StepTime(**{k: full(getattr(report.step, k)) for k in StepTime.__dataclass_fields__})
    memory = MemoryUse(**{k: full(getattr(report.memory, k))
                          for k in MemoryUse.__dataclass_fields__})
    use = PoolUse(role=full(1.0), replicas=full(d.dp), stages=full(d.pp), first_stage=full(0.0),
                  layers=full(0.0), micro_batches=full(d.micro_batches), share=full(1.0),
                  busy_s=full(report.step_time_s - report.step.dp_comm_s
                              - report.step.optimizer_s),
                  memory_bytes=memory.total_bytes, usable_bytes=full(report.hbm_usable_bytes))
    pools = tuple(use if j == i else PoolUse.idle(shape, hbm_usable_bytes(c, eff))
                  for j, c in enumerate(mixed.pools))
    return _Way(step=step, memory=memory, usable=full(report.hbm_usable_bytes),
                valid=np.broadcast_to(report.valid, shape),
                fits=np.broadcast_to(report.fits, shape), pools=pools,
                bottleneck=full(float(i)), expansion=full(report.expansion_capacity_bytes))


def _together(workload: Workload, mixed: MixedCluster, order: tuple[int, ...],
              training: TrainingSpec, plan: Plan, eff: Efficiency, shape: tuple[int, ...]
              ) -> list[_Way]:
    """The pools `order` together: data placement (for the order as listed) and pipeline."""
    used = mixed.using(order)
    d = degrees(used, training, plan)
    valid = np.broadcast_to(valid_mask(workload, used, training, d), shape)
    expansion = np.full(shape, min(float(np.asarray(used.pools[i].expansion_capacity_bytes))
                                   for i in order))
    out = []
    if list(order) == sorted(order):
        out.append(_way(data_parallel(workload, used, training, d, eff),
                        valid & (d.placement == _DATA), expansion, shape))
    piped = pipeline(workload, used, training, d, eff)
    if piped is not None:
        out.append(_way(piped, valid & (d.placement == _PIPELINE), expansion, shape))
    return out


def _way(step: MixedStep, valid: Array, expansion: Array, shape: tuple[int, ...]) -> _Way:
    def full(v: Any) -> Array:
        return np.broadcast_to(np.asarray(v), shape)

    return _Way(step=StepTime(**{k: full(getattr(step.step, k))
                                 for k in StepTime.__dataclass_fields__}),
                memory=MemoryUse(**{k: full(getattr(step.memory, k))
                                    for k in MemoryUse.__dataclass_fields__}),
                usable=full(step.usable_bytes), valid=full(valid & step.valid),
                fits=full(step.fits), pools=step.pools, bottleneck=full(step.bottleneck),
                expansion=expansion)


def _better(a: _Way, b: _Way) -> Array:
    """Where way a beats way b: valid and fitting first, then the shorter step."""
    ra, rb = a.rank, b.rank
    return (ra < rb) | ((ra == rb) & (a.step.total_s < b.step.total_s))


def _pick(where: Array, a: _Way, b: _Way) -> _Way:
    """a where `where`, else b, field by field."""
    def choose(x: Any, y: Any) -> Any:
        if isinstance(x, tuple):
            return tuple(choose(u, v) for u, v in zip(x, y, strict=True))
        if hasattr(x, "__dataclass_fields__"):
            return type(x)(**{f.name: choose(getattr(x, f.name), getattr(y, f.name))
                              for f in fields(x)})
        return np.where(where, x, y)

    chosen: _Way = choose(a, b)
    return chosen


def evaluate_mixed(workload: Workload, mixed: MixedCluster, training: TrainingSpec,
                   plan: Plan, eff: Efficiency, single: SingleEvaluate) -> CostReport:
    """Step time, memory and price of every plan in `plan` on `mixed`, each run the fastest
    valid way its pools allow; `single` evaluates a single-type cluster."""
    shape = np.broadcast_shapes(*(np.shape(getattr(plan, f.name)) for f in fields(plan)))
    best: _Way | None = None
    every = len(mixed.active())
    servers = (np.asarray(plan.sync) == _PARAMETER_SERVER) if \
        workload.asynchronous_parameter_servers else np.zeros(shape, dtype=bool)
    for order in mixed.choices(ordered=True):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ways = ([_alone(single, workload, mixed, order[0], training, plan, eff, shape)]
                    if len(order) == 1 else
                    _together(workload, mixed, order, training, plan, eff, shape))
        for way in ways:
            if len(order) < every:  # asynchronous workers each push their own batch
                way = replace(way, valid=way.valid & ~servers)
            best = way if best is None else _pick(_better(way, best), way, best)
    if best is None:
        raise ValueError("a mixed cluster needs at least one pool with nodes")
    return _report(workload, mixed, training, best)


def _report(workload: Workload, mixed: MixedCluster, training: TrainingSpec, way: _Way
            ) -> CostReport:
    """The CostReport of the chosen ways: every pool priced, MFU over every GPU's peak."""
    active = [mixed.pools[i] for i in mixed.active()]
    gpus = mixed.all_gpus
    peak = sum(float(np.asarray(c.gpus)) * c.gpu.peak_for(training.precision)
               for c in active) / max(gpus, 1.0)
    units = workload.units_per_step(training)
    return CostReport(
        step=way.step, memory=way.memory,
        price=price(price_cluster(mixed), gpus=np.float64(gpus),
                    tokens_per_s=units / way.step.total_s, tokens=training.tokens,
                    checkpoint_bytes=workload.checkpoint_bytes(training)),
        gpus=np.float64(gpus), units_per_step=units,
        model_flops_per_step=workload.model_flops_per_step(training),
        palm_flops_per_step=workload.palm_flops_per_step(training), peak_flops_per_s=peak,
        hbm_usable_bytes=way.usable, expansion_capacity_bytes=way.expansion,
        valid=way.valid, fits=way.fits, pools=way.pools, bottleneck=way.bottleneck)
