"""Data parallelism over pools of different GPUs (placement: data): every pool holds whole
replicas of the plan's layout (tp x pp x cp GPUs each), and the batch is shared among them.

Synchronous training shares the micro-batches so that the replicas finish together (batch
shares `balanced`, as HetPipe's and Cephalo's balancing does: each replica's work is
linear in its micro-batches, m a_p + b_p, and the smallest step T with
sum_p d_p floor((T - b_p) / a_p) >= the step's micro-batches is found by bisection), or
equally (`equal`); the gradients are then reduced over all replicas at the pace of the
slowest link among the pools' and the link between pools. Asynchronous parameter servers
(CM-DARE's setting) serve every worker as it comes: the workers of each pool form one class
of a closed queueing network at the servers (cost.sync.closed_throughput), so the cluster
trains at the sum of the workers' rates up to what the servers can serve.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .breakdown import MemoryUse, StepTime
from .degrees import Degrees
from .efficiency import Efficiency
from .inputs import Array, ClusterSpec, TrainingSpec
from .memory import hbm_usable_bytes, memory_use
from .pools import SERVERS, MixedCluster, MixedStep, PoolUse, dp_link_cluster
from .schedule import PARAMETER_SERVER, step_time
from .sync import closed_throughput, server_service_s
from .workload import StageCost, Workload

__all__ = ["balanced_step_s", "data_parallel"]

_WORK = ("compute_s", "recompute_s", "tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s",
         "pp_bubble_s", "launch_s")
"""The parts of a replica's step that scale with its share of the batch."""
_EQUAL = 1.0  # cost.codec.Shares.EQUAL
_SATURATED = 0.8
"""Server utilisation (updates/s x service seconds) from which the servers bound the step."""


@dataclass(frozen=True, slots=True)
class _Pool:
    """One pool's part of a plan at its micro-batches: its own step (own links), the step of
    the gradient reduction across pools, and its memory."""

    cluster: ClusterSpec
    replicas: Array
    micro_batches: Array
    stage: StageCost
    own: StepTime
    synced: StepTime
    memory: MemoryUse
    gradient_bytes: Array

    @property
    def work_s(self) -> Array:
        """What the pool's replicas do before the reduction: every part but the data-parallel
        traffic and the optimizer."""
        parts = sum((getattr(self.own, k) for k in _WORK), start=np.float64(0.0))
        return parts + self.synced.offload_s


def balanced_step_s(slope: list[Array], base: list[Array], replicas: list[Array],
                    micro_batches: Array, *, iterations: int = 64) -> Array:
    """The least T at which the pools' replicas can do `micro_batches` between them, each
    replica of pool p doing m >= 1 micro-batches in m a_p + b_p seconds: the least T with
    sum_p d_p floor((T - b_p) / a_p) >= micro_batches (bisection; min-max load balancing)."""
    lo = np.max(np.stack([np.broadcast_to(a + b, np.shape(micro_batches))
                          for a, b in zip(slope, base, strict=True)]), axis=0)
    hi = np.min(np.stack([np.broadcast_to(a * np.ceil(micro_batches / d) + b,
                                          np.shape(micro_batches))
                          for a, b, d in zip(slope, base, replicas, strict=True)]), axis=0)
    hi = np.maximum(hi, lo)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        done = sum((d * np.floor((mid - b) / a) for a, b, d in zip(slope, base, replicas,
                                                                    strict=True)),
                   start=np.float64(0.0))
        enough = done >= micro_batches
        hi = np.where(enough, mid, hi)
        lo = np.where(enough, lo, mid)
    return hi


def _pool_part(workload: Workload, cluster: ClusterSpec, link: ClusterSpec,
               training: TrainingSpec, d: Degrees, eff: Efficiency, *, replicas: Array,
               micro_batches: Array) -> _Pool:
    """One pool at `micro_batches` per replica: its step on its own links (its replicas'
    pipeline), and the reduction over all replicas (dp = d.dp) on the slowest link."""
    gpus = np.full(d.shape, float(np.asarray(cluster.gpus)))
    own_d = replace(d, dp=replicas, micro_batches=micro_batches, gpus=gpus)
    all_d = replace(d, micro_batches=micro_batches, gpus=gpus)
    stage = workload.stage_cost(cluster, training, own_d, eff)
    held = workload.footprint(cluster, training, all_d, eff)
    gradient = sum((g.params * held.state.gradient for g in held.groups), start=np.float64(0))
    return _Pool(cluster=cluster, replicas=replicas, micro_batches=micro_batches, stage=stage,
                 own=step_time(workload, cluster, stage, held, own_d, eff),
                 synced=step_time(workload, link, stage, held, all_d, eff),
                 memory=memory_use(held, all_d), gradient_bytes=gradient)


