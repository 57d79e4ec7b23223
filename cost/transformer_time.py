"""Time of one micro-batch of a transformer's pipeline stage: per-layer kernels, tensor- and
context-parallel traffic, and the logits and loss of the last stage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .attention import attention_shape
from .collectives import all_gather_s, allreduce_s, group_link, reduce_scatter_s
from .degrees import Degrees
from .efficiency import Efficiency
from .flops import attention_core_flops, layer_gemms
from .inputs import Array, ClusterSpec, TrainingSpec, Value
from .kernels import gemm_s, memory_bound_s
from .overlap import exposed_s
from .precision import element_bytes
from .workload import StageCost

if TYPE_CHECKING:
    from .transformer import ModelSpec

__all__ = ["LayerTimes", "StageShape", "layer_times", "logits_s", "stage_cost", "stage_shape"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StageShape:
    """How a plan cuts the transformer: layers of the fullest stage, of the last stage (beside
    the logits), and the tokens of one micro-batch on one GPU (mb · seq / cp)."""

    layers_per_stage: Array
    last_stage_layers: Array
    tokens_per_micro_batch: Array


def stage_shape(model: ModelSpec, d: Degrees) -> StageShape:
    from .transformer import embedding_and_loss_split

    split = embedding_and_loss_split(model.layers, d.pp, d.vs)
    per_stage = (model.layers + 2.0 * split) / d.pp
    return StageShape(layers_per_stage=per_stage, last_stage_layers=per_stage - split,
                      tokens_per_micro_batch=d.mb * model.seq_len / d.cp)


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerTimes:
    """Seconds for one layer and one micro-batch on one GPU, by part."""

    forward_s: Array  # GEMMs, attention core, element-wise work
    backward_s: Array  # data- and weight-gradient GEMMs, attention backward, element-wise work
    attention_forward_s: Array  # attention core and unfused softmax alone
    recompute_s: Array  # forward work redone in the backward pass
    tp_comm_s: Array  # exposed tensor-parallel collectives, forward + backward + recompute
    cp_comm_s: Array  # exposed context-parallel key/value exchange


def layer_times(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                eff: Efficiency, *, shape: StageShape | None = None,
                ffn_hidden: float | None = None) -> LayerTimes:
    """One layer: attention and an MLP of width `ffn_hidden` (default the model's; 0: no
    MLP, as in a mixture-of-experts layer whose experts cost.moe_time adds)."""
    gpu = cluster.gpu
    f = model.ffn_hidden if ffn_hidden is None else ffn_hidden
    peak = gpu.peak_for(training.precision)
    # fp8 recipes keep attention in 16 bits (Transformer Engine); GEMMs use the fp8 rate
    attention_peak = gpu.peak_for("bf16") if training.precision == "fp8" else peak
    hbm = gpu.hbm_bandwidth_bytes_per_s
    act = element_bytes(training.precision)["activation"]
    tokens = (shape or stage_shape(model, d)).tokens_per_micro_batch

    fraction = eff.gemm_fraction_for(gpu)
    gemms: Value = 0.0
    for g in layer_gemms(model, f):
        k, n = g.per_gpu(d.tp)
        gemms = gemms + gemm_s(tokens, k, n, peak_flops_per_s=peak, hbm_bytes_per_s=hbm,
                               element_bytes=act, fraction=fraction, eff=eff)
    attention, attention_backward = _attention_s(model, d, tokens, eff,
                                                 peak_flops_per_s=attention_peak,
                                                 hbm_bytes_per_s=hbm, act_bytes=act)
    elementwise = memory_bound_s(
        act * tokens * (eff.elementwise_passes_hidden * model.hidden / d.shard
                        + eff.elementwise_passes_ffn * f / d.tp),
        hbm_bytes_per_s=hbm, eff=eff)
    forward = gemms + attention + elementwise
    backward = 2.0 * (gemms + elementwise) + attention_backward
    selective = 0.0 if eff.flash_attention else attention  # flash already recomputes scores
    recompute = np.where(d.recompute >= 2, forward, np.where(d.recompute >= 1, selective, 0.0))
    return LayerTimes(forward_s=forward, backward_s=backward, attention_forward_s=attention,
                      recompute_s=recompute,
                      tp_comm_s=_tp_comm_s(model, cluster, d, tokens, eff, act_bytes=act,
                                           gemms_s=gemms, blocks=2.0 if f > 0 else 1.0),
                      cp_comm_s=_cp_comm_s(model, cluster, d, eff, act_bytes=act,
                                           attention_s=attention))


def _tp_comm_s(model: ModelSpec, cluster: ClusterSpec, d: Degrees, tokens: Array,
               eff: Efficiency, *, act_bytes: float, gemms_s: Value, blocks: float) -> Array:
    """Tensor-parallel collectives of one layer: an all-reduce (or, with sequence parallelism,
    a reduce-scatter and an all-gather) of the layer's T·h activations once forward and once
    backward per block (attention, MLP), once more under full recompute. Transformer Engine
    splits the all-gather + GEMM and GEMM + reduce-scatter of sequence parallelism into chunks
    that overlap (userbuffers over NVLink); an all-reduce, or a group that leaves the NVLink
    domain, stays exposed."""
    tp_link = group_link(cluster, stride=1.0, size=d.tp, fraction=eff.network_fraction)
    boundary_bytes = act_bytes * tokens * model.hidden
    one_tp = np.where(
        d.sp > 0,
        2.0 * reduce_scatter_s(boundary_bytes, d.tp, tp_link.bandwidth_bytes_per_s,
                               tp_link.latency_s),
        allreduce_s(boundary_bytes, d.tp, tp_link.bandwidth_bytes_per_s, tp_link.latency_s))
    passes = blocks * (2.0 + np.where(d.recompute >= 2, 1.0, 0.0))  # fwd, bwd (+ fwd again)
    overlappable = (d.sp > 0) & (d.tp <= np.asarray(cluster.scale_up_domain_gpus))
    gemm_passes = 3.0 + np.where(d.recompute >= 2, 1.0, 0.0)
    return exposed_s(passes * one_tp, gemm_passes * gemms_s, slowdown=eff.overlap_slowdown,
                     hideable=np.where(overlappable, eff.tp_overlap, 0.0))


def _cp_comm_s(model: ModelSpec, cluster: ClusterSpec, d: Degrees, eff: Efficiency, *,
               act_bytes: float, attention_s: Array) -> Array:
    """Context parallelism all-gathers the keys and values of the sequence (forward; backward
    again, and reduce-scatters their gradients), each hidden behind the attention it feeds
    (ring attention, Liu et al. 2023; Megatron-Core's CP)."""
    cp_link = group_link(cluster, stride=d.tp, size=d.cp, fraction=eff.network_fraction)
    a = attention_shape(model)
    kv_bytes = act_bytes * d.mb * model.seq_len * (a.k_width + a.v_width) / d.tp
    gather = all_gather_s(kv_bytes, d.cp, cp_link.bandwidth_bytes_per_s, cp_link.latency_s)
    cp_passes = 3.0 + np.where(d.recompute >= 1, 1.0, 0.0)  # fwd, bwd gather + grad scatter
    return cp_passes * exposed_s(gather, attention_s, slowdown=0.0)


def _attention_s(
    model: ModelSpec, d: Degrees, tokens: Array, eff: Efficiency, *, peak_flops_per_s: float,
    hbm_bytes_per_s: float, act_bytes: float,
) -> tuple[Array, Array]:
    """Forward and backward seconds of the attention core of one layer and micro-batch.

    Flash attention (Dao et al. 2022) skips the masked half of causal scores and keeps them out
    of HBM; its backward recomputes QK^T: 2.5 x the forward's matmuls. Unfused attention
    computes all s x s scores and streams them through HBM `softmax_passes` times; backward 2x."""
    core = attention_core_flops(model, tokens, model.seq_len) / d.tp
    rate = peak_flops_per_s * eff.attention_fraction
    if eff.flash_attention:
        forward = 0.5 * core / rate
        return forward, 2.5 * forward
    scores = act_bytes * d.mb * model.heads / d.tp * (model.seq_len / d.cp) * model.seq_len
    forward = core / rate + memory_bound_s(eff.softmax_passes * scores,
                                           hbm_bytes_per_s=hbm_bytes_per_s, eff=eff)
    return forward, 2.0 * forward


def logits_s(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, tokens: Array,
              d: Degrees, eff: Efficiency) -> Array:
    """Logits GEMM (vocabulary-parallel) forward and backward, and the fp32 cross-entropy."""
    gpu = cluster.gpu
    act = element_bytes(training.precision)["activation"]
    gemm = gemm_s(tokens, float(model.hidden), model.vocab / d.tp,
                  peak_flops_per_s=gpu.peak_for(training.precision),
                  hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s, element_bytes=act,
                  fraction=eff.gemm_fraction_for(gpu), eff=eff)
    loss = memory_bound_s(16.0 * tokens * model.vocab / d.tp,
                          hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s, eff=eff)
    return 3.0 * gemm + loss


def stage_cost(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
               eff: Efficiency) -> StageCost:
    """One micro-batch on the slowest stage: the last (its layers plus the logits), or a
    middle one where the last gave a layer to the loss (cost.transformer's
    embedding_and_loss_split) and the logits take less time than that layer."""
    shape = stage_shape(model, d)
    layer = layer_times(model, cluster, training, d, eff, shape=shape)
    logits = logits_s(model, cluster, training, shape.tokens_per_micro_batch, d, eff)
    per_layer = (layer.forward_s + layer.backward_s + layer.recompute_s + layer.tp_comm_s
                 + layer.cp_comm_s)
    last_slower = ((shape.last_stage_layers * per_layer + logits)
                   >= shape.layers_per_stage * per_layer)
    layers = np.where(last_slower, shape.last_stage_layers, shape.layers_per_stage)
    logits = np.where(last_slower, logits, 0.0)
    act = element_bytes(training.precision)["activation"]
    return StageCost(
        compute_s=layers * (layer.forward_s + layer.backward_s) + logits,
        recompute_s=layers * layer.recompute_s, tp_comm_s=layers * layer.tp_comm_s,
        cp_comm_s=layers * layer.cp_comm_s,
        forward_s=layers * layer.forward_s, backward_s=layers * layer.backward_s,
        bubble_unit_s=layers * per_layer + logits / d.pp,
        send_bytes=act * shape.tokens_per_micro_batch * model.hidden / d.tp)
