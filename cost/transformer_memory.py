"""What one GPU of a transformer's fullest pipeline stage holds: parameters, activations by
recompute and schedule, transient buffers.

Activation sizes generalise Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models" (MLSys'23), sec. 4: per layer s·b·h·(34 + 5·a·s/h) bytes in 16 bits, of
which 10·s·b·h is replicated across tensor-parallel ranks unless sequence parallelism shards it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .attention import attention_shape
from .degrees import Degrees
from .efficiency import Efficiency
from .flops import layer_parameters
from .inputs import Array, TrainingSpec
from .precision import activation_bytes, gemm_input_bytes, state_bytes
from .software import held_logits_bytes, kernel_style
from .transformer_time import StageShape, stage_shape
from .workload import Footprint, ParamGroup

if TYPE_CHECKING:
    from .transformer import ModelSpec

__all__ = ["activation_bytes_per_layer", "footprint", "head_input_bytes", "layers_in_flight",
           "mlp_activation_elements", "offloaded_activation_bytes", "op_sac_bytes_per_token",
           "stage_parameters"]


def stage_parameters(model: ModelSpec, d: Degrees, shape: StageShape | None = None) -> Array:
    """Parameters held by one GPU of the fullest stage: its layers / tp, plus the vocabulary
    matrices (input embedding on the first stage, logits on the last; both when pp = 1)."""
    shape = shape or stage_shape(model, d)
    layers = shape.layers_per_stage * layer_parameters(model) / d.tp
    vocab = model.vocab * model.hidden / d.tp
    ends = np.where(d.pp > 1, 1.0, 1.0 if model.tied_embeddings else 2.0)
    return layers + ends * vocab + 2.0 * model.hidden


_MASK_BYTES = 1.0
"""A dropout mask: one byte per element (Korthikanti et al., sec. 4.1)."""


def mlp_activation_bytes(ffn_hidden: float, gated: bool, *, act_bytes: float,
                         input_bytes: float) -> float:
    """Bytes an MLP (or an expert) of width f keeps per token between its two GEMMs: the
    activation function's input (f values, 2f for a gated MLP: both halves) and the second
    GEMM's input (input_bytes each: fp8 runs keep the fp8 copy)."""
    return (2.0 * act_bytes if gated else act_bytes) * ffn_hidden + input_bytes * ffn_hidden


def mlp_activation_elements(ffn_hidden: float, gated: bool) -> float:
    """The same in Korthikanti's units (bytes at 2 per value): 4f for a GeLU MLP, 6f gated."""
    return mlp_activation_bytes(ffn_hidden, gated, act_bytes=2.0, input_bytes=2.0)


