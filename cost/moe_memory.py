"""What one GPU of a mixture of experts' fullest pipeline stage holds.

Parameters come in two replica groups (cost.workload.ParamGroup): the dense part (attention,
norms, router, shared experts, dense layers, vocabulary), replicated over dp·cp ranks spaced
tp apart as a transformer's; and the routed experts, experts/ep per rank split etp ways,
replicated over the expert-DP ranks spaced ep·etp apart (Megatron-Core's parallel folding).
cost.memory shards each group by ZeRO stage over its own replicas, cost.schedule reduces each
over its own group. Activations are the transformer's per layer (Korthikanti et al. MLSys'23)
with the shared experts as the MLP, plus what the routed copies of the tokens store.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .attention import attention_shape
from .degrees import Degrees
from .efficiency import Efficiency
from .flops import (
    attention_parameters,
    has_linear_bias,
    layer_parameters,
    mlp_parameters,
    norm_parameters,
)
from .inputs import Array, TrainingSpec
from .moe_layout import moe_stage_shape, stage_mix
from .precision import activation_bytes, gemm_input_bytes, state_bytes
from .software import held_logits_bytes, kernel_style
from .transformer_memory import (
    _buffers_bytes,
    activation_bytes_per_layer,
    layers_in_flight,
    offloaded_activation_bytes,
    stage_parameters,
)
from .transformer_time import StageShape
from .workload import Footprint, ParamGroup

if TYPE_CHECKING:
    from .moe import MoEModelSpec

__all__ = ["expert_parameters_per_gpu", "footprint", "moe_dense_parameters",
           "offloaded_routed_bytes", "routed_activation_bytes", "routed_expert_parameters",
           "router_parameters", "selective_savings_bytes"]


def router_parameters(model: MoEModelSpec) -> int:
    """The router's experts x hidden matrix (none for a single expert)."""
    return model.experts * model.hidden if model.routes else 0


def routed_expert_parameters(model: MoEModelSpec) -> int:
    """One routed expert: an MLP of expert_ffn_hidden, with biases where the model's experts
    have them (expert_bias: GPT-OSS)."""
    return mlp_parameters(model.hidden, model.expert_ffn_hidden, model.gated_mlp,
                          model.expert_bias)


def moe_dense_parameters(model: MoEModelSpec) -> int:
    """What an MoE layer holds besides its routed experts and router: attention, two norms
    and the shared experts (MLPs of expert_ffn_hidden whose biases follow the model's dense
    linear layers, as Megatron-Core's SharedExpertMLP follows add_bias_linear)."""
    shared = mlp_parameters(model.hidden, model.expert_ffn_hidden, model.gated_mlp,
                            has_linear_bias(model))
    return attention_parameters(model) + 2 * norm_parameters(model) + model.shared_experts * shared


def expert_parameters_per_gpu(model: MoEModelSpec, d: Degrees, moe_layers: Array) -> Array:
    """Routed-expert parameters one GPU holds: experts/ep experts of each of its MoE layers,
    each split etp ways."""
    return moe_layers * (model.experts / d.ep) * routed_expert_parameters(model) / d.etp


def _dense_parameters_per_gpu(model: MoEModelSpec, d: Degrees, shape: StageShape,
                              moe_layers: Array, dense_layers: Array) -> Array:
    """The rest: the vocabulary matrices of the end stages (cost.transformer_memory), the
    dense layers, and per MoE layer attention, norms and shared experts split tp ways and the
    router (experts x hidden) whole on every tensor-parallel rank."""
    vocabulary = stage_parameters(model, d, replace(shape, layers_per_stage=np.zeros(d.shape)))
    moe_dense = moe_dense_parameters(model)
    return (vocabulary + (dense_layers * layer_parameters(model) + moe_layers * moe_dense) / d.tp
            + moe_layers * router_parameters(model))


