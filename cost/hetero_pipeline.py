"""Pipelines across pools of different GPUs (placement: pipeline): every replica's stages
span the used pools in order, pool p holding gpus_p / (dp tp cp) consecutive stages of
dp x tp x cp GPUs; tensor parallelism stays inside a pool, and the sends between the last
stage of one pool and the first of the next cross the link between pools.

The layers are split unevenly so that the slowest stage is as fast as it can be within every
stage's memory, as Metis (Um et al., ATC'24, sec. 5: load-balanced layer partitioning per
device group) and Sailor (Strati et al., SOSP'25: stage splits by GPU speed and memory) do:
a stage of pool p with L layers takes L x t_p per micro-batch (t_p: one layer on that pool's
GPUs, cost.layer_costs.LayerCosts, or the host's time to launch its kernels where that is longer:
the GPU then waits for the host, cost.schedule.launch_bound_s), the last stage also the
logits; the least T for which sum over stages of min(floor((T - end) / t_p), Lmax) reaches
the model's layers is found by bisection, Lmax being what a stage's HBM holds with the
micro-batches in flight at its position (1F1B: min(m, pp - j) at stage j). A step of 1F1B
over stages of times t_j takes (m - 1) max t_j + sum t_j: the bubble is sum t_j - max t_j
(Narayanan et al. SC'21, generalised to uneven stages as in Metis' cost model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .breakdown import MemoryUse, StepTime
from .collectives import group_link, p2p_s
from .degrees import Degrees
from .efficiency import Efficiency
from .inputs import Array, ClusterSpec, TrainingSpec
from .layer_costs import LayerCosts
from .memory import hbm_usable_bytes, memory_use
from .pools import MixedCluster, MixedStep, PoolUse
from .schedule import step_time
from .workload import Footprint, ParamGroup, StageCost, Workload

__all__ = ["pipeline", "split_step_s"]


@dataclass(frozen=True, slots=True)
class _Pool:
    """One used pool of a pipeline: its stages, the first stage's index, its layer costs,
    and the most layers its stages (other than the last) and the last stage can hold."""

    cluster: ClusterSpec
    stages: Array
    first_stage: Array
    costs: LayerCosts
    is_first: bool
    is_last: bool
    most: Array  # layers one of its ordinary stages holds in HBM
    most_last: Array  # layers the last stage holds (last pool only)
    usable: float


def _per_param_bytes(costs: LayerCosts, d: Degrees) -> Array:
    """HBM bytes per parameter of a stage with the plan's ZeRO stage, shard group and offload,
    and the transient copies of the weights."""
    unit = Footprint(groups=(ParamGroup(params=np.ones(d.shape), replicas=d.dp * d.cp,
                                        stride=d.tp, shard=d.shard_group),),
                     state=costs.state, resident_params=np.zeros(d.shape),
                     activations_bytes=np.zeros(d.shape), buffers_bytes=np.zeros(d.shape))
    return memory_use(unit, d).total_bytes + costs.copy_bytes_per_param


def _layer_s(costs: LayerCosts) -> Array:
    """Seconds one layer holds a stage per micro-batch: its device time, or the host's time
    to launch its kernels where that is longer (cost.schedule.launch_bound_s)."""
    return np.maximum(costs.layer_s, costs.host_s)


def _capacity(costs: LayerCosts, d: Degrees, usable: float, *, in_flight: Array,
              end: bool, last: bool) -> Array:
    """Layers a stage holds in `usable` bytes with `in_flight` micro-batches' activations,
    the vocabulary matrix of an end stage, and the buffers (the logits' on the last)."""
    per_param = _per_param_bytes(costs, d)
    fixed = (costs.end_params * per_param * float(end) + costs.buffer_bytes
             + costs.last_buffer_bytes * float(last))
    per_layer = costs.layer_params * per_param + costs.layer_activation_bytes * in_flight
    return np.floor((usable - fixed) / np.maximum(per_layer, 1.0))


def _pools(workload: Workload, mixed: MixedCluster, training: TrainingSpec, d: Degrees,
           eff: Efficiency) -> list[_Pool] | None:
    """The used pools in pipeline order with their stages and memory limits (None when the
    workload's layers are not alike)."""
    out: list[_Pool] = []
    first = np.zeros(d.shape)
    for n, i in enumerate(mixed.used):
        cluster = mixed.pools[i]
        costs = workload.layer_costs(cluster, training, d, eff)
        if costs is None:
            return None
        stages = mixed.pool_gpus(i) / (d.dp * d.tp * d.cp)
        usable = float(hbm_usable_bytes(cluster, eff, gpus=mixed.gpus))
        is_first, is_last = n == 0, n == len(mixed.used) - 1
        most = _capacity(costs, d, usable, in_flight=np.minimum(d.micro_batches, d.pp - first),
                         end=is_first, last=False)
        most_last = _capacity(costs, d, usable, in_flight=np.ones(d.shape), end=True,
                              last=True)
        out.append(_Pool(cluster=cluster, stages=stages, first_stage=first, costs=costs,
                         is_first=is_first, is_last=is_last, most=most,
                         most_last=most_last if is_last else np.zeros(d.shape),
                         usable=usable))
        first = first + stages
    return out


def _layers_at(pool: _Pool, t: Array, cap: bool) -> tuple[Array, Array]:
    """Layers one ordinary stage and the last stage of `pool` take within t seconds (the last
    stage: its layers and the logits on the device, its layers' launches on the host)."""
    c = pool.costs
    ordinary = np.floor(t / _layer_s(c) + 1e-9)
    last = np.minimum(np.floor((t - c.last_s) / c.layer_s + 1e-9),
                      np.floor(t / np.maximum(c.host_s, 1e-300) + 1e-9))
    if cap:
        ordinary, last = np.minimum(ordinary, pool.most), np.minimum(last, pool.most_last)
    return np.maximum(ordinary, 0.0), np.maximum(last, 0.0)


def _placed(pools: list[_Pool], t: Array, cap: bool) -> Array:
    total: Array = np.float64(0.0)
    for p in pools:
        ordinary, last = _layers_at(p, t, cap)
        count = p.stages - float(p.is_last)
        total = total + count * ordinary + (last if p.is_last else 0.0)
    return total


def split_step_s(pools: list[_Pool], layers: int, *, cap: bool, iterations: int = 64
                 ) -> Array:
    """The least slowest-stage time T at which the stages hold the model's layers, each at
    least one (bisection on T)."""
    lo = np.max(np.stack([np.broadcast_to(
        np.maximum(p.costs.layer_s + p.costs.last_s, p.costs.host_s) if p.is_last
        else _layer_s(p.costs), np.shape(p.stages)) for p in pools]), axis=0)
    hi = lo + layers * np.max(np.stack([np.broadcast_to(_layer_s(p.costs), np.shape(p.stages))
                                        for p in pools]), axis=0)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        enough = _placed(pools, mid, cap) >= layers
        hi = np.where(enough, mid, hi)
        lo = np.where(enough, lo, mid)
    return hi


def pipeline(workload: Workload, mixed: MixedCluster, training: TrainingSpec, d: Degrees,
             eff: Efficiency) -> MixedStep | None:
    """The plan's pipeline across the used pools, in their order (None when the workload's
    layers are not alike: it trains data-parallel across pools)."""
    pools = _pools(workload, mixed, training, d, eff)
    if pools is None:
        return None
    layers = pools[0].costs.layers
    held = (_placed(pools, np.full(d.shape, np.inf), cap=True) >= layers) & np.all(
        np.stack([np.broadcast_to((p.most >= 1) & ((p.most_last >= 1) | (not p.is_last)),
                                  d.shape) for p in pools]), axis=0)
    t = np.where(held, split_step_s(pools, layers, cap=True),
                 split_step_s(pools, layers, cap=False))
    counts = [_layers_at(p, t, cap=False) for p in pools]
    return _assemble(workload, mixed, training, d, eff, pools, counts, held)


class _StageTimes(NamedTuple):
    """Per pool: the time of its slowest stage, that stage's time on the device alone (the
    rest is waiting for the host) and its layers, the most layers one of its stages holds, and
    the layers the pool takes (capacities scaled down to the model's layers in proportion)."""

    slowest: list[Array]
    device: list[Array]
    busiest: list[Array]
    most: list[Array]
    placed: list[Array]


def _stage_times(pools: list[_Pool], counts: list[tuple[Array, Array]]) -> _StageTimes:
    """The pools' stage times and layers (_StageTimes). A pool holding only the last stage
    has no ordinary stage: its stage's layers are the last stage's."""
    out = _StageTimes([], [], [], [], [])
    for p, (ordinary, last) in zip(pools, counts, strict=True):
        c = p.costs
        has_ordinary = p.stages - float(p.is_last) > 0
        ordinary = np.where(has_ordinary, ordinary, 0.0)
        t_ordinary = ordinary * _layer_s(c)
        d_last = last * c.layer_s + c.last_s if p.is_last else np.float64(0.0)
        t_last = np.maximum(d_last, last * c.host_s) if p.is_last else np.float64(0.0)
        later = t_last > t_ordinary
        out.slowest.append(np.maximum(t_ordinary, t_last))
        out.device.append(np.where(later, d_last, ordinary * c.layer_s))
        out.busiest.append(np.where(later, last, ordinary) if p.is_last else ordinary)
        out.most.append(np.maximum(ordinary, last) if p.is_last else ordinary)
        out.placed.append((p.stages - float(p.is_last)) * ordinary
                          + (last if p.is_last else 0.0))
    scale = pools[0].costs.layers / sum(out.placed, start=np.float64(0.0))
    out.placed[:] = [n * scale for n in out.placed]
    return out


def _sends_s(mixed: MixedCluster, pools: list[_Pool], d: Degrees, eff: Efficiency) -> Array:
    """Activation and gradient sends, 2 per micro-batch on the slowest boundary plus one pass
    over every boundary: inside a pool on its links, between pools on the link between them."""
    send = pools[0].costs.send_bytes
    cross = p2p_s(send, mixed.inter_pool_bandwidth_bytes_per_s * eff.network_fraction,
                  mixed.inter_pool_latency_s)
    slowest = np.broadcast_to(cross, d.shape)
    total = (len(pools) - 1) * cross
    for p in pools:
        link = group_link(p.cluster, stride=d.tp * d.cp * d.dp, size=p.stages,
                          fraction=eff.network_fraction)
        inside = p2p_s(send, link.bandwidth_bytes_per_s, link.latency_s)
        total = total + (p.stages - 1.0) * inside
        slowest = np.maximum(slowest, np.where(p.stages > 1, inside, 0.0))
    return 2.0 * (d.micro_batches * slowest + total)


def _pool_step(workload: Workload, training: TrainingSpec, d: Degrees, eff: Efficiency,
               pool: _Pool, counts: tuple[Array, Array], bubble: Array
               ) -> tuple[StepTime, MemoryUse]:
    """The data-parallel reduction, optimizer and memory of the pool's fullest stage: its first
    ordinary stage (the most micro-batches in flight, the embedding on the first pool) or, on
    the last pool, the last stage (one micro-batch in flight, the logits and their buffers),
    whichever holds more."""
    ordinary, last = counts
    first = np.minimum(d.micro_batches, d.pp - pool.first_stage)
    kinds = [(ordinary, first, float(pool.is_first), 0.0)]
    if pool.is_last:
        kinds.append((last, np.ones(d.shape), 1.0, 1.0))
    if pool.is_last and bool(np.all(pool.stages <= 1)):
        kinds = kinds[1:]
    results = [_stage_step(workload, d, eff, pool, layers, in_flight, end, logits, bubble)
               for layers, in_flight, end, logits in kinds]
    if len(results) == 1:
        return results[0]
    (s1, m1), (s2, m2) = results
    more = m2.total_bytes > m1.total_bytes
    return (StepTime(**{k: np.maximum(getattr(s1, k), getattr(s2, k))
                        for k in StepTime.__dataclass_fields__}),
            MemoryUse(**{k: np.where(more, getattr(m2, k), getattr(m1, k))
                         for k in MemoryUse.__dataclass_fields__}))


def _stage_step(workload: Workload, d: Degrees, eff: Efficiency, pool: _Pool, layers: Array,
                in_flight: Array, end: float, logits: float, bubble: Array
                ) -> tuple[StepTime, MemoryUse]:
    """One stage of `layers` layers: its reduction, optimizer and offload (cost.schedule: the
    reductions also hide in the pipeline's `bubble`) and its memory (cost.memory)."""
    c = pool.costs
    params = layers * c.layer_params + end * c.end_params
    held = Footprint(groups=(ParamGroup(params=params, replicas=d.dp * d.cp, stride=d.tp,
                                        shard=d.shard_group),),
                     state=c.state, resident_params=2.0 * c.layer_params,
                     activations_bytes=c.layer_activation_bytes * layers * in_flight,
                     buffers_bytes=c.buffer_bytes + logits * c.last_buffer_bytes
                     + c.copy_bytes_per_param * params)
    zero = np.zeros(d.shape)
    stage = StageCost(compute_s=layers * (c.forward_s + c.backward_s),
                      recompute_s=layers * c.recompute_s, tp_comm_s=zero, cp_comm_s=zero,
                      forward_s=layers * c.forward_s, backward_s=layers * c.backward_s,
                      bubble_unit_s=bubble / np.maximum(d.pp - 1.0, 1.0), send_bytes=zero,
                      units=np.maximum(layers, 1.0))
    return step_time(workload, pool.cluster, stage, held, d, eff), memory_use(held, d)


def _assemble(workload: Workload, mixed: MixedCluster, training: TrainingSpec, d: Degrees,
              eff: Efficiency, pools: list[_Pool], counts: list[tuple[Array, Array]],
              held: Array) -> MixedStep:
    """The step of the split: the slowest stage's micro-batches, the 1F1B bubble of uneven
    stages (the sum of the stage times less the slowest), the sends, and the reduction and
    optimizer of the pool slowest at them."""
    stages = _stage_times(pools, counts)
    slowest, device, placed = stages.slowest, stages.device, stages.placed
    times = np.stack([np.broadcast_to(s, d.shape) for s in slowest])
    b = np.argmax(times, axis=0)
    t_max = np.take_along_axis(times, b[None, ...], axis=0)[0]
    total_t = sum((n * _layer_s(p.costs) for n, p in zip(placed, pools, strict=True)),
                  start=np.float64(0.0)) + pools[-1].costs.last_s
    bubble = np.maximum(total_t - t_max, 0.0)
    steps = [_pool_step(workload, training, d, eff, p, c, bubble)
             for p, c in zip(pools, counts, strict=True)]

    def at_b(values: list[Array]) -> Array:
        stacked = np.stack([np.broadcast_to(v, d.shape) for v in values])
        return np.take_along_axis(stacked, b[None, ...], axis=0)[0]

    layers_b = at_b(stages.busiest)
    parts = {k: layers_b * at_b([getattr(p.costs, k) for p in pools])
             for k in ("forward_s", "backward_s", "recompute_s", "tp_comm_s", "cp_comm_s")}
    device_b = at_b(device)

    def slowest_of(name: str) -> Array:
        return np.max(np.stack([np.broadcast_to(getattr(s, name), d.shape) for s, _ in steps]),
                      axis=0)

    m = d.micro_batches
    step = StepTime(
        compute_s=m * (parts["forward_s"] + parts["backward_s"]
                       + np.maximum(device_b - sum(parts.values()), 0.0)),
        recompute_s=m * parts["recompute_s"], tp_comm_s=m * parts["tp_comm_s"],
        cp_comm_s=m * parts["cp_comm_s"], pp_comm_s=_sends_s(mixed, pools, d, eff),
        pp_bubble_s=bubble, dp_comm_s=slowest_of("dp_comm_s"),
        optimizer_s=slowest_of("optimizer_s"), offload_s=slowest_of("offload_s"),
        launch_s=m * np.maximum(t_max - device_b, 0.0))
    return _result(mixed, d, eff, pools, steps, stages.most, placed, slowest, held, step,
                   b.astype(np.float64))


def _result(mixed: MixedCluster, d: Degrees, eff: Efficiency, pools: list[_Pool],
            steps: list[tuple[StepTime, MemoryUse]], most: list[Array], placed: list[Array],
            slowest: list[Array], held: Array, step: StepTime, b: Array) -> MixedStep:
    ratio = np.stack([np.broadcast_to(mem.total_bytes / p.usable, d.shape)
                      for p, (_, mem) in zip(pools, steps, strict=True)])
    fullest = np.argmax(ratio, axis=0)
    memory = MemoryUse(**{k: np.take_along_axis(np.stack([np.broadcast_to(
        getattr(mem, k), d.shape) for _, mem in steps]), fullest[None, ...], axis=0)[0]
        for k in MemoryUse.__dataclass_fields__})
    expansion_ok = np.all(np.stack([np.broadcast_to(
        mem.expansion_bytes <= np.asarray(p.cluster.expansion_capacity_bytes), d.shape)
        for p, (_, mem) in zip(pools, steps, strict=True)]), axis=0)
    layers = pools[0].costs.layers
    uses = {i: PoolUse(role=np.full(d.shape, 2.0), replicas=np.broadcast_to(d.dp, d.shape),
                       stages=np.broadcast_to(p.stages, d.shape),
                       first_stage=np.broadcast_to(p.first_stage, d.shape),
                       layers=np.broadcast_to(n, d.shape),
                       micro_batches=np.broadcast_to(d.micro_batches, d.shape),
                       share=np.broadcast_to(k / layers, d.shape),
                       busy_s=np.broadcast_to(d.micro_batches * s, d.shape),
                       memory_bytes=np.broadcast_to(mem.total_bytes, d.shape),
                       usable_bytes=np.full(d.shape, p.usable))
            for i, p, n, k, s, (_, mem) in zip(mixed.used, pools, most, placed, slowest, steps,
                                               strict=True)}
    index = np.asarray(mixed.used, dtype=np.float64)
    return MixedStep(
        step=step, memory=memory,
        usable_bytes=np.take_along_axis(np.stack([np.full(d.shape, p.usable) for p in pools]),
                                        fullest[None, ...], axis=0)[0],
        valid=np.ones(d.shape, dtype=bool),
        fits=held & np.all(ratio <= 1.0, axis=0) & expansion_ok,
        pools=tuple(uses.get(i) or PoolUse.idle(d.shape, hbm_usable_bytes(c, eff))
                    for i, c in enumerate(mixed.pools)),
        bottleneck=index[b.astype(int)])
