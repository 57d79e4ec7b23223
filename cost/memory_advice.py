"""What to change when one plan does not fit in HBM: only what can still move for that plan
on its cluster (the same rules as cost.validity decide which larger degrees run), or, where
nothing can, that the model does not fit the cluster.

Each lever shrinks a term of cost.memory: tp, pp (and ep of a mixture of experts) divide the
weights and activations, cp the activations, ZeRO shards the model states over the
data-parallel ranks (nothing to shard on one), full recomputation keeps one input per layer,
sequence parallelism divides the activations outside tensor-parallel regions, a smaller
micro-batch holds fewer of them, and offload moves the optimizer state and weights to an
expansion tier, if the cluster has one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from .codec import Offload, PlanRecord, Recompute
from .degrees import degrees
from .inputs import ClusterSpec, Plan, TrainingSpec
from .validity import structurally_valid
from .workload import Workload

if TYPE_CHECKING:
    from .pools import MixedCluster

__all__ = ["MemoryLevers", "memory_advice", "memory_levers"]

_DEGREES = ("ep", "tp", "pp", "cp")
_OFFLOAD_NEXT = {Offload.NONE: "optimizer", Offload.OPTIMIZER: "optimizer+weights"}


@dataclass(frozen=True, slots=True)
class MemoryLevers:
    """What of one plan can still lower its memory on its cluster."""

    degrees: tuple[str, ...]  # parallel degrees that can grow on these GPUs
    zero: bool  # ZeRO below 3 with more than one rank to shard over
    recompute: bool  # recomputation not yet full
    sequence_parallel: bool  # off, with tp > 1
    micro_batch: bool  # above 1
    offload: str  # the next offload ("optimizer", "optimizer+weights"), or ""
    expansion: bool  # the cluster has an expansion tier to offload to


def _grows(workload: Workload, cluster: ClusterSpec | MixedCluster, training: TrainingSpec,
           plan: Plan, record: PlanRecord, knob: str) -> bool:
    """Some larger value of `knob` runs on the same GPUs (the rules of cost.validity say
    which): tp, pp or cp taken from dp (a factor of it), ep folded into more of the tp·cp·dp
    ranks."""
    if knob == "ep":
        room = record.tp * record.cp * record.dp // max(record.ep * record.etp, 1)
        factors = [f for f in range(2, room + 1) if room % f == 0]
        return any(bool(np.ravel(structurally_valid(
            workload, cluster, training, replace(plan, ep=record.ep * f)))[0])
            for f in factors)
    factors = [f for f in range(2, record.dp + 1) if record.dp % f == 0]  # tp, pp, cp
    # tp > 1 may need sequence parallelism (a mixture of experts does)
    both = (plan.sequence_parallel, True) if knob == "tp" else (plan.sequence_parallel,)
    return any(bool(np.ravel(structurally_valid(
        workload, cluster, training, replace(plan, dp=0, sequence_parallel=sp,
                                             **{knob: getattr(record, knob) * f})))[0])
        for f in factors for sp in both)


def memory_levers(workload: Workload, cluster: ClusterSpec | MixedCluster,
                  training: TrainingSpec, plan: Plan, *, expansion_bytes: float
                  ) -> MemoryLevers:
    """The levers of one plan (scalar fields) that the workload has and that can still move;
    `expansion_bytes`: the expansion memory per GPU the cluster offers."""
    knobs = workload.knobs
    record = PlanRecord.of(plan, gpus=float(np.ravel(np.asarray(cluster.gpus))[0]))
    shard_ranks = float(np.ravel(degrees(cluster, training, plan).shard_group)[0])
    return MemoryLevers(
        degrees=tuple(k for k in _DEGREES
                      if k in knobs and _grows(workload, cluster, training, plan, record, k)),
        zero="zero" in knobs and record.zero < 3 and shard_ranks > 1,
        recompute="recompute" in knobs and record.recompute is not Recompute.FULL,
        sequence_parallel="sequence_parallel" in knobs and record.tp > 1
        and not record.sequence_parallel,
        micro_batch="micro_batch" in knobs and record.micro_batch > 1,
        offload=_OFFLOAD_NEXT.get(record.offload, "") if "offload" in knobs else "",
        expansion=expansion_bytes > 0)


def _either(items: list[str]) -> str:
    """'a', 'a or b', 'a, b or c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def memory_advice(levers: MemoryLevers) -> str:
    """One line: what of the plan to change, then what of the cluster where the plan's
    degrees cannot grow on it; or, where nothing of the plan can move, that the model does
    not fit the cluster."""
    plan = []
    if levers.degrees:
        plan.append("raise " + "/".join(levers.degrees))
    if levers.zero:
        plan.append("zero=3")
    if levers.recompute:
        plan.append("recompute=full")
    if levers.sequence_parallel:
        plan.append("sequence_parallel=true")
    if levers.micro_batch:
        plan.append("lower micro_batch")
    if levers.offload and levers.expansion:
        plan.append(f"offload={levers.offload}")
    cluster = [] if levers.degrees else ["more GPUs", "a GPU with more memory"]
    if levers.offload and not levers.expansion:
        cluster.append("a cluster.expansion tier to offload to")
    if not plan:
        return f"nothing left to change in the plan: the model does not fit this cluster; " \
            f"use {_either(cluster)}"
    return _either(plan) + (f"; or {_either(cluster)}" if cluster else "")