def _shares(workload: Workload, mixed: MixedCluster, link: ClusterSpec,
            training: TrainingSpec, d: Degrees, eff: Efficiency, replicas: list[Array]
            ) -> list[Array]:
    """Micro-batches per replica of each pool: equal (d.micro_batches), or balanced so that
    the slowest replica finishes first (work at 1 and 2 micro-batches gives each pool's line)."""
    one = [_pool_part(workload, mixed.pools[i], link, training, d, eff, replicas=r,
                      micro_batches=np.ones(d.shape)).work_s
           for i, r in zip(mixed.used, replicas, strict=True)]
    two = [_pool_part(workload, mixed.pools[i], link, training, d, eff, replicas=r,
                      micro_batches=np.full(d.shape, 2.0)).work_s
           for i, r in zip(mixed.used, replicas, strict=True)]
    slope = [np.maximum(b - a, 1e-12) for a, b in zip(one, two, strict=True)]
    base = [a - s for a, s in zip(one, slope, strict=True)]
    total = d.dp * d.micro_batches
    step = balanced_step_s(slope, base, replicas, total)
    balanced = [np.maximum(np.floor((step - b) / a + 1e-9), 1.0)
                for a, b in zip(slope, base, strict=True)]
    balanced = trimmed_counts(balanced, slope, base, replicas, total)
    return [np.where(d.shares == _EQUAL, d.micro_batches, m) for m in balanced]


def trimmed_counts(counts: list[Array], slope: list[Array], base: list[Array],
                   replicas: list[Array], micro_batches: Array) -> list[Array]:
    """Micro-batches per replica that do the step's `micro_batches` and no more: at the
    balanced step time several pools may each fit one more micro-batch, which together
    overshoot the batch (8 replicas x 62 + 4 x 133 = 1,028 samples for a batch of 1,024).
    The busiest pool that can give back whole micro-batches (each of its replicas one, while
    the rest still make the batch, one a replica at least) does, then the next; giving back
    never lengthens the step."""
    counts = list(counts)
    for _ in counts:
        over = sum((d * m for d, m in zip(replicas, counts, strict=True)),
                   start=np.float64(0.0)) - micro_batches
        spare = [np.minimum(np.floor(over / d + 1e-9), m - 1.0)
                 for d, m in zip(replicas, counts, strict=True)]
        busy = np.stack([np.where(s >= 1.0, m * a + b, -np.inf) for s, m, a, b in zip(
            spare, counts, slope, base, strict=True)])
        pick = np.argmax(busy, axis=0)
        counts = [np.where((pick == i) & (s >= 1.0), m - s, m)
                  for i, (s, m) in enumerate(zip(spare, counts, strict=True))]
    return counts


def data_parallel(workload: Workload, mixed: MixedCluster, training: TrainingSpec,
                  d: Degrees, eff: Efficiency) -> MixedStep:
    """Every used pool holds gpus / (tp pp cp) replicas; synchronous or asynchronous
    (sync: parameter_server on a workload whose servers run asynchronously: every worker
    cycles through the step's equal share of micro-batches, batch shares do not apply)."""
    link = dp_link_cluster(mixed, mixed.used)
    replicas = [mixed.pool_gpus(i) / (d.tp * d.pp * d.cp) for i in mixed.used]
    counts = _shares(workload, mixed, link, training, d, eff, replicas)
    parts = [_pool_part(workload, mixed.pools[i], link, training, d, eff, replicas=r,
                        micro_batches=m)
             for i, r, m in zip(mixed.used, replicas, counts, strict=True)]
    synchronous = _synchronous(parts, d)
    use = d.sync == PARAMETER_SERVER
    if not workload.asynchronous_parameter_servers or not np.any(use):
        return _assemble(mixed, d, parts, *synchronous, eff)
    cycles = [_pool_part(workload, mixed.pools[i], link, training, d, eff, replicas=r,
                         micro_batches=d.micro_batches)
              for i, r in zip(mixed.used, replicas, strict=True)]
    step, busy, bottleneck = _asynchronous(mixed, cycles, d, eff)
    parts = [replace(a, micro_batches=np.where(use, c.micro_batches, a.micro_batches),
                     memory=MemoryUse(**{k: np.where(use, getattr(c.memory, k),
                                                     getattr(a.memory, k))
                                         for k in MemoryUse.__dataclass_fields__}))
             for a, c in zip(parts, cycles, strict=True)]
    chosen = StepTime(**{k: np.where(use, getattr(step, k), getattr(synchronous[0], k))
                         for k in StepTime.__dataclass_fields__})
    busy = [np.where(use, a, s) for a, s in zip(busy, synchronous[1], strict=True)]
    return _assemble(mixed, d, parts, chosen, busy, np.where(use, bottleneck, synchronous[2]),
                     eff)


