"""The cost model's entry point: one call evaluates one plan or an array of plans of any
workload (cost.workload)."""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .breakdown import CostReport
from .degrees import Degrees, degrees, grid_degrees
from .efficiency import DEFAULT_EFFICIENCY, Efficiency
from .inputs import ClusterSpec, Plan, TrainingSpec
from .memory import hbm_usable_bytes, memory_use
from .price import price
from .schedule import step_time
from .validity import valid_mask
from .workload import Workload

if TYPE_CHECKING:
    # pools of several GPU types; a cluster that is not a ClusterSpec is one. Imported where
    # pools are met, so that a cluster of one type never imports cost.pools (issue 14)
    from .pools import MixedCluster

__all__ = ["CHUNK", "evaluate", "evaluate_grid"]


CHUNK = 1 << 16
"""Plans per vectorised pass: arrays of this size stay in cache (1.6x faster than one pass
over a million plans on a 2-core machine)."""


def evaluate(
    workload: Workload, cluster: ClusterSpec | MixedCluster, training: TrainingSpec,
    plan: Plan, *, efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> CostReport:
    """Step time, memory and price of every plan in `plan` (fields broadcast together).

    Structurally invalid plans are evaluated as well as the formulas allow and flagged in
    `valid`; plans over HBM or expansion capacity are flagged in `fits`. A long 1-D array of
    plans on a scalar cluster is evaluated CHUNK plans at a time. A cluster of several GPU
    types (cost.pools.MixedCluster) is evaluated by cost.mixed, each of its pools alone as
    here, CHUNK plans at a time too."""
    shape = np.broadcast_shapes(*(np.shape(getattr(plan, f.name)) for f in fields(plan)))
    scalar_cluster = not isinstance(cluster, ClusterSpec) or all(
        np.ndim(getattr(cluster, f.name)) == 0 for f in fields(cluster))
    if len(shape) == 1 and shape[0] > CHUNK and scalar_cluster:
        parts = [_one_call(workload, cluster, training, _slice(plan, shape[0], i), efficiency)
                 for i in range(0, shape[0], CHUNK)]
        return _concatenate(parts)
    return _one_call(workload, cluster, training, plan, efficiency)


def _one_call(workload: Workload, cluster: ClusterSpec | MixedCluster, training: TrainingSpec,
              plan: Plan, efficiency: Efficiency) -> CostReport:
    if not isinstance(cluster, ClusterSpec):
        from .mixed import evaluate_mixed  # only for pools: a one-GPU-type spec skips its import

        return evaluate_mixed(workload, cluster, training, plan, efficiency, _single)
    return _evaluate(workload, cluster, training, plan, efficiency)


def _single(workload: Workload, cluster: ClusterSpec, training: TrainingSpec, plan: Plan,
            efficiency: Efficiency) -> CostReport:
    return evaluate(workload, cluster, training, plan, efficiency=efficiency)


def _slice(plan: Plan, n: int, start: int) -> Plan:
    stop = start + CHUNK
    return Plan(**{f.name: np.broadcast_to(getattr(plan, f.name), (n,))[start:stop]
                   for f in fields(plan)})


def _concatenate(parts: list[Any]) -> Any:
    """Join the reports (or breakdowns) of consecutive chunks field by field."""
    first = parts[0]
    if first is None or (isinstance(first, tuple) and not first):
        return first
    if isinstance(first, tuple):  # a mixed cluster's pools, one PoolUse each
        return tuple(_concatenate(list(each)) for each in zip(*parts, strict=True))
    if not is_dataclass(first):
        if np.ndim(first) == 0:
            return first
        return np.concatenate([np.broadcast_to(p, (np.size(p),)) for p in parts])
    kind: Any = type(first)
    return kind(**{f.name: _concatenate([getattr(p, f.name) for p in parts])
                   for f in fields(first)})


def evaluate_grid(
    workload: Workload, cluster: ClusterSpec | MixedCluster, training: TrainingSpec,
    plan: Plan, *, efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> CostReport:
    """`evaluate` on a grid of plans: `plan`'s fields are arrays on their own axes (shapes that
    broadcast together, e.g. layouts (F, 1, 1) x recompute (1, 3, 1) x zero (1, 1, 4)). Each
    term of the model is computed once per distinct combination of the knobs it reads and
    broadcast (cost.degrees.grid_degrees): the numbers are those of the flat plans, at a
    fraction of the work. The report's arrays broadcast to the grid's shape. A cluster of
    several GPU types has flat grids only (search_spaces.Space.grids: its layouts, no axes),
    which `evaluate` places plan by plan on its pools (cost.mixed)."""
    if not isinstance(cluster, ClusterSpec):
        return evaluate(workload, cluster, training, plan, efficiency=efficiency)
    return _report(workload, cluster, training, grid_degrees(cluster, training, plan),
                   efficiency)


def _evaluate(workload: Workload, cluster: ClusterSpec, training: TrainingSpec, plan: Plan,
              eff: Efficiency) -> CostReport:
    return _report(workload, cluster, training, degrees(cluster, training, plan), eff)


def sharded_grad_op(d: Degrees, eff: Efficiency) -> Degrees:
    """ZeRO-3 without `reshard_after_forward` (cost.efficiency.Efficiency): weights gathered
    once per step and kept, gradients accumulated unsharded and reduce-scattered once, the
    optimizer state sharded: ZeRO-1's traffic and memory (the plan still reads zero=3);
    "unless_pipelined" does so where the plan has pipeline stages."""
    if eff.reshard_after_forward is True:
        return d
    kept = d.pp > 1 if eff.reshard_after_forward == "unless_pipelined" else True
    return replace(d, zero=np.where((d.zero >= 3) & kept, 1.0, d.zero))


def _report(workload: Workload, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
            eff: Efficiency) -> CostReport:
    with np.errstate(divide="ignore", invalid="ignore"):
        run = sharded_grad_op(d, eff)
        held = workload.footprint(cluster, training, run, eff)
        step = step_time(workload, cluster, workload.stage_cost(cluster, training, run, eff),
                         held, run, eff)
        memory = memory_use(held, run)
        units = workload.units_per_step(training)
        usable = np.broadcast_to(hbm_usable_bytes(cluster, eff), d.shape)
        expansion = np.broadcast_to(
            np.asarray(cluster.expansion_capacity_bytes, dtype=np.float64), d.shape)
        fits = (memory.total_bytes <= usable) & (memory.expansion_bytes <= expansion)
        return CostReport(
            step=step, memory=memory,
            price=price(cluster, gpus=d.gpus, tokens_per_s=units / step.total_s,
                        tokens=training.tokens,
                        checkpoint_bytes=workload.checkpoint_bytes(training)),
            gpus=d.gpus, units_per_step=units,
            model_flops_per_step=workload.model_flops_per_step(training),
            palm_flops_per_step=workload.palm_flops_per_step(training),
            peak_flops_per_s=cluster.gpu.peak_for(training.precision),
            hbm_usable_bytes=usable, expansion_capacity_bytes=expansion,
            valid=valid_mask(workload, cluster, training, d), fits=fits,
        )