def activation_bytes_per_layer(
    model: ModelSpec, d: Degrees, *, act_bytes: float, flash_attention: bool,
    input_bytes: float | None = None, norm_bytes: float | None = None,
    projection_copies: float = 1.0, ffn_hidden: float | None = None,
    selective_policy: str = "attention", gated_copies: float = 0.0,
    sac_keeps_unread: bool = True, gathered_inputs: bool = False,
) -> Array:
    """Stored activations of one layer for one micro-batch on one GPU (bytes), tensor by
    tensor after Korthikanti et al. (MLSys'23, sec. 4), generalised to GQA, multi-head latent
    attention, gated MLPs, fp8 and models trained without dropout (Llama, Nemotron).

    Replicated across tensor-parallel ranks unless sequence parallelism shards them: the two
    norm inputs (act_bytes each), the QKV and first-MLP GEMM inputs (input_bytes: fp8 runs
    keep the fp8 copy), two hidden-dropout masks, MLA's latents. Tensor-parallel: Q, K, V and
    the attention output (act_bytes), the projection's input (input_bytes, a second copy only
    in fp8), the MLP's (mlp_activation_bytes; `ffn_hidden` overrides its width, 0: none).
    Score part (unfused attention only): softmax output, its dropout mask and output per
    score, dropped by selective recompute. Full recompute keeps only the layer input.
    Korthikanti's fp16 GPT layer: 10 + 24/t sbh bytes and 5·a·s/h·sbh of scores. Software
    differs (cost.software): under autocast the residual stream, hence the norm inputs, stays
    fp32 (`norm_bytes` 4); eager PyTorch keeps a second copy of the attention output
    (`projection_copies`) and, in a gated MLP, `gated_copies` f-wide copies more (the SiLU
    output that the product saves). `selective_policy` "op": selective recompute keeps what
    op_sac_bytes_per_token says instead (`sac_keeps_unread`: eager, as that function says).
    `gathered_inputs`: the QKV and first-MLP GEMM inputs are saved all-gathered, unsharded by
    sequence parallelism (PyTorch DTensor tensor parallelism, head_input_bytes)."""
    h = model.hidden
    f = model.ffn_hidden if ffn_hidden is None else ffn_hidden
    shape = attention_shape(model)
    a = act_bytes
    q = a if input_bytes is None else input_bytes
    norm = a if norm_bytes is None else norm_bytes
    tokens = d.mb * model.seq_len / d.cp
    masks = 2.0 * _MASK_BYTES if model.dropout else 0.0
    gemm_inputs = tokens * h * 2.0 * q / (1.0 if gathered_inputs else d.shard)
    replicated = (tokens * (h * (2.0 * norm + masks) + a * shape.latent_width) / d.shard
                  + gemm_inputs)
    out = shape.out_width
    projection = projection_copies * a * out + (q * out if q != a else 0.0)
    qkv = a * (shape.q_width + shape.k_width + shape.v_width)
    mlp = mlp_activation_bytes(f, model.gated_mlp, act_bytes=a, input_bytes=q) + (
        gated_copies * a * f if model.gated_mlp else 0.0)
    sharded = tokens * (qkv + projection + mlp) / d.tp
    s = model.seq_len
    per_score = a + (_MASK_BYTES + a if model.dropout else 0.0)
    scores = 0.0 if flash_attention else per_score * d.mb * model.heads * (s / d.cp) * s / d.tp
    kept = replicated + sharded
    selective = kept
    if selective_policy == "op":
        selective = tokens * op_sac_bytes_per_token(model, d, act_bytes=a, input_bytes=norm,
                                                    ffn_hidden=f, keeps_unread=sac_keeps_unread)
    full = a * tokens * h / d.shard
    return np.where(d.recompute >= 2, full,
                    np.where(d.recompute >= 1, selective, kept + scores))


def op_sac_bytes_per_token(model: ModelSpec, d: Degrees, *, act_bytes: float,
                           input_bytes: float, ffn_hidden: float,
                           keeps_unread: bool = True) -> Array:
    """Bytes per token one layer keeps under PyTorch's per-op selective activation
    checkpointing as torchtitan applies it (torchtitan 9dec370,
    torchtitan/parallelisms/parallelize_llama.py `_get_custom_policy`): MUST_SAVE for the ops of
    `_save_list` (aten.mm, the flash/efficient SDPA ops, reduce_scatter_tensor, abs, max) except
    every even-numbered mm, PREFER_RECOMPUTE for all else. The mm count lives in the `meta`
    dict that `selective_checkpointing_context_fn` makes anew for every checkpointed block, so
    the parity restarts at each layer: of its GEMMs in forward order (Q, K, V, the projection,
    the MLP's first -- gate then up when gated -- and second; torchtitan's wq, wk, wv, wo, w1,
    w3, w2) the 1st, 3rd, 5th and 7th are saved: Q, V, the gate and fc2 of a gated MLP (wq,
    wv, w1, w2); Q, V and fc1 of a plain one. Kept besides: the block's input (`input_bytes`,
    sharded with sequence parallelism) and the attention output (its log-sum-exp is
    negligible). Column-parallel outputs (Q, V, fc1) are split over tp; a row-parallel GEMM's
    output (fc2) is the partial sum of the whole micro-batch on every rank (tokens x h, unsplit)
    and, with sequence parallelism, the projection's and fc2's reduce-scatter outputs are saved
    too (reduce_scatter_tensor is in `_save_list`; h/tp each).

    `keeps_unread`: whether the saved outputs that no backward reads stay. fc2's output and the
    reduce-scatters feed only the residual adds, whose backward reads nothing. Eager PyTorch
    keeps every MUST_SAVE output in its cache until the recompute consumes it
    (torch/utils/checkpoint.py `_CachingTorchDispatchMode`; CheckpointPolicy's docstring: such
    a policy "would save additional tensors not limited to ones that are actually needed for
    gradient computation"): True. Under torch.compile the policy only tags graph nodes and the
    partitioner keeps what the backward graph reads (torch/_functorch/partitioners.py
    `_extract_fwd_bwd_modules`: "filter out saved values that don't actually end up being used
    by the backwards pass"): False."""
    shape = attention_shape(model)
    h = model.hidden
    tp = d.tp
    # (width per token on one GPU, read by the backward) of each GEMM's output, in forward order
    gemms: list[tuple[Any, bool]] = [
        (shape.q_width / tp, True), (shape.k_width / tp, True), (shape.v_width / tp, True),
        (h, False), (ffn_hidden / tp, True)]
    if model.gated_mlp:
        gemms.append((ffn_hidden / tp, True))
    gemms.append((h, False))
    saved = sum(w for i, (w, read) in enumerate(gemms) if i % 2 == 0 and (read or keeps_unread))
    sequence_parallel = (d.shard > 1) & (tp > 1)
    scatters = np.where(sequence_parallel & keeps_unread, 2.0 * h / tp, 0.0)
    return input_bytes * h / d.shard + act_bytes * (shape.out_width / tp + saved + scatters)


