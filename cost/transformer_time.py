"""Time of one micro-batch of a transformer's pipeline stage: per-layer kernels, tensor- and
context-parallel traffic, and the logits and loss of the last stage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .attention import attention_shape
from .collectives import (
    all_gather_s,
    allreduce_s,
    group_link,
    inside_domain,
    p2p_s,
    reduce_scatter_s,
)
from .degrees import Degrees
from .efficiency import Efficiency
from .errors import named
from .flops import attention_core_flops, layer_gemms, layer_parameters
from .inputs import Array, ClusterSpec, TrainingSpec, Value
from .kernels import gemm_s, memory_bound_s
from .overlap import exposed_s
from .precision import element_bytes, gemm_input_bytes
from .software import kernel_style, streamed_logits_bytes
from .workload import StageCost

if TYPE_CHECKING:
    from .transformer import ModelSpec

__all__ = ["LayerTimes", "StageShape", "exponential_bound", "layer_times", "logits_s", "stage_cost",
           "stage_shape"]


@dataclass(frozen=True, eq=False, slots=True, kw_only=True)
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


@dataclass(frozen=True, eq=False, slots=True, kw_only=True)
class LayerTimes:
    """Seconds for one layer and one micro-batch on one GPU, by part."""

    forward_s: Array  # GEMMs, attention core, element-wise work
    backward_s: Array  # data- and weight-gradient GEMMs, attention backward, element-wise work
    attention_forward_s: Array  # attention core and unfused softmax alone
    recompute_s: Array  # forward work redone in the backward pass
    tp_comm_s: Array  # exposed tensor-parallel collectives, forward + backward + recompute
    cp_comm_s: Array  # exposed context-parallel key/value exchange
    # the exposed tp/cp/ep traffic inside a scale-up domain, forward and backward (+ recompute)
    scale_up_forward_s: Array | float = 0.0
    scale_up_backward_s: Array | float = 0.0


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
    ratio = peak / attention_peak if attention_peak > 0 else 1.0
    gemm_bytes = gemm_input_bytes(training.precision)
    gemms: Value = 0.0
    last_gemm: Value = 0.0
    for g in layer_gemms(model, f):
        k, n = g.per_gpu(d.tp)
        last_gemm = gemm_s(tokens, k, n, peak_flops_per_s=peak, hbm_bytes_per_s=hbm,
                           element_bytes=gemm_bytes, fraction=fraction, eff=eff,
                           rate_ratio=ratio)
        gemms = gemms + last_gemm
    attention, attention_backward = _attention_s(model, d, tokens, eff,
                                                 peak_flops_per_s=attention_peak,
                                                 hbm_bytes_per_s=hbm, act_bytes=act,
                                                 flops_per_exponential=gpu.flops_per_exponential)
    merge, merge_backward = _ring_merge_s(model, d, tokens, eff, hbm_bytes_per_s=hbm)
    attention, attention_backward = attention + merge, attention_backward + merge_backward
    style = kernel_style(eff)
    hidden_passes = style.hidden_passes or eff.elementwise_passes_hidden
    ffn_passes = (style.ffn_passes or eff.elementwise_passes_ffn) + (
        style.gated_passes if model.gated_mlp else 0.0)
    elementwise = memory_bound_s(
        act * tokens * (hidden_passes * model.hidden / d.shard + ffn_passes * f / d.tp),
        hbm_bytes_per_s=hbm, eff=eff)
    cast_forward, cast_backward = _autocast_weight_s(model, d, eff, hbm_bytes_per_s=hbm)
    quantise_forward, quantise_backward = _fp8_casts_s(model, training, d, tokens, eff, f,
                                                       hbm_bytes_per_s=hbm)
    forward = gemms + attention + elementwise + cast_forward + quantise_forward
    backward = (2.0 * (gemms + elementwise) + attention_backward + cast_backward
                + quantise_backward)
    selective = 0.0 if eff.flash_attention else attention  # flash already recomputes scores
    if eff.selective_recompute == "op":  # every second GEMM and the element-wise work
        selective = 0.5 * (gemms + quantise_forward + cast_forward) + elementwise
    # torch.utils.checkpoint stops once the backward's last saved tensor is recomputed: the
    # MLP's output GEMM saves its inputs before it runs, so it is not redone
    full = forward - (last_gemm if style.checkpoint_early_stop and f > 0 else 0.0)
    recompute = np.where(d.recompute >= 2, full, np.where(d.recompute >= 1, selective, 0.0))
    tp_forward, tp_comm = _tp_comm_s(model, cluster, d, tokens, eff, act_bytes=act,
                                     gemms_s=gemms, blocks=2.0 if f > 0 else 1.0)
    cp_forward, cp_comm = _cp_comm_s(model, cluster, d, eff, act_bytes=act,
                                     attention_s=attention)
    scale_up_forward, scale_up_backward = _scale_up_comm_s(
        cluster, d, tp_forward=tp_forward, tp_comm=tp_comm, cp_forward=cp_forward,
        cp_comm=cp_comm)
    return LayerTimes(forward_s=forward, backward_s=backward, attention_forward_s=attention,
                      recompute_s=recompute, tp_comm_s=tp_comm, cp_comm_s=cp_comm,
                      scale_up_forward_s=scale_up_forward,
                      scale_up_backward_s=scale_up_backward)


def _scale_up_comm_s(cluster: ClusterSpec, d: Degrees, *, tp_forward: Array, tp_comm: Array,
                     cp_forward: Array, cp_comm: Array) -> tuple[Array, Array]:
    """Of one layer's exposed tensor- and context-parallel seconds (each the first forward
    pass's and the whole layer's, as _tp_comm_s and _cp_comm_s give them), those whose group
    stays inside a scale-up domain (cost.collectives.inside_domain), forward and backward
    (with the forward redone under recompute): the time the NICs idle (cost.schedule)."""
    tp_inside = inside_domain(cluster, stride=1.0, size=d.tp)
    cp_inside = inside_domain(cluster, stride=d.tp, size=d.cp)
    forward = np.where(tp_inside, tp_forward, 0.0) + np.where(cp_inside, cp_forward, 0.0)
    backward = (np.where(tp_inside, tp_comm - tp_forward, 0.0)
                + np.where(cp_inside, cp_comm - cp_forward, 0.0))
    return forward, backward


def _autocast_weight_s(model: ModelSpec, d: Degrees, eff: Efficiency, *,
                       hbm_bytes_per_s: float) -> tuple[Array | float, Array | float]:
    """HBM traffic of fp32 weights under autocast (`stack.autocast`), per layer and
    micro-batch: each forward casts every weight to 16 bits (read 4 bytes, write 2), and the
    backward adds each 16-bit weight gradient into the fp32 gradient (read 2 and 4, write 4).
    Megatron's 16-bit weights and its wgrad GEMMs accumulating into fp32 main grads (gradient
    accumulation fusion) pay neither."""
    if not eff.autocast:
        return 0.0, 0.0
    params = layer_parameters(model) / d.tp
    return (memory_bound_s(6.0 * params, hbm_bytes_per_s=hbm_bytes_per_s, eff=eff),
            memory_bound_s(10.0 * params, hbm_bytes_per_s=hbm_bytes_per_s, eff=eff))


_FP8_CAST_BYTES = {"delayed": 4.0, "current": 6.0, "mxfp8": 6.125, "blockwise": 6.125}
"""HBM bytes moved per element quantised to fp8 for a GEMM (Transformer Engine): read the
16-bit tensor once and write its fp8 copy and the transposed (or column-scaled) copy the other
GEMM of the pair reads (2 + 1 + 1). Delayed scaling takes its scale from the amax history,
fused into the producing kernel; current (per-tensor) scaling first reads the tensor once more
for its amax (+2); MXFP8 and blockwise scaling quantise row-wise and column-wise blocks in
separate passes (+2) and write one 8-bit scale per 32 elements (+2/32 ... per copy)."""


def _fp8_casts_s(model: ModelSpec, training: TrainingSpec, d: Degrees, tokens: Array,
                 eff: Efficiency, ffn_hidden: float, *, hbm_bytes_per_s: float
                 ) -> tuple[Array | float, Array | float]:
    """Quantisation of GEMM operands in fp8 training, per layer and micro-batch: forward, the
    inputs of the four GEMMs (QKV and first MLP inputs are gathered with sequence
    parallelism, the projection's and second MLP's are sharded); backward, the gradients of
    their outputs; an MLP of width `ffn_hidden` (0 for a mixture-of-experts layer, whose expert
    GEMMs cost.moe_time quantises). Weights are quantised once per step (cached across
    micro-batches)."""
    if training.precision != "fp8":
        return 0.0, 0.0
    per_element = named(_FP8_CAST_BYTES, eff.fp8_recipe, field="stack.fp8_recipe")
    h, f, kv = model.hidden, ffn_hidden, model.kv_hidden
    gate = 2.0 if model.gated_mlp else 1.0
    forward = (2.0 * h + (h + f) / d.tp) * tokens
    backward = ((h + 2.0 * kv + gate * f) / d.tp + 2.0 * h) * tokens
    return (memory_bound_s(per_element * forward, hbm_bytes_per_s=hbm_bytes_per_s, eff=eff),
            memory_bound_s(per_element * backward, hbm_bytes_per_s=hbm_bytes_per_s, eff=eff))


def forward_kernels(model: ModelSpec, eff: Efficiency) -> float:
    """Kernels one layer's forward launches per micro-batch (cost.software's kernel style,
    plus the gated MLP's own)."""
    style = kernel_style(eff)
    return style.forward_kernels + (style.gated_kernels if model.gated_mlp else 0.0)


