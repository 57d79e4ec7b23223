"""What one GPU of a transformer's fullest pipeline stage holds: parameters, activations by
recompute and schedule, transient buffers.

Activation sizes generalise Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models" (MLSys'23), sec. 4: per layer s·b·h·(34 + 5·a·s/h) bytes in 16 bits, of
which 10·s·b·h is replicated across tensor-parallel ranks unless sequence parallelism shards it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from .attention import attention_shape
from .degrees import Degrees
from .efficiency import Efficiency
from .flops import layer_parameters
from .inputs import Array, TrainingSpec
from .precision import element_bytes
from .transformer_time import StageShape, stage_shape
from .workload import Footprint, ParamGroup, StateBytes

if TYPE_CHECKING:
    from .transformer import ModelSpec

__all__ = ["activation_bytes_per_layer", "footprint", "layers_in_flight",
           "mlp_activation_elements", "stage_parameters"]


def stage_parameters(model: ModelSpec, d: Degrees, shape: StageShape | None = None) -> Array:
    """Parameters held by one GPU of the fullest stage: its layers / tp, plus the vocabulary
    matrices (input embedding on the first stage, logits on the last; both when pp = 1)."""
    shape = shape or stage_shape(model, d)
    layers = shape.layers_per_stage * layer_parameters(model) / d.tp
    vocab = model.vocab * model.hidden / d.tp
    ends = np.where(d.pp > 1, 1.0, 1.0 if model.tied_embeddings else 2.0)
    return layers + ends * vocab + 2.0 * model.hidden


def mlp_activation_elements(ffn_hidden: float, gated: bool) -> float:
    """16-bit values an MLP (or an expert) of width f stores per token between its two
    GEMMs, in Korthikanti's units (bytes at 2 per value): 4f (GeLU input and output), 8f for
    a gated MLP."""
    return (8.0 if gated else 4.0) * ffn_hidden


def activation_bytes_per_layer(
    model: ModelSpec, d: Degrees, *, act_bytes: float, flash_attention: bool,
    ffn_hidden: float | None = None,
) -> Array:
    """Stored activations of one layer for one micro-batch on one GPU (bytes).

    Replicated part 10·T·h (norm inputs, GEMM inputs, dropout masks), tensor-parallel part
    T·(4h + 4·kv_hidden + (4 or 8)·ffn) (Q, K, V, projection input, MLP intermediates), score
    part 5·b·heads·(s/cp)·s (softmax, dropout), dropped by selective recompute and never stored
    by flash attention (which keeps a per-row softmax statistic, negligible). Full recompute
    keeps only the layer input 2·T·h. Sizes scale with act_bytes / 2 (Korthikanti's are fp16).
    Attention widths generalise 4h + 4·kv_hidden to 2·(Q + K + V + output-projection input),
    plus MLA's latents (replicated); `ffn_hidden` overrides the MLP width (0: none)."""
    h = model.hidden
    f = model.ffn_hidden if ffn_hidden is None else ffn_hidden
    a = attention_shape(model)
    tokens = d.mb * model.seq_len / d.cp
    replicated = (10.0 * h + 2.0 * a.latent_width) * tokens / d.shard
    widths = 2 * (a.q_width + a.k_width + a.v_width + a.out_width)
    sharded = tokens * (widths + mlp_activation_elements(f, model.gated_mlp)) / d.tp
    s = model.seq_len
    scores = 0.0 if flash_attention else 5.0 * d.mb * model.heads * (s / d.cp) * s / d.tp
    scale = act_bytes / 2.0
    none = replicated + sharded + scores
    selective = replicated + sharded
    full = 2.0 * tokens * h / d.shard
    return scale * np.where(d.recompute >= 2, full, np.where(d.recompute >= 1, selective, none))


def layers_in_flight(d: Degrees, shape: StageShape) -> Array:
    """Layer-micro-batches whose activations the first stage holds at its peak.

    1F1B: min(m, p) micro-batches of L/p layers (Narayanan et al. SC'21, sec. 2.2.1);
    interleaved: min(m·v, p·(v+1) - 1) chunks of L/(p·v) layers (Megatron-LM's warm-up count)."""
    plain = np.minimum(d.micro_batches, d.pp) * shape.layers_per_stage
    chunks = np.minimum(d.micro_batches * d.vs, d.pp * (d.vs + 1.0) - 1.0)
    interleaved = chunks * shape.layers_per_stage / d.vs
    return np.where(d.vs > 1, interleaved, plain)


def footprint(model: ModelSpec, training: TrainingSpec, d: Degrees, eff: Efficiency
              ) -> Footprint:
    """Parameters of the fullest stage, replicated over dp·cp ranks spaced tp apart; two
    layers stay in HBM when weights are offloaded; the activations of the micro-batches in
    flight, and the buffers (_buffers_bytes)."""
    sizes = element_bytes(training.precision)
    shape = stage_shape(model, d)
    per_layer = activation_bytes_per_layer(model, d, act_bytes=sizes["activation"],
                                           flash_attention=eff.flash_attention)
    activations = per_layer * layers_in_flight(d, shape)
    return Footprint(
        groups=(ParamGroup(params=stage_parameters(model, d, shape), replicas=d.dp * d.cp,
                           stride=d.tp),),
        state=StateBytes(weight=sizes["weight"], gradient=sizes["gradient"],
                         optimizer=sizes["optimizer"]),
        resident_params=2.0 * layer_parameters(model) / d.tp,
        activations_bytes=activations,
        buffers_bytes=_buffers_bytes(model, d, shape, per_layer=per_layer,
                                     first_stage=activations, act_bytes=sizes["activation"],
                                     flash_attention=eff.flash_attention))


def _buffers_bytes(
    model: ModelSpec, d: Degrees, shape: StageShape, *, per_layer: Array, first_stage: Array,
    act_bytes: float, flash_attention: bool, rebuilt: Array | None = None,
) -> Array:
    """Transient working memory on the fullest stage. The last stage computes the loss on fp32
    logits and their gradient (T·V/tp·8 bytes) while holding one micro-batch of its layers; the
    first stage holds the most activations; pp = 1 holds both. Under full recompute, one layer's
    whole activations while it is rebuilt (`rebuilt`, default a layer of this model)."""
    logits = 8.0 * shape.tokens_per_micro_batch * model.vocab / d.tp
    last_stage = per_layer * shape.last_stage_layers + logits
    ends = np.where(d.pp > 1, np.maximum(last_stage - first_stage, 0.0), logits)
    if rebuilt is None:
        rebuilt = activation_bytes_per_layer(model, replace(d, recompute=0.0 * d.recompute),
                                             act_bytes=act_bytes,
                                             flash_attention=flash_attention)
    return ends + np.where(d.recompute >= 2, rebuilt, 0.0)