def head_input_bytes(model: ModelSpec, d: Degrees, *, act_bytes: float,
                     gathered_inputs: bool = False, **_: Any) -> Array:
    """Bytes one GPU of the last stage keeps of the output layer's input, all-gathered, from the
    forward until that layer's backward (so at the loss), where PyTorch's DTensor tensor
    parallelism gathers a sequence-sharded input (`gathered_inputs`, tp > 1 with sequence
    parallelism): ColwiseParallel's `_prepare_input_fn` (torch/distributed/tensor/parallel/
    style.py) redistributes the Shard(1) input to Replicate before the GEMM and autograd saves
    the gathered tensor, tokens x h at act_bytes (torchtitan's output layer:
    ColwiseParallel(input_layouts=Shard(1)), parallelize_llama.apply_tp). Megatron-Core saves
    the sharded input and gathers it again in its backward (megatron/core/tensor_parallel/
    layers.py, LinearWithGradAccumulationAndAsyncCommunication: save_for_backward(input,
    weight), `total_input = all_gather_buffer` in backward): tokens x h / tp, which the model,
    like Korthikanti et al. (MLSys'23, sec. 4.3) for the output layer's and final norm's
    inputs, leaves out as small beside the layers (0 here); DTensor's gathered copy is tp
    times that, as much as 8 layers' inputs under full recompute at tp 8."""
    tokens = d.mb * model.seq_len / d.cp
    gathers = gathered_inputs & (d.shard > 1)
    return np.where(gathers, act_bytes * tokens * model.hidden, 0.0)


def layers_in_flight(d: Degrees, shape: StageShape) -> Array:
    """Layer-micro-batches whose activations the first stage holds at its peak.

    1F1B: min(m, p) micro-batches of L/p layers (Narayanan et al. SC'21, sec. 2.2.1);
    interleaved: min(m·v, p·(v+1) - 1) chunks of L/(p·v) layers (Megatron-LM's warm-up count)."""
    plain = np.minimum(d.micro_batches, d.pp) * shape.layers_per_stage
    chunks = np.minimum(d.micro_batches * d.vs, d.pp * (d.vs + 1.0) - 1.0)
    interleaved = chunks * shape.layers_per_stage / d.vs
    return np.where(d.vs > 1, interleaved, plain)


def offloaded_activation_bytes(per_layer: Array, d: Degrees, shape: StageShape,
                               offloaded_layers: float) -> Array:
    """Saved activations that activation offloading keeps out of HBM at the stage's peak: of
    the n = min(offloaded, L/p) offloaded layers of each micro-batch in flight (min(m, p) under
    1F1B), all but the one in transit (Megatron-Core's cpu_offloading moves one layer's saved
    tensors at a time, double-buffered: (n - 1) layers each). The transfers, over a Grace
    C2C link at hundreds of GB/s, hide behind the layers' compute; a PCIe host link would not
    (not modelled)."""
    n = np.minimum(offloaded_layers, shape.layers_per_stage)
    in_flight = np.minimum(d.micro_batches, d.pp)
    return np.where(n > 0, per_layer * (n - 1.0) * in_flight, 0.0)