def routed_activation_bytes(model: MoEModelSpec, d: Degrees, *, act_bytes: float,
                            input_bytes: float, imbalance: float) -> Array:
    """What one MoE layer stores for the routed copies of one micro-batch's tokens on the
    busiest rank (bytes), tensor by tensor as cost.transformer_memory.mlp_activation_bytes
    counts a dense MLP: each copy's input to the first expert GEMM (gathered etp ways;
    `input_bytes`: fp8 runs keep the quantised copy the GEMM read, as Transformer Engine's
    grouped linear layers do), the first GEMM's output that the activation function reads
    (act_bytes, twice the width when gated) and the second GEMM's input (input_bytes), which
    selective recompute of the activation function (Megatron-Core's `moe_act`) drops and
    rebuilds. The router's probabilities are applied inside the activation function
    (Megatron-Core's grouped MLP), so the experts' outputs are not kept. Full recompute keeps
    none."""
    tokens = d.mb * model.seq_len / d.cp / d.tp
    routed = tokens * model.top_k * imbalance
    f = float(model.expert_ffn_hidden)
    activation_input = act_bytes * (2.0 if model.gated_mlp else 1.0) * f
    second_input = np.where(d.recompute >= 1, 0.0, input_bytes * f)
    copied = (d.etp > 1) | model.routes  # a permuted or gathered copy (one expert: the input)
    per_copy = (np.where(copied, input_bytes * model.hidden * d.etp, 0.0) + activation_input
                + second_input)
    return np.where(d.recompute >= 2, 0.0, routed * per_copy)


def offloaded_routed_bytes(model: MoEModelSpec, d: Degrees, *, act_bytes: float,
                           input_bytes: float, imbalance: float,
                           modules: tuple[str, ...]) -> Array:
    """What fine-grained activation offloading (`Efficiency.offload_modules`) takes out of one
    MoE layer's routed activations for one micro-batch (bytes, of routed_activation_bytes):
    "expert_fc1" the routed copies' input to the first expert GEMM (where a copy is kept),
    "moe_act" the activation function's input (its first-GEMM output). Nothing under full
    recompute, which keeps neither."""
    routed = d.mb * model.seq_len / d.cp / d.tp * model.top_k * imbalance
    copied = (d.etp > 1) | model.routes
    fc1 = np.where(copied, input_bytes * model.hidden * d.etp, 0.0)
    act = act_bytes * (2.0 if model.gated_mlp else 1.0) * float(model.expert_ffn_hidden)
    per_copy = (fc1 if "expert_fc1" in modules else 0.0) + (act if "moe_act" in modules else 0.0)
    return np.where(d.recompute >= 2, 0.0, routed * per_copy)


def selective_savings_bytes(model: MoEModelSpec, d: Degrees, *, act_bytes: float) -> Array:
    """What selective recompute of an MoE layer drops besides the transformer's attention
    core (bytes): the two norms' outputs (2·T·h each, Megatron-Core's `layernorm` module) and,
    with multi-head latent attention, the up-projected Q, K and V (`mla_up_proj`), the
    modules Megatron-Core's MoE recipes recompute."""
    a = attention_shape(model)
    tokens = d.mb * model.seq_len / d.cp
    norms = 4.0 * tokens * model.hidden / d.shard
    up = 2.0 * (a.q_width + a.k_width + a.v_width) * tokens / d.tp
    dropped = norms + (up if model.attention is not None else 0.0)
    return np.where(d.recompute == 1, act_bytes / 2.0 * dropped, 0.0)


def _host_bytes(model: MoEModelSpec, d: Degrees, shape: StageShape, eff: Efficiency, *,
                per_layer: Array, moe_layers: Array, sizes: dict[str, Any]) -> Array:
    """Saved activations of the micro-batches in flight that offloading keeps in host memory
    at the stage's peak (bytes): the routed tensors of `eff.offload_modules` of every
    layer-micro-batch but the one in transit, and `eff.activation_offload_layers` whole
    layers (cost.transformer_memory.offloaded_activation_bytes) of what the modules' offload
    left in them: a routed tensor already on the host is not taken out of HBM twice."""
    routed = moe_layers / shape.layers_per_stage * offloaded_routed_bytes(
        model, d, act_bytes=sizes["act_bytes"], input_bytes=sizes["input_bytes"],
        imbalance=eff.expert_imbalance, modules=eff.offload_modules)
    away = np.maximum(layers_in_flight(d, shape) - 1.0, 0.0)
    return routed * away + offloaded_activation_bytes(
        per_layer - routed, d, shape, eff.activation_offload_layers)