def _synchronous(parts: list[_Pool], d: Degrees) -> tuple[StepTime, list[Array], Array]:
    """The slowest pool's work, then the reduction and the optimizer of the slowest pool at
    them (every replica waits for the reduction)."""
    work = np.stack([np.broadcast_to(p.work_s, d.shape) for p in parts])
    slowest = np.argmax(work, axis=0)

    def pick(values: list[Array]) -> Array:
        stacked = np.stack([np.broadcast_to(v, d.shape) for v in values])
        return np.take_along_axis(stacked, slowest[None, ...], axis=0)[0]

    fields = {k: pick([getattr(p.own, k) for p in parts]) for k in _WORK}
    step = StepTime(**fields, dp_comm_s=np.max(np.stack(
        [np.broadcast_to(p.synced.dp_comm_s, d.shape) for p in parts]), axis=0),
        optimizer_s=np.max(np.stack([np.broadcast_to(p.synced.optimizer_s, d.shape)
                                     for p in parts]), axis=0),
        offload_s=pick([p.synced.offload_s for p in parts]))
    return step, [p.work_s for p in parts], slowest.astype(np.float64)


def _asynchronous(mixed: MixedCluster, parts: list[_Pool], d: Degrees, eff: Efficiency
                  ) -> tuple[StepTime, list[Array], Array]:
    """Each pool's workers cycle through their micro-batches, their own push and pull, and
    the servers' queue; a step is every worker's cycle once, dp / X seconds, of which the
    workers compute on average sum_p X_p C_p / dp."""
    nbytes = parts[0].gradient_bytes
    think, compute = [], []
    for p in parts:
        c = p.cluster
        bw = np.asarray(c.scale_out_bandwidth_bytes_per_s, dtype=np.float64) \
            * eff.network_fraction
        own = 2.0 * nbytes / bw + 2.0 * np.asarray(c.scale_out_latency_s, dtype=np.float64)
        compute.append(p.micro_batches * p.stage.compute_s)
        think.append(compute[-1] + own)
    service = server_service_s(nbytes, d.parameter_servers,
                               server_bw=_server_bandwidth(mixed, eff), eff=eff)
    rates = closed_throughput(think, [p.replicas for p in parts], service)
    total = sum(rates, start=np.float64(0.0))
    step_s = d.dp / total
    busy = [step_s * r * c / np.maximum(p.replicas, 1.0)
            for r, c, p in zip(rates, compute, parts, strict=True)]
    computing = step_s * sum((r * c for r, c in zip(rates, compute, strict=True)),
                             start=np.float64(0.0)) / d.dp
    zero = np.zeros(d.shape)
    step = StepTime(compute_s=computing, recompute_s=zero, tp_comm_s=zero, cp_comm_s=zero,
                    pp_comm_s=zero, pp_bubble_s=zero, dp_comm_s=step_s - computing,
                    optimizer_s=zero, offload_s=zero, launch_s=zero)
    slowest = np.argmax(np.stack([np.broadcast_to(t, d.shape) for t in think]), axis=0)
    saturated = total * service >= _SATURATED
    return step, busy, np.where(saturated, float(SERVERS), slowest.astype(np.float64))