def activation_sizes(training: TrainingSpec, eff: Efficiency) -> dict[str, Any]:
    """The element sizes and software choices activation_bytes_per_layer takes for a run:
    fp8 GEMM-input copies, autocast's fp32 residual stream, eager PyTorch's extra copy."""
    return {"act_bytes": activation_bytes(training.precision),
            "input_bytes": gemm_input_bytes(training.precision),
            "flash_attention": eff.flash_attention,
            "norm_bytes": 4.0 if eff.autocast else None,
            "projection_copies": kernel_style(eff).projection_copies,
            "gated_copies": kernel_style(eff).gated_copies,
            "selective_policy": eff.selective_recompute,
            "sac_keeps_unread": kernel_style(eff).sac_keeps_unread,
            "gathered_inputs": eff.tensor_parallel == "dtensor"}


def footprint(model: ModelSpec, training: TrainingSpec, d: Degrees, eff: Efficiency
              ) -> Footprint:
    """Parameters of the fullest stage, replicated over dp·cp ranks spaced tp apart (sharded by
    ZeRO over the plan's shard group); two layers stay in HBM when weights are offloaded; the
    activations of the micro-batches in flight less those offloaded to the host, and the
    buffers (_buffers_bytes; the loss's logits at 2 bytes under Transformer Engine's in-place
    cross-entropy, `eff.cross_entropy`)."""
    shape = stage_shape(model, d)
    sizes = activation_sizes(training, eff)
    per_layer = activation_bytes_per_layer(model, d, **sizes)
    activations = per_layer * layers_in_flight(d, shape) - offloaded_activation_bytes(
        per_layer, d, shape, eff.activation_offload_layers)
    params = stage_parameters(model, d, shape)
    logits_bytes = held_logits_bytes(eff, tp=d.tp)
    buffers = _buffers_bytes(model, d, shape, per_layer=per_layer, first_stage=activations,
                             logits_bytes=logits_bytes, sizes=sizes)
    if eff.autocast:  # autocast keeps a 16-bit copy of every weight for the backward
        buffers = buffers + 2.0 * params
    return Footprint(
        groups=(ParamGroup(params=params, replicas=d.dp * d.cp, stride=d.tp,
                           shard=d.shard_group),),
        state=state_bytes(training.precision, eff),
        resident_params=2.0 * layer_parameters(model) / d.tp,
        activations_bytes=activations, buffers_bytes=buffers)


def _buffers_bytes(
    model: ModelSpec, d: Degrees, shape: StageShape, *, per_layer: Array, first_stage: Array,
    logits_bytes: Array | float, sizes: dict[str, Any], rebuilt: Array | None = None,
) -> Array:
    """Transient working memory on the fullest stage. The last stage computes the loss on the
    logits (T·V/tp·`logits_bytes`: fp32 logits and their gradient in Megatron's fused
    cross-entropy, more in eager PyTorch) while holding one micro-batch of its layers; the
    first stage holds the most activations; pp = 1 holds both. Under full recompute, one
    layer's whole activations while it is rebuilt (`rebuilt`, default a layer of this
    model); on the last stage not beside the logits: the loss's backward has freed them
    before the backward reaches the last layer and rebuilds it (recomputation runs when the
    backward first unpacks a layer's saved tensors: torch/utils/checkpoint.py's unpack_hook,
    Megatron's CheckpointFunction.backward)."""
    logits = (logits_bytes * shape.tokens_per_micro_batch * model.vocab / d.tp
              + head_input_bytes(model, d, **sizes))
    if rebuilt is None:
        rebuilt = activation_bytes_per_layer(model, replace(d, recompute=0.0 * d.recompute),
                                             **sizes)
    rebuilding = np.where(d.recompute >= 2, rebuilt, 0.0)
    # the loss's backward ends before the last layer's recompute starts: never both at once
    last_stage = per_layer * shape.last_stage_layers + np.maximum(logits, rebuilding)
    return np.where(d.pp > 1, np.maximum(last_stage - first_stage, rebuilding),
                    np.maximum(logits, rebuilding))
