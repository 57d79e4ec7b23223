"""Time of one optimizer step: per-layer kernels, exposed communication, pipeline schedule."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .breakdown import StepTime
from .collectives import all_gather_s, allreduce_s, group_link, p2p_s, reduce_scatter_s
from .efficiency import Efficiency
from .flops import attention_core_flops, layer_gemms
from .inputs import Array, ClusterSpec, ModelSpec, TrainingSpec, Value
from .kernels import gemm_s, memory_bound_s
from .memory import stage_parameters
from .resolved import Resolved, element_bytes
from .sync import gradient_sync_s

__all__ = ["LayerTimes", "layer_times", "pipeline_bubble_s", "step_time"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerTimes:
    """Seconds for one layer and one micro-batch on one GPU, by part."""

    forward: Array  # GEMMs, attention core, element-wise work
    backward: Array  # data- and weight-gradient GEMMs, attention backward, element-wise work
    attention_forward: Array  # attention core and unfused softmax alone
    recompute: Array  # forward work redone in the backward pass
    tp_comm: Array  # exposed tensor-parallel collectives, forward + backward + recompute
    cp_comm: Array  # exposed context-parallel key/value exchange


def layer_times(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, r: Resolved, eff: Efficiency
) -> LayerTimes:
    gpu = cluster.gpu
    peak = gpu.peak_for(training.precision)
    # fp8 recipes keep attention in 16 bits (Transformer Engine); GEMMs use the fp8 rate
    attention_peak = gpu.peak_for("bf16") if training.precision == "fp8" else peak
    hbm = gpu.hbm_bandwidth_bytes_per_s
    act = element_bytes(training.precision)["activation"]
    tokens = r.tokens_per_micro_batch

    fraction = eff.gemm_fraction_for(gpu)
    gemms: Value = 0.0
    for g in layer_gemms(model):
        k = g.k / r.tp if g.tp_sharded_k else g.k
        n = g.n if g.tp_sharded_k else g.n / r.tp
        gemms = gemms + gemm_s(tokens, k, n, peak_flops_per_s=peak, hbm_bytes_per_s=hbm,
                               element_bytes=act, fraction=fraction, eff=eff)
    attention, attention_backward = _attention_s(model, r, eff, peak_flops_per_s=attention_peak,
                                                 hbm_bytes_per_s=hbm, act_bytes=act)
    elementwise = memory_bound_s(
        act * tokens * (eff.elementwise_passes_hidden * model.hidden / r.shard
                        + eff.elementwise_passes_ffn * model.ffn_hidden / r.tp),
        hbm_bytes_per_s=hbm, eff=eff)
    forward = gemms + attention + elementwise
    backward = 2.0 * (gemms + elementwise) + attention_backward
    selective = 0.0 if eff.flash_attention else attention  # flash already recomputes scores
    recompute = np.where(r.recompute >= 2, forward, np.where(r.recompute >= 1, selective, 0.0))

    tp_link = group_link(cluster, stride=1.0, size=r.tp, fraction=eff.network_fraction)
    boundary_bytes = act * tokens * model.hidden
    one_tp = np.where(
        r.sp > 0,
        2.0 * reduce_scatter_s(boundary_bytes, r.tp, tp_link.bandwidth_bytes_per_s,
                               tp_link.latency_s),
        allreduce_s(boundary_bytes, r.tp, tp_link.bandwidth_bytes_per_s, tp_link.latency_s))
    passes = 4.0 + np.where(r.recompute >= 2, 2.0, 0.0)  # 2 fwd + 2 bwd (+ 2 fwd again)
    # Transformer Engine splits the all-gather + GEMM and GEMM + reduce-scatter of sequence
    # parallelism into chunks that overlap (userbuffers over NVLink); an all-reduce or a
    # group that leaves the NVLink domain stays exposed. Hidden traffic still takes SMs.
    overlappable = (r.sp > 0) & (r.tp <= np.asarray(cluster.scale_up_domain_gpus))
    comm = passes * one_tp
    gemm_passes = 3.0 + np.where(r.recompute >= 2, 1.0, 0.0)
    hidden = np.minimum(np.where(overlappable, eff.tp_overlap, 0.0) * comm, gemm_passes * gemms)
    tp_comm = comm - hidden + eff.overlap_slowdown * hidden

    cp_link = group_link(cluster, stride=r.tp, size=r.cp, fraction=eff.network_fraction)
    kv_bytes = 2.0 * act * r.mb * model.seq_len * model.kv_hidden / r.tp
    gather = all_gather_s(kv_bytes, r.cp, cp_link.bandwidth_bytes_per_s, cp_link.latency_s)
    cp_passes = 3.0 + np.where(r.recompute >= 1, 1.0, 0.0)  # fwd, bwd gather + grad scatter
    cp_comm = cp_passes * np.maximum(gather - attention, 0.0)
    return LayerTimes(forward=forward, backward=backward, attention_forward=attention,
                      recompute=recompute, tp_comm=tp_comm, cp_comm=cp_comm)


def _attention_s(
    model: ModelSpec, r: Resolved, eff: Efficiency, *, peak_flops_per_s: float,
    hbm_bytes_per_s: float, act_bytes: float,
) -> tuple[Array, Array]:
    """Forward and backward seconds of the attention core of one layer and micro-batch.

    Flash attention (Dao et al. 2022) skips the masked half of causal scores and keeps them out
    of HBM; its backward recomputes QK^T: 2.5 x the forward's matmuls. Unfused attention
    computes all s x s scores and streams them through HBM `softmax_passes` times; backward 2x."""
    core = attention_core_flops(model, r.tokens_per_micro_batch, model.seq_len) / r.tp
    rate = peak_flops_per_s * eff.attention_fraction
    if eff.flash_attention:
        forward = 0.5 * core / rate
        return forward, 2.5 * forward
    scores = act_bytes * r.mb * model.heads / r.tp * (model.seq_len / r.cp) * model.seq_len
    forward = core / rate + memory_bound_s(eff.softmax_passes * scores,
                                           hbm_bytes_per_s=hbm_bytes_per_s, eff=eff)
    return forward, 2.0 * forward


def pipeline_bubble_s(stages: Array, virtual_stages: Array, micro_batch_s: Array) -> Array:
    """Idle time per step of one stage under (interleaved) 1F1B:
    (p - 1) / v x t_mb (Narayanan et al., SC'21, sec. 2.2)."""
    return (stages - 1.0) / virtual_stages * micro_batch_s


def step_time(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, r: Resolved, eff: Efficiency
) -> StepTime:
    """One optimizer step on the slowest stage: the last (its layers plus the logits), or a
    middle one where the last gave a layer to the loss (cost.resolved.embedding_and_loss_split)
    and the logits take less time than that layer."""
    layer = layer_times(model, cluster, training, r, eff)
    logits = _logits_s(model, cluster, training, r, eff)
    per_layer = (layer.forward + layer.backward + layer.recompute + layer.tp_comm
                 + layer.cp_comm)
    last_slower = (r.last_stage_layers * per_layer + logits) >= r.layers_per_stage * per_layer
    m = r.micro_batches
    layers = np.where(last_slower, r.last_stage_layers, r.layers_per_stage)
    logits = np.where(last_slower, logits, 0.0)
    per_micro_batch = layers * per_layer
    compute_mb = layers * (layer.forward + layer.backward) + logits
    bubble = pipeline_bubble_s(r.pp, r.vs, per_micro_batch + logits / r.pp)
    dp_comm = _dp_comm_s(model, cluster, training, r, eff,
                         forward_s=layers * layer.forward, backward_s=layers * layer.backward)
    optimizer, offload = _optimizer_and_offload_s(model, cluster, training, r, eff,
                                                  micro_batch_s=compute_mb)
    return StepTime(
        compute=m * compute_mb, recompute=m * layers * layer.recompute,
        tp_comm=m * layers * layer.tp_comm, cp_comm=m * layers * layer.cp_comm,
        pp_comm=_pp_comm_s(model, cluster, training, r, eff), pp_bubble=bubble,
        dp_comm=dp_comm, optimizer=optimizer, offload=offload,
    )


def _logits_s(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, r: Resolved, eff: Efficiency
) -> Array:
    """Logits GEMM (vocabulary-parallel) forward and backward, and the fp32 cross-entropy."""
    gpu = cluster.gpu
    act = element_bytes(training.precision)["activation"]
    tokens = r.tokens_per_micro_batch
    gemm = gemm_s(tokens, float(model.hidden), model.vocab / r.tp,
                  peak_flops_per_s=gpu.peak_for(training.precision),
                  hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s, element_bytes=act,
                  fraction=eff.gemm_fraction_for(gpu), eff=eff)
    loss = memory_bound_s(16.0 * tokens * model.vocab / r.tp,
                          hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s, eff=eff)
    return 3.0 * gemm + loss


def _pp_comm_s(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, r: Resolved, eff: Efficiency
) -> Array:
    """Activation and gradient sends between stages: 2 per micro-batch and chunk plus the
    fill, each T·h/tp elements (scatter-gather, Narayanan et al. SC'21, sec. 4.1)."""
    act = element_bytes(training.precision)["activation"]
    link = group_link(cluster, stride=r.tp * r.cp * r.dp, size=r.pp,
                      fraction=eff.network_fraction)
    send = p2p_s(act * r.tokens_per_micro_batch * model.hidden / r.tp,
                 link.bandwidth_bytes_per_s, link.latency_s)
    sends = 2.0 * (r.micro_batches * r.vs + r.pp - 1.0)
    return np.where(r.pp > 1, sends * send, 0.0)


def _dp_comm_s(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, r: Resolved, eff: Efficiency,
    *, forward_s: Array, backward_s: Array,
) -> Array:
    """Exposed gradient reduction over the dp·cp replicas of each weight.

    ZeRO 0: one all-reduce per step by the plan's `sync` algorithm (cost.sync); 1:
    reduce-scatter of gradients and all-gather of weights per step (Megatron's distributed
    optimizer); 2: the reduce-scatter every micro-batch;
    3: also two weight all-gathers every micro-batch (Rajbhandari et al. SC'20, sec. 7).
    Bucketed reductions hide behind `dp_overlap` of the backward pass they follow (per step:
    the last micro-batch's), weight gathers behind that share of the forward pass they precede;
    hidden traffic still slows the compute it overlaps by `overlap_slowdown` of its time."""
    sizes = element_bytes(training.precision)
    params = stage_parameters(model, r)
    link = group_link(cluster, stride=r.tp, size=r.dp * r.cp, fraction=eff.network_fraction)
    n, bw, lat = r.dp * r.cp, link.bandwidth_bytes_per_s, link.latency_s
    scatter = reduce_scatter_s(params * sizes["gradient"], n, bw, lat)
    gather = all_gather_s(params * sizes["weight"], n, bw, lat)
    allreduce = gradient_sync_s(params * sizes["gradient"], n=n, stride=r.tp, cluster=cluster,
                                sync=r.sync, servers=r.parameter_servers, eff=eff)

    def hidden(comm: Array, window: Array) -> Array:
        covered = np.minimum(comm, eff.dp_overlap * window)
        return comm - covered + eff.overlap_slowdown * covered

    per_step = np.where(r.zero >= 1, hidden(scatter, backward_s) + hidden(gather, forward_s),
                        hidden(allreduce, backward_s))
    per_step = np.where(r.zero >= 2, hidden(gather, forward_s), per_step)
    per_step = np.where(r.zero >= 3, 0.0, per_step)  # the next forward gathers anyway
    per_mb_traffic = (np.where(r.zero >= 3, 2.0 * gather, 0.0)
                      + np.where(r.zero >= 2, scatter, 0.0))
    window = np.where(r.zero >= 3, forward_s + backward_s, backward_s)
    per_mb = hidden(per_mb_traffic, window)
    return per_step + r.micro_batches * per_mb


def _optimizer_and_offload_s(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, r: Resolved, eff: Efficiency,
    *, micro_batch_s: Array,
) -> tuple[Array, Array]:
    """Adam on the local shard, memory-bound in HBM; offloaded, its state streams over the
    expansion link (read and write, with gradients in and weights out: ZeRO-Offload); offloaded
    weights stream in twice per micro-batch, prefetched behind its compute (ZeRO-Infinity)."""
    sizes = element_bytes(training.precision)
    params = stage_parameters(model, r)
    local = params / np.where(r.zero >= 1, r.dp * r.cp, 1.0)
    in_hbm = memory_bound_s(local * eff.optimizer_bytes_per_param,
                            hbm_bytes_per_s=cluster.gpu.hbm_bandwidth_bytes_per_s, eff=eff)
    link_bw = np.maximum(np.asarray(cluster.expansion_bandwidth_bytes_per_s, dtype=float), 1.0)
    state_bytes = local * (2.0 * sizes["optimizer"] + sizes["gradient"] + sizes["weight"])
    weight_bytes = params * sizes["weight"] / np.where(r.zero >= 3, r.dp * r.cp, 1.0)
    stream = np.maximum(2.0 * weight_bytes / link_bw - micro_batch_s, 0.0) * r.micro_batches
    optimizer = np.where(r.offload >= 1, 0.0, in_hbm)
    offload = np.where(r.offload >= 1, state_bytes / link_bw, 0.0)
    return optimizer, offload + np.where(r.offload >= 2, stream, 0.0)
