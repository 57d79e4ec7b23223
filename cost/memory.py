"""Memory per GPU: model states by ZeRO stage and offload, activations by recompute and schedule.

Activation sizes generalise Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models" (MLSys'23), sec. 4: per layer s·b·h·(34 + 5·a·s/h) bytes in 16 bits, of
which 10·s·b·h is replicated across tensor-parallel ranks unless sequence parallelism shards it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .breakdown import MemoryUse
from .efficiency import Efficiency
from .flops import layer_parameters
from .inputs import Array, ClusterSpec, ModelSpec, TrainingSpec
from .resolved import Resolved, element_bytes

__all__ = [
    "activation_bytes_per_layer",
    "hbm_usable_bytes",
    "layers_in_flight",
    "memory_use",
    "stage_parameters",
]


def stage_parameters(model: ModelSpec, r: Resolved) -> Array:
    """Parameters held by one GPU of the fullest stage: its layers / tp, plus the vocabulary
    matrices (input embedding on the first stage, logits on the last; both when pp = 1)."""
    layers = r.layers_per_stage * layer_parameters(model) / r.tp
    vocab = model.vocab * model.hidden / r.tp
    ends = np.where(r.pp > 1, 1.0, 1.0 if model.tied_embeddings else 2.0)
    return layers + ends * vocab + 2.0 * model.hidden


def activation_bytes_per_layer(
    model: ModelSpec, r: Resolved, *, act_bytes: float, flash_attention: bool
) -> Array:
    """Stored activations of one layer for one micro-batch on one GPU (bytes).

    Replicated part 10·T·h (norm inputs, GEMM inputs, dropout masks), tensor-parallel part
    T·(4h + 4·kv_hidden + (4 or 8)·ffn) (Q, K, V, projection input, MLP intermediates), score
    part 5·b·heads·(s/cp)·s (softmax, dropout), dropped by selective recompute and never stored
    by flash attention (which keeps a per-row softmax statistic, negligible). Full recompute
    keeps only the layer input 2·T·h. Sizes scale with act_bytes / 2 (Korthikanti's are fp16)."""
    h, f, kv = model.hidden, model.ffn_hidden, model.kv_hidden
    tokens = r.tokens_per_micro_batch
    replicated = 10.0 * tokens * h / r.shard
    sharded = tokens * (4.0 * h + 4.0 * kv + (8.0 if model.gated_mlp else 4.0) * f) / r.tp
    s = model.seq_len
    scores = 0.0 if flash_attention else 5.0 * r.mb * model.heads * (s / r.cp) * s / r.tp
    scale = act_bytes / 2.0
    none = replicated + sharded + scores
    selective = replicated + sharded
    full = 2.0 * tokens * h / r.shard
    return scale * np.where(r.recompute >= 2, full, np.where(r.recompute >= 1, selective, none))


def layers_in_flight(r: Resolved) -> Array:
    """Layer-micro-batches whose activations the first stage holds at its peak.

    1F1B: min(m, p) micro-batches of L/p layers (Narayanan et al. SC'21, sec. 2.2.1);
    interleaved: min(m·v, p·(v+1) - 1) chunks of L/(p·v) layers (Megatron-LM's warm-up count)."""
    plain = np.minimum(r.micro_batches, r.pp) * r.layers_per_stage
    chunks = np.minimum(r.micro_batches * r.vs, r.pp * (r.vs + 1.0) - 1.0)
    interleaved = chunks * r.layers_per_stage / r.vs
    return np.where(r.vs > 1, interleaved, plain)


def hbm_usable_bytes(cluster: ClusterSpec, eff: Efficiency) -> float:
    """HBM that tensors can fill: capacity less the reserve, times the allocator's fraction."""
    return (cluster.gpu.hbm_capacity_bytes - eff.reserved_bytes) * eff.usable_fraction


def memory_use(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, r: Resolved, eff: Efficiency
) -> MemoryUse:
    """Bytes per GPU by kind. ZeRO (Rajbhandari et al. SC'20): stage 1 shards the optimizer
    state over dp·cp ranks, 2 also gradients, 3 also weights. Offload moves the optimizer state
    (and the weights, keeping two layers resident) to the expansion tier."""
    sizes = element_bytes(training.precision)
    params = stage_parameters(model, r)
    replicas = r.dp * r.cp
    weights = params * sizes["weight"] / np.where(r.zero >= 3, replicas, 1.0)
    gradients = params * sizes["gradient"] / np.where(r.zero >= 2, replicas, 1.0)
    optimizer = params * sizes["optimizer"] / np.where(r.zero >= 1, replicas, 1.0)
    resident = 2.0 * layer_parameters(model) / r.tp * sizes["weight"]
    off_opt = r.offload >= 1
    off_w = r.offload >= 2
    expansion = np.where(off_opt, optimizer, 0.0) + np.where(off_w, weights, 0.0)
    optimizer = np.where(off_opt, 0.0, optimizer)
    weights = np.where(off_w, np.minimum(weights, resident), weights)

    per_layer = activation_bytes_per_layer(model, r, act_bytes=sizes["activation"],
                                           flash_attention=eff.flash_attention)
    activations = per_layer * layers_in_flight(r)
    return MemoryUse(
        weights=weights, gradients=gradients, optimizer=optimizer, activations=activations,
        buffers=_buffers_bytes(model, r, per_layer=per_layer, first_stage=activations,
                               act_bytes=sizes["activation"],
                               flash_attention=eff.flash_attention),
        expansion=expansion,
    )


def _buffers_bytes(
    model: ModelSpec, r: Resolved, *, per_layer: Array, first_stage: Array, act_bytes: float,
    flash_attention: bool,
) -> Array:
    """Transient working memory on the fullest stage. The last stage computes the loss on fp32
    logits and their gradient (T·V/tp·8 bytes) while holding one micro-batch of its layers; the
    first stage holds the most activations; pp = 1 holds both. Under full recompute, one layer's
    whole activations while it is rebuilt."""
    logits = 8.0 * r.tokens_per_micro_batch * model.vocab / r.tp
    last_stage = per_layer * r.last_stage_layers + logits
    ends = np.where(r.pp > 1, np.maximum(last_stage - first_stage, 0.0), logits)
    rebuilt = activation_bytes_per_layer(model, replace(r, recompute=0.0 * r.recompute),
                                         act_bytes=act_bytes, flash_attention=flash_attention)
    return ends + np.where(r.recompute >= 2, rebuilt, 0.0)