def _server_bandwidth(mixed: MixedCluster, eff: Efficiency) -> Array:
    """The parameter servers' link: the first used pool's `parameter_server_bandwidth`
    (its scale-out bandwidth where unset)."""
    c = mixed.pools[mixed.used[0]]
    given = np.asarray(c.parameter_server_bandwidth_bytes_per_s, dtype=np.float64)
    out = np.asarray(c.scale_out_bandwidth_bytes_per_s, dtype=np.float64)
    return np.where(given > 0, given, out) * eff.network_fraction


def fewer_replicas(parts: list[_Pool], busy: list[Array], d: Degrees) -> list[Array]:
    """Replicas of each pool that do one micro-batch fewer than its count, so that the pools
    do the step's micro-batches and no more: where balanced counts overshoot the batch by
    less than any pool's replicas (trimmed_counts gives back only a micro-batch on every
    replica of a pool), e.g. 13 replicas at 20 for a batch of 256 micro-batches: 4 of them do
    19. They are the busiest pool's that has replicas enough (the step is its other
    replicas' time all the same), none where the counts make the batch exactly."""
    done = sum((p.replicas * p.micro_batches for p in parts), start=np.float64(0.0))
    over = np.broadcast_to(np.maximum(done - d.dp * d.micro_batches, 0.0), d.shape)
    able = np.stack([np.broadcast_to((p.replicas >= over) & (p.micro_batches > 1.0), d.shape)
                     for p in parts])
    load = np.stack([np.where(a, np.broadcast_to(b, d.shape), -np.inf)
                     for a, b in zip(able, busy, strict=True)])
    pick = np.argmax(load, axis=0)
    return [np.where((pick == i) & able[i], over, 0.0) for i in range(len(parts))]


def _assemble(mixed: MixedCluster, d: Degrees, parts: list[_Pool], step: StepTime,
              busy: list[Array], bottleneck: Array, eff: Efficiency) -> MixedStep:
    """The MixedStep: every pool's use (idle ones too), the fullest pool's memory, the fit."""
    usable = [hbm_usable_bytes(p.cluster, eff, gpus=mixed.gpus) for p in parts]
    ratio = np.stack([np.broadcast_to(p.memory.total_bytes / u, d.shape)
                      for p, u in zip(parts, usable, strict=True)])
    fullest = np.argmax(ratio, axis=0)
    fits = np.all(ratio <= 1.0, axis=0) & np.all(np.stack([np.broadcast_to(
        p.memory.expansion_bytes <= np.asarray(p.cluster.expansion_capacity_bytes), d.shape)
        for p in parts]), axis=0)
    memory = MemoryUse(**{k: np.take_along_axis(np.stack([np.broadcast_to(
        getattr(p.memory, k), d.shape) for p in parts]), fullest[None, ...], axis=0)[0]
        for k in MemoryUse.__dataclass_fields__})
    fewer = fewer_replicas(parts, busy, d)
    samples = [p.replicas * p.micro_batches - f for p, f in zip(parts, fewer, strict=True)]
    total = sum(samples, start=np.float64(0.0))
    uses = {i: PoolUse(role=np.ones(d.shape), replicas=np.broadcast_to(p.replicas, d.shape),
                       stages=d.pp, first_stage=np.zeros(d.shape), layers=np.zeros(d.shape),
                       micro_batches=np.broadcast_to(p.micro_batches, d.shape),
                       share=np.broadcast_to(s / total, d.shape),
                       busy_s=np.broadcast_to(b, d.shape),
                       memory_bytes=np.broadcast_to(p.memory.total_bytes, d.shape),
                       usable_bytes=np.full(d.shape, u), fewer=np.broadcast_to(f, d.shape))
            for i, p, s, b, u, f in zip(mixed.used, parts, samples, busy, usable, fewer,
                                        strict=True)}
    pools = tuple(uses.get(i) or PoolUse.idle(d.shape, hbm_usable_bytes(c, eff))
                  for i, c in enumerate(mixed.pools))
    index = np.asarray(mixed.used, dtype=np.float64)
    bottleneck = np.where(bottleneck >= 0, index[np.clip(bottleneck, 0, None).astype(int)],
                          bottleneck)
    return MixedStep(step=step, memory=memory,
                     usable_bytes=np.take_along_axis(np.stack([np.full(d.shape, u)
                                                               for u in usable]),
                                                     fullest[None, ...], axis=0)[0],
                     valid=np.ones(d.shape, dtype=bool), fits=fits, pools=pools,
                     bottleneck=bottleneck)