def host_s(model: ModelSpec, d: Degrees, eff: Efficiency, layers: Array) -> Array:
    """Host seconds to launch one micro-batch of `layers` layers: forward and backward kernels
    (cost.software), and under full recompute (and per-op selective checkpointing, which
    replays the forward and skips the kernels of saved ops) the forward again with the
    checkpoint's own host work (`checkpoint_host_factor`), each at `launch_s`; none with CUDA
    graphs."""
    if eff.cuda_graphs:
        return np.zeros(np.shape(layers))
    style = kernel_style(eff)
    gated = style.gated_kernels if model.gated_mlp else 0.0
    forward = forward_kernels(model, eff)
    backward = style.backward_kernels + 2.0 * gated
    # per-op selective checkpointing replays the whole forward on the host too
    replayed = d.recompute >= (1 if eff.selective_recompute == "op" else 2)
    recompute = np.where(replayed, forward * eff.checkpoint_host_factor, 0.0)
    return layers * (forward + backward + recompute) * eff.launch_s


def _tp_comm_s(model: ModelSpec, cluster: ClusterSpec, d: Degrees, tokens: Array,
               eff: Efficiency, *, act_bytes: float, gemms_s: Value, blocks: float
               ) -> tuple[Array, Array]:
    """The exposed seconds of the first forward pass and of the whole layer, as _cp_comm_s.
    Tensor-parallel collectives of one layer: an all-reduce (or, with sequence parallelism,
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
    total = exposed_s(passes * one_tp, gemm_passes * gemms_s, slowdown=eff.overlap_slowdown,
                      hideable=np.where(overlappable, eff.tp_overlap, 0.0))
    return total * blocks / passes, total  # each pass exposes the same share


def _cp_comm_s(model: ModelSpec, cluster: ClusterSpec, d: Degrees, eff: Efficiency, *,
               act_bytes: float, attention_s: Array) -> tuple[Array, Array]:
    """The exposed seconds of the first forward pass and of the whole layer. Context
    parallelism all-gathers the keys and values of the sequence (forward; backward
    again, and reduce-scatters their gradients), each hidden behind the attention it feeds
    (ring attention, Liu et al. 2023; Megatron-Core's CP). PyTorch's context_parallel
    (`stack.context_parallel: torch_allgather`) gathers keys and values repeated to every
    query head once per forward and once per backward, hidden only behind the first of the cp
    ring steps, and passes each step's key/value gradients to the next rank behind the next
    step's backward (flash: 2.5 x the forward), in fp32 (`_GRAD_RING_BYTES`)."""
    cp_link = group_link(cluster, stride=d.tp, size=d.cp, fraction=eff.network_fraction)
    a = attention_shape(model)
    forwards = 1.0 + np.where(d.recompute >= 1, 1.0, 0.0)
    if eff.context_parallel == "torch_allgather":
        kv_bytes = act_bytes * d.mb * model.seq_len * 2.0 * a.q_width / d.tp
        gather = all_gather_s(kv_bytes, d.cp, cp_link.bandwidth_bytes_per_s, cp_link.latency_s)
        step = attention_s / d.cp
        grad_bytes = kv_bytes / d.cp * _GRAD_RING_BYTES / act_bytes
        grads = (d.cp - 1.0) * exposed_s(
            p2p_s(grad_bytes, cp_link.bandwidth_bytes_per_s, cp_link.latency_s),
            2.5 * step, slowdown=0.0)
        forward = exposed_s(gather, step, slowdown=0.0)
        return forward, forwards * forward + exposed_s(gather, 2.5 * step, slowdown=0.0) + grads
    kv_bytes = act_bytes * d.mb * model.seq_len * (a.k_width + a.v_width) / d.tp
    gather = all_gather_s(kv_bytes, d.cp, cp_link.bandwidth_bytes_per_s, cp_link.latency_s)
    forward = exposed_s(gather, attention_s, slowdown=0.0)
    return forward, (forwards + 2.0) * forward


_GRAD_RING_BYTES = 4.0
"""Bytes per element of the key/value gradients PyTorch's ring attention passes to the next
rank after each step's backward: they accumulate and travel in fp32 (torch
_templated_ring_attention_backward: accum_dtype = float32 when convert_to_f32, the default;
next_grad_kv = cat(grad_key, grad_value) sent by the ALL_TO_ALL rotater whatever the
forward's rotate method), twice the bf16 keys and values of the forward."""


_MERGE_BYTES = 38.0
"""HBM bytes per output element of one logsumexp merge of a ring step's partial attention
output into the fp32 running output (torch _SDPAMerger._merge_one): cast the bf16 block to
fp32 (read 2, write 4); out - block (read 8, write 4); sigmoid(lse diff) · that (read 4,
write 4); out - product (read 8, write 4)."""
_GRAD_ACCUMULATE_BYTES = 20.0
"""HBM bytes per query element of one ring step's fp32 gradient accumulation (torch
_templated_ring_attention_backward, convert_to_f32): dq += step dq over the full query
(read 4 + 2, write 4) and dk, dv over half the repeated key/value block (2 x 10 / 2)."""


def _ring_merge_s(model: ModelSpec, d: Degrees, tokens: Array, eff: Efficiency, *,
                  hbm_bytes_per_s: float) -> tuple[Array | float, Array | float]:
    """Element-wise work of PyTorch's ring attention per layer and micro-batch (forward,
    backward): the slowest rank of the load-balanced (head-tail) ring merges cp - 1 partial
    outputs over its full query chunk and accumulates cp - 1 steps' gradients in fp32
    (torch/distributed/tensor/experimental/_attention.py); Megatron-Core's ring merges inside
    Transformer Engine's fused kernels (none here)."""
    if eff.context_parallel != "torch_allgather":
        return 0.0, 0.0
    elements = (d.cp - 1.0) * tokens * attention_shape(model).out_width / d.tp
    return (memory_bound_s(_MERGE_BYTES * elements, hbm_bytes_per_s=hbm_bytes_per_s, eff=eff),
            memory_bound_s(_GRAD_ACCUMULATE_BYTES * elements,
                           hbm_bytes_per_s=hbm_bytes_per_s, eff=eff))


_ATTENTION_KERNEL_SHARE = {"fused": 1.0, "flash2": 35.0 / 75.0}
"""The attention kernel's rate relative to the fused one (cost.efficiency.Efficiency
.attention_kernel): FlashAttention-2 reaches 35% of an H100's peak, FlashAttention-3 75%
(Shah et al. 2024, sec. 1)."""


def exponential_bound(model: ModelSpec, flops_per_exponential: float | None
                      ) -> tuple[float, float]:
    """How much longer than its matmuls a flash-attention kernel runs, forward and backward,
    where the softmax's exponentials are the slower pipe (1.0 where they are not, or where the
    GPU's rate is not cited).

    Each score costs 2·(qk_head_dim + v_head_dim) matmul FLOPs forward (QK^T and P·V; 5/2 of
    that backward, which recomputes QK^T) and one exponential forward and one backward (the
    backward recomputes P = exp(S - L)). The exponentials run on the multi-function units, 16
    per clock per SM on Ampere, Hopper and Blackwell (CUDA C++ Programming Guide, arithmetic
    instruction throughput, exp2 for compute capability 8.0-10.0), 32 on Blackwell Ultra;
    FlashAttention-3 (Shah et al. 2024, sec. 3) overlaps them with the matmuls (ping-pong
    warpgroups), so the slower of the two pipes sets the kernel's time, each at the kernel's
    achieved share of its rate: the forward takes max(1, E / F) of its matmul time, the
    backward max(1, E / (2.5·F)), where F is the FLOPs per score and E the GPU's bf16 tensor
    FLOPs per exponential (GPUSpec.flops_per_exponential: 4096 / 16 = 256 on an H100, so a
    64-wide head is just balanced, FlashAttention-3 sec. 3; 8192 / 16 = 512 on a B200,
    FlashAttention-4, Zadouri et al. 2026, where a 128-wide head is balanced and a 64-wide
    one's forward takes twice its matmul time)."""
    if not flops_per_exponential:
        return 1.0, 1.0
    a = attention_shape(model)
    per_score = 2.0 * (a.qk_head_dim + a.v_head_dim)
    return (max(1.0, flops_per_exponential / per_score),
            max(1.0, flops_per_exponential / (2.5 * per_score)))


def _attention_s(
    model: ModelSpec, d: Degrees, tokens: Array, eff: Efficiency, *, peak_flops_per_s: float,
    hbm_bytes_per_s: float, act_bytes: float, flops_per_exponential: float | None = None,
) -> tuple[Array, Array]:
    """Forward and backward seconds of the attention core of one layer and micro-batch.

    Flash attention (Dao et al. 2022) skips the masked half of causal scores and keeps them out
    of HBM; its backward recomputes QK^T: 2.5 x the forward's matmuls. Where the GPU's
    exponentials are slower than a score's matmuls (exponential_bound) the softmax sets the
    pace. Unfused attention computes all s x s scores and streams them through HBM
    `softmax_passes` times; backward 2x."""
    core = attention_core_flops(model, tokens, model.seq_len) / d.tp
    rate = peak_flops_per_s * eff.attention_fraction * _ATTENTION_KERNEL_SHARE.get(
        eff.attention_kernel, 1.0)
    if eff.flash_attention:
        matmuls = 0.5 * core / rate
        forward_bound, backward_bound = exponential_bound(model, flops_per_exponential)
        return matmuls * forward_bound, matmuls * 2.5 * backward_bound
    scores = act_bytes * d.mb * model.heads / d.tp * (model.seq_len / d.cp) * model.seq_len
    forward = core / rate + memory_bound_s(eff.softmax_passes * scores,
                                           hbm_bytes_per_s=hbm_bytes_per_s, eff=eff)
    return forward, 2.0 * forward


def logits_s(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, tokens: Array,
              d: Degrees, eff: Efficiency) -> Array:
    """Logits GEMM (vocabulary-parallel) forward and backward, and the fp32 cross-entropy."""
    gpu = cluster.gpu
    act = element_bytes(training.precision)["activation"]
    # the output layer stays 16-bit in fp8 training (Megatron-Core's output_layer is no TE
    # module)
    precision = "bf16" if training.precision == "fp8" else training.precision
    gemm = gemm_s(tokens, float(model.hidden), model.vocab / d.tp,
                  peak_flops_per_s=gpu.peak_for(precision),
                  hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s, element_bytes=act,
                  fraction=eff.gemm_fraction_for(gpu), eff=eff)
    loss = memory_bound_s(streamed_logits_bytes(eff, tp=d.tp) * tokens * model.vocab / d.tp,
                          hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s, eff=eff)
    return 3.0 * gemm + loss


def stage_cost(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
               eff: Efficiency) -> StageCost:
    """One micro-batch on the slowest stage: the last (its layers plus the logits), or a
    middle one where the last gave a layer to the loss (cost.transformer's
    embedding_and_loss_split) and the logits take less time than that layer. A stage's time
    is the longer of its device time and its host's launch time (cost.schedule's
    launch_bound_s), so a launch-bound pipeline's slowest stage is the one with most layers."""
    shape = stage_shape(model, d)
    layer = layer_times(model, cluster, training, d, eff, shape=shape)
    logits = logits_s(model, cluster, training, shape.tokens_per_micro_batch, d, eff)
    per_layer = (layer.forward_s + layer.backward_s + layer.recompute_s + layer.tp_comm_s
                 + layer.cp_comm_s)
    # a stage takes the longer of running and launching its kernels (launch_bound_s)
    last_host = host_s(model, d, eff, shape.last_stage_layers)
    full_host = host_s(model, d, eff, shape.layers_per_stage)
    last_slower = (np.maximum(shape.last_stage_layers * per_layer + logits, last_host)
                   >= np.maximum(shape.layers_per_stage * per_layer, full_host))
    layers = np.where(last_slower, shape.last_stage_layers, shape.layers_per_stage)
    logits = np.where(last_slower, logits, 0.0)
    act = element_bytes(training.precision)["activation"]
    return StageCost(
        compute_s=layers * (layer.forward_s + layer.backward_s) + logits,
        recompute_s=layers * layer.recompute_s, tp_comm_s=layers * layer.tp_comm_s,
        cp_comm_s=layers * layer.cp_comm_s,
        forward_s=layers * layer.forward_s, backward_s=layers * layer.backward_s,
        bubble_unit_s=layers * per_layer + logits / d.pp,
        send_bytes=act * shape.tokens_per_micro_batch * model.hidden / d.tp,
        units=layers, host_s=np.where(last_slower, last_host, full_host),
        scale_up_forward_s=layers * layer.scale_up_forward_s,
        scale_up_backward_s=layers * layer.scale_up_backward_s)
