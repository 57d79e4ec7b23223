"""One optimizer step of any workload: its micro-batches on the slowest pipeline stage, the
pipeline bubble and sends, the data-parallel reduction by ZeRO stage and sync algorithm, the
optimizer and offload traffic (cost.workload says what a micro-batch costs)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .breakdown import StepTime
from .collectives import (
    Link,
    all_gather_s,
    allreduce_s,
    group_link,
    inside_domain,
    p2p_s,
    reduce_scatter_s,
)
from .degrees import Degrees
from .efficiency import Efficiency
from .inputs import Array, ClusterSpec, Value
from .kernels import memory_bound_s
from .overlap import exposed_s
from .sync import asynchronous_parameter_server_s, gradient_sync_s
from .workload import Footprint, StageCost, Workload

__all__ = ["dp_buckets", "forward_share", "launch_bound_s", "nic_free", "pipeline_bubble_s",
           "step_time"]

PARAMETER_SERVER = 4.0
"""The code of `sync: parameter_server` (cost.codec.Sync)."""


def pipeline_bubble_s(stages: Array, virtual_stages: Array, micro_batch_s: Array) -> Array:
    """Idle time per step of one stage under (interleaved) 1F1B:
    (p - 1) / v x t_mb (Narayanan et al., SC'21, sec. 2.2)."""
    return (stages - 1.0) / virtual_stages * micro_batch_s


def step_time(workload: Workload, cluster: ClusterSpec, stage: StageCost, held: Footprint,
              d: Degrees, eff: Efficiency) -> StepTime:
    """The micro-batches of a step on the slowest stage, its bubble and sends, and what the
    data-parallel replicas and the optimizer add."""
    m = d.micro_batches
    launch = launch_bound_s(stage)
    bubble = pipeline_bubble_s(d.pp, d.vs, stage.bubble_unit_s + launch)
    dp_comm = _dp_comm_s(cluster, held, stage, d, eff, idle_s=bubble, waiting_s=launch)
    if workload.asynchronous_parameter_servers:
        pushed = sum((g.params * held.state.gradient for g in held.groups), start=np.float64(0))
        servers = asynchronous_parameter_server_s(pushed, d, cluster, eff,
                                                  compute_s=m * stage.compute_s)
        dp_comm = np.where(d.sync == PARAMETER_SERVER, servers, dp_comm)
    optimizer, offload = _optimizer_and_offload_s(cluster, held, d, eff,
                                                  micro_batch_s=stage.compute_s)
    if workload.asynchronous_parameter_servers:  # the servers apply the update
        optimizer = np.where(d.sync == PARAMETER_SERVER, 0.0, optimizer)
    return StepTime(
        compute_s=m * stage.compute_s, recompute_s=m * stage.recompute_s,
        tp_comm_s=m * stage.tp_comm_s, cp_comm_s=m * stage.cp_comm_s,
        pp_comm_s=_pp_comm_s(cluster, stage, d, eff),
        pp_bubble_s=bubble,
        dp_comm_s=dp_comm, optimizer_s=optimizer, offload_s=offload, launch_s=m * launch,
        ep_comm_s=m * stage.ep_comm_s)


def launch_bound_s(stage: StageCost) -> Array:
    """Seconds a micro-batch waits for the host: kernels are launched asynchronously, so the
    GPU idles only where launching them takes longer than running them (small micro-batches,
    eager frameworks, recompute's extra host work): max(host - device, 0). Where the host
    stops to read a result of the GPU (stage.host_wait_s: dropless routing's token counts, the
    sum over the segments between such reads of max(launching - running, 0)), it cannot run
    ahead past the read, so the GPU idles at least that long: max(host - device, host_wait).
    The two are not added: where the host is the slower all along, its excess over the device
    already holds each segment's (a faster GPU then waits longer for the same host, never
    less; adding them counted those waits twice and made a faster GPU's step longer)."""
    device = (stage.compute_s + stage.recompute_s + stage.tp_comm_s + stage.cp_comm_s
              + stage.ep_comm_s)
    return np.maximum(stage.host_s - device, stage.host_wait_s)


def _pp_comm_s(cluster: ClusterSpec, stage: StageCost, d: Degrees, eff: Efficiency) -> Array:
    """Activation and gradient sends between stages: 2 per micro-batch and chunk plus the
    fill (scatter-gather, Narayanan et al. SC'21, sec. 4.1), over the link between stages."""
    link = group_link(cluster, stride=d.tp * d.cp * d.dp, size=d.pp,
                      fraction=eff.network_fraction)
    send = p2p_s(stage.send_bytes, link.bandwidth_bytes_per_s, link.latency_s)
    sends = 2.0 * (d.micro_batches * d.vs + d.pp - 1.0)
    return np.where(d.pp > 1, sends * send, 0.0)


def _dp_comm_s(cluster: ClusterSpec, held: Footprint, stage: StageCost, d: Degrees,
               eff: Efficiency, *, idle_s: Array, waiting_s: Array) -> Array:
    """Exposed gradient reduction of each parameter group over its replicas.

    ZeRO 0: an all-reduce per step by the plan's `sync` algorithm (cost.sync); 1:
    reduce-scatter of gradients and all-gather of weights per step (Megatron's distributed
    optimizer); 2: the reduce-scatter every micro-batch. Each of these runs bucket by bucket
    (dp_buckets), one collective per bucket, so its ring latency is paid per bucket: at
    hundreds of ranks a ring's n - 1 steps of a few microseconds each outweigh a small
    bucket's bytes. 3 (FSDP): every layer's weights
    gathered before its forward and again before its backward, its gradients reduce-scattered
    after it (Rajbhandari et al. SC'20, sec. 7; Zhao et al., VLDB'23, sec. 3), each
    prefetched behind the previous layer's compute, so the exposed time is per layer and the
    ring's latency is paid per layer. With hybrid sharding the shards reduce their gradient
    shard across the shard groups once per step. Bucketed reductions hide behind `dp_overlap`
    of the pass next to them (cost.overlap); the once-per-step ones also run while the stage
    idles in the pipeline's fill and drain (`idle_s`, the bubble: as each model chunk finishes
    its last backward its gradient buckets reduce while the later stages drain, and the
    parameters gather for the next step while they fill). The bubble is the fill and the drain
    together, not each: of 1F1B's (p - 1) / v idle slots a stage waits for forwards in the
    fill and for backwards in the drain, so the fill is the forward's share of the bubble
    (the last stage's exactly) and only it hides gathers, the drain the rest and only it hides
    reductions. A ring that crosses the NICs also
    runs while the stage's exposed model-parallel traffic stays inside its scale-up domain
    (nic_free). Where the GPU waits for the host to launch its kernels (`waiting_s`, a
    micro-batch's launch_bound_s) the collectives already queued on their own stream keep
    running: the wait widens the pass it falls in, shared between them as the bubble is (a
    faster GPU that only waits longer for the same host hides no less)."""
    total: Array = np.float64(0.0)
    share = forward_share(stage)
    fill, drain = idle_s * share, idle_s * (1.0 - share)
    passes = (stage.forward_s + waiting_s * share,
              stage.backward_s + waiting_s * (1.0 - share))  # a micro-batch's, waits included
    for group in held.groups:
        shard = group.shard_ranks
        inside = group_link(cluster, stride=group.stride, size=shard,
                            fraction=eff.network_fraction)
        across = group_link(cluster, stride=group.stride * shard, size=group.replicas / shard,
                            fraction=eff.network_fraction)

        def ring(kind: Callable[..., Array], nbytes: Array, link: Link = inside,
                 ranks: Array = shard, calls: Array | float = 1.0) -> Array:
            return kind(nbytes, ranks, link.bandwidth_bytes_per_s, link.latency_s * calls)

        def hidden(comm: Array, window: Array) -> Array:
            return exposed_s(comm, window, slowdown=eff.overlap_slowdown,
                             window_share=eff.dp_overlap)

        grads, weights = group.params * held.state.gradient, group.params * held.state.weight
        buckets = dp_buckets(group.params, d, eff)
        last = last_bucket_share(group.params, d, eff)
        scatter = ring(reduce_scatter_s, grads, calls=buckets)
        gather = ring(all_gather_s, weights, calls=buckets)
        replicas = ring(allreduce_s, grads / shard, across, group.replicas / shard)
        allreduce = gradient_sync_s(grads, n=group.replicas, stride=group.stride,
                                    cluster=cluster, sync=d.sync, servers=d.parameter_servers,
                                    eff=eff, calls=buckets)
        # the bucket whose gradients are ready last (the first layers') reduces after the
        # backward, and the one the first layers need gathers before the forward
        last_scatter = ring(reduce_scatter_s, grads * last)
        first_gather = ring(all_gather_s, weights * last)
        last_allreduce = gradient_sync_s(grads * last, n=group.replicas, stride=group.stride,
                                         cluster=cluster, sync=d.sync,
                                         servers=d.parameter_servers, eff=eff)

        def bucketed(comm: Array, alone: Array, window: Array) -> Array:
            """A bucketed collective beside its pass: all buckets but `alone` hide behind
            the window, `alone` (the last to be ready, or the first to be needed) runs
            outside it."""
            alone = np.minimum(alone, comm)
            return hidden(comm - alone, window) + alone
        # the windows of each ring: the pass, the bubble, and where the ring crosses the NICs
        # the model-parallel traffic that does not (nic_free)
        sharded = nic_free(cluster, stage, stride=group.stride, size=shard)
        replicated = nic_free(cluster, stage, stride=group.stride * shard,
                              size=group.replicas / shard)
        whole = nic_free(cluster, stage, stride=group.stride, size=group.replicas)
        backward, forward = passes[1] + drain, passes[0] + fill
        gathered = bucketed(gather, first_gather, forward + sharded[0])
        per_step = np.where(d.zero >= 1,
                            bucketed(scatter + replicas, last_scatter, backward + sharded[1])
                            + gathered,
                            bucketed(allreduce, last_allreduce, backward + whole[1]))
        per_step = np.where(d.zero >= 2, gathered + hidden(replicas, backward + replicated[1]),
                            per_step)
        per_mb = np.where(d.zero >= 2, hidden(scatter, passes[1] + sharded[1]), 0.0)
        per_step = np.where(d.zero >= 3, hidden(replicas, backward + replicated[1]), per_step)
        per_mb = np.where(d.zero >= 3, _fsdp_layers_s(ring, grads, weights, stage, hidden,
                                                      nic_free=sharded, passes=passes),
                          per_mb)
        total = total + per_step + d.micro_batches * per_mb
    return total


def forward_share(stage: StageCost) -> Array:
    """The forward's share of a micro-batch's passes (its backward with recompute the rest):
    of the pipeline's bubble, the part a stage waits in the fill for forwards (1F1B: the last
    stage waits (p - 1) / v forwards before its first and (p - 1) / v backwards after its
    last); one half where the stage computes nothing."""
    forward = np.asarray(stage.forward_s, dtype=np.float64)
    busy = forward + stage.backward_s + stage.recompute_s
    return np.where(busy > 0.0, forward / np.where(busy > 0.0, busy, 1.0), 0.5)


def dp_buckets(params: Value, d: Degrees, eff: Efficiency) -> Array:
    """Collectives one step reduces `params` parameters (one GPU's share of a replica group)
    in, each paying the ring's latency once: one per gradient bucket. Megatron-Core's default
    bucket holds max(4e7, 1e6 x dp x cp) parameters, so that a rank's chunk of a ring step
    stays near 1e6 parameters (Efficiency.dp_bucket_params sets another size; 0, one
    collective per model chunk). Megatron buckets only the first model chunk of the first
    pipeline stage, whose reduction ends the step; every other chunk of an interleaved
    schedule is one collective ("disable_bucketing" for model chunks after the first,
    DistributedDataParallel). The first stage's count is taken, the one the step waits for:
    ceil(params / vs / bucket) + vs - 1."""
    _, first = _first_chunk_buckets(params, d, eff)
    return first + np.maximum(d.vs, 1.0) - 1.0


def _first_chunk_buckets(params: Value, d: Degrees, eff: Efficiency) -> tuple[Array, Array]:
    """The first model chunk's parameters and the buckets they reduce in (dp_buckets)."""
    size = (np.maximum(4.0e7, 1.0e6 * d.dp * d.cp) if eff.dp_bucket_params is None
            else np.float64(eff.dp_bucket_params))
    chunk = np.asarray(params, dtype=np.float64) / np.maximum(d.vs, 1.0)
    first = np.where(size > 0, np.ceil(chunk / np.maximum(size, 1.0)), 1.0)
    return chunk, np.maximum(first, 1.0)


def last_bucket_share(params: Value, d: Degrees, eff: Efficiency) -> Array:
    """The share of `params` in the bucket that reduces last: the first model chunk's last
    bucket (dp_buckets), whose gradients (the first layers', backward's last) are ready only
    when the backward ends, so that its reduction follows the backward and is not hidden
    behind it; likewise its weights are gathered before the forward's first layer can run
    (Megatron-Core's DistributedDataParallel with overlap_grad_reduce and
    overlap_param_gather: buckets launch as their gradients are ready, in reverse order of the
    parameters, and the forward waits for each bucket's gather at its first parameter). The
    bucket size, or the chunk where smaller (the remainder is not tracked: the mean of the
    chunk's buckets). Megatron-Core's bucket size for every workload, as dp_buckets; other
    data-parallel software buckets otherwise (PyTorch DDP: 25 MiB, bucket_cap_mb), which
    `stack.dp_bucket_params` states."""
    chunk, buckets = _first_chunk_buckets(params, d, eff)
    return chunk / buckets / np.maximum(np.asarray(params, dtype=np.float64), 1.0)


def nic_free(cluster: ClusterSpec, stage: StageCost, *, stride: Value, size: Value
             ) -> tuple[Array, Array]:
    """Seconds per micro-batch, forward and backward (with its recompute), that a
    data-parallel ring of `size` ranks spaced `stride` apart runs beside the stage's exposed
    model-parallel traffic as well as beside its compute: the tp/cp/ep collectives whose
    groups stay inside a scale-up domain (StageCost.scale_up_forward_s, _backward_s) leave the
    NICs idle, so a ring that crosses them keeps flowing; a ring inside the domain shares
    NVLink with that traffic and gains nothing, nor does a ring beside model-parallel
    traffic that itself crosses the NICs (it is not counted in scale_up_*). The frameworks
    issue the data-parallel collectives on their own CUDA stream and NCCL communicator, so
    they run concurrently with the model-parallel ones: PyTorch FSDP issues the all-gathers
    and reduce-scatters on separate streams and prefetches the next layer's (Zhao et al.,
    VLDB'23, sec. 3.4, fig. 5); Megatron-FSDP overlaps them with the whole forward and
    backward and needs CUDA_DEVICE_MAX_CONNECTIONS unset "to ensure full parallelization of
    FSDP communication and computation" (Megatron-LM docs/discussions/megatron-fsdp-user-guide,
    which notes that this may slow tp and cp collectives: they run side by side)."""
    crosses = ~inside_domain(cluster, stride=stride, size=size)
    return (np.where(crosses, stage.scale_up_forward_s, 0.0),
            np.where(crosses, stage.scale_up_backward_s, 0.0))


def _fsdp_layers_s(ring: Callable[..., Array], grads: Array, weights: Array, stage: StageCost,
                   hidden: Callable[[Array, Array], Array], *,
                   nic_free: tuple[Array, Array], passes: tuple[Array, Array]) -> Array:
    """ZeRO-3 traffic of one micro-batch, layer by layer: each of the stage's `units` layers
    gathers its weights before its forward and its backward (the backward's gather also
    serves full recompute) and reduce-scatters its gradients, each behind the neighbouring
    layer's compute and, where the ring crosses the NICs, its model-parallel traffic that
    does not (`nic_free`, forward and backward seconds of the stage); `passes`: the stage's
    forward and backward with the host waits they hold (_dp_comm_s)."""
    units = np.maximum(stage.units, 1.0)
    gather = ring(all_gather_s, weights / units)
    scatter = ring(reduce_scatter_s, grads / units)
    forward = hidden(gather, (passes[0] + nic_free[0]) / units)
    backward = hidden(gather + scatter, (passes[1] + stage.recompute_s + nic_free[1]) / units)
    return units * (forward + backward)


def _optimizer_and_offload_s(cluster: ClusterSpec, held: Footprint, d: Degrees,
                             eff: Efficiency, *, micro_batch_s: Array) -> tuple[Array, Array]:
    """Adam on the local shard, memory-bound in HBM; offloaded, its state streams over the
    expansion link (read and write, with gradients in and weights out: ZeRO-Offload); offloaded
    weights stream in twice per micro-batch, prefetched behind its compute (ZeRO-Infinity).
    A cluster without an expansion tier has no link to offload over: such a plan never
    finishes a step (inf seconds; it is infeasible, cost.memory says why)."""
    state = held.state
    link_bw = np.asarray(cluster.expansion_bandwidth_bytes_per_s, dtype=float)
    in_hbm: Array = np.float64(0.0)
    state_bytes: Array = np.float64(0.0)
    weight_bytes: Array = np.float64(0.0)
    for group in held.groups:
        local = group.params / np.where(d.zero >= 1, group.shard_ranks, 1.0)
        in_hbm = in_hbm + memory_bound_s(local * eff.optimizer_bytes_per_param,
                                         hbm_bytes_per_s=cluster.gpu.hbm_bandwidth_bytes_per_s,
                                         eff=eff)
        state_bytes = state_bytes + local * (2.0 * state.optimizer + state.gradient
                                             + state.weight)
        weight_bytes = weight_bytes + group.params * state.weight / np.where(
            d.zero >= 3, group.shard_ranks, 1.0)
    with np.errstate(divide="ignore"):  # no link: inf seconds
        stream = np.maximum(2.0 * weight_bytes / link_bw - micro_batch_s, 0.0) * d.micro_batches
        moved = state_bytes / link_bw
    optimizer = np.where(d.offload >= 1, 0.0, in_hbm)
    offload = np.where(d.offload >= 1, moved, 0.0)
    return optimizer, offload + np.where(d.offload >= 2, stream, 0.0)