def footprint(model: MoEModelSpec, training: TrainingSpec, d: Degrees, eff: Efficiency
              ) -> Footprint:
    """The fullest stage's two parameter groups, the activations of the micro-batches in
    flight (cost.transformer_memory.layers_in_flight) at the stage's mean per layer less what
    goes to the host (the routed tensors of `eff.offload_modules` of all but the layer in
    transit: offloaded_routed_bytes; whole layers of `eff.activation_offload_layers`, as a
    transformer's), and the buffers: the transformer's (logits, 2 bytes each under
    Transformer Engine's in-place cross-entropy, `eff.cross_entropy` "te"; a layer rebuilt
    under full recompute) and one MoE layer's dispatch buffers (the routed copies received and
    permuted)."""
    act = activation_bytes(training.precision)
    shape = moe_stage_shape(model, d)
    n_moe, n_dense = stage_mix(model, shape.layers_per_stage)
    style = kernel_style(eff)
    sizes: dict[str, Any] = {"act_bytes": act, "flash_attention": eff.flash_attention,
                             "input_bytes": gemm_input_bytes(training.precision),
                             "norm_bytes": 4.0 if eff.autocast else None,
                             "projection_copies": style.projection_copies,
                             "gathered_inputs": eff.tensor_parallel == "dtensor"}
    dense = activation_bytes_per_layer(model, d, **sizes)
    routed = routed_activation_bytes(model, d, act_bytes=act, input_bytes=sizes["input_bytes"],
                                     imbalance=eff.expert_imbalance)
    moe = (activation_bytes_per_layer(model, d, ffn_hidden=model.shared_ffn_hidden, **sizes)
           + routed - selective_savings_bytes(model, d, act_bytes=act))
    per_layer = (n_moe * moe + n_dense * dense) / shape.layers_per_stage
    activations = per_layer * layers_in_flight(d, shape) - _host_bytes(
        model, d, shape, eff, per_layer=per_layer, moe_layers=n_moe, sizes=sizes)
    whole = replace(d, recompute=0.0 * d.recompute)
    rebuilt = (activation_bytes_per_layer(model, whole, ffn_hidden=model.shared_ffn_hidden,
                                          **sizes)
               + routed_activation_bytes(model, whole, act_bytes=act,
                                         input_bytes=sizes["input_bytes"],
                                         imbalance=eff.expert_imbalance))
    copies = d.mb * model.seq_len / d.cp / d.tp * model.top_k * eff.expert_imbalance
    dispatch = 2.0 * copies * d.etp * model.hidden * act * (1.0 if model.routes else 0.0)
    experts = expert_parameters_per_gpu(model, d, n_moe)
    one_expert_layer = expert_parameters_per_gpu(model, d, np.ones(d.shape))
    one_dense_layer = moe_dense_parameters(model) / d.tp
    one_layer = one_expert_layer + one_dense_layer
    gathered = 2.0 * (np.where(d.edp > 1.0, one_expert_layer, 0.0)
                      + np.where(d.dp * d.cp > 1.0, one_dense_layer, 0.0))
    return Footprint(
        groups=(ParamGroup(params=_dense_parameters_per_gpu(model, d, shape, n_moe, n_dense),
                           replicas=d.dp * d.cp, stride=d.tp),
                ParamGroup(params=experts, replicas=d.edp, stride=d.ep * d.etp)),
        state=state_bytes(training.precision, eff),
        resident_params=2.0 * one_layer, gathered_params=gathered,
        activations_bytes=activations,
        buffers_bytes=_buffers_bytes(model, d, shape, per_layer=per_layer,
                                     first_stage=activations,
                                     logits_bytes=held_logits_bytes(eff, tp=d.tp),
                                     sizes=sizes, rebuilt=rebuilt) + dispatch)
