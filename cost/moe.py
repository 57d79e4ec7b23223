"""A mixture-of-experts transformer (DeepSeek-V3, Qwen3 MoE, GPT-OSS, Mixtral) as a workload
(cost.workload.Workload).

The model is a decoder-only transformer (cost.transformer.ModelSpec: attention, norms,
embedding, logits, the dense MLP of its leading layers) whose other layers replace the MLP by
`experts` routed experts of width `expert_ffn_hidden`, `top_k` of them per token, beside
`shared_experts` experts every token passes through. Its time per micro-batch is in
cost.moe_time, its memory in cost.moe_memory, both built on the transformer's own terms.

Expert parallelism follows Megatron-Core's MoE parallel folding (Liu et al., "MoE Parallel
Folding", arXiv 2504.14960): the tp·cp·dp ranks of a pipeline stage are regrouped for the
expert layers into etp (tensor parallelism inside an expert) x ep (experts split across ranks)
x expert-DP (replicas), in that rank order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from . import moe_memory, moe_time
from .codec import PLAN_KNOBS
from .degrees import Degrees
from .efficiency import Efficiency
from .flops import (
    attention_flops_per_token,
    layer_parameters,
    vocabulary_parameters,
)
from .inputs import Array, ClusterSpec, TrainingSpec, Value
from .moe_memory import moe_dense_parameters, routed_expert_parameters, router_parameters
from .precision import element_bytes
from .transformer import ModelSpec, transformer_rules, width_rules
from .workload import Footprint, Rule, StageCost

if TYPE_CHECKING:
    from .layer_costs import LayerCosts

__all__ = ["MoEModelSpec", "moe_layer_count", "moe_layer_parameters", "moe_layers",
           "router_parameters"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MoEModelSpec(ModelSpec):
    """A mixture-of-experts transformer, per shared/SPEC.md `model` (`experts`, `top_k`,
    `expert_ffn_hidden`, `shared_experts`, `dense_layers`, `moe_layer_freq`); `ffn_hidden` is
    the width of the dense layers' MLP."""

    experts: int
    top_k: int
    expert_ffn_hidden: int
    shared_experts: int = 0
    dense_layers: int = 0
    moe_layer_freq: int = 1
    mtp_layers: int = 0  # multi-token-prediction modules trained beside the model (DeepSeek-V3)
    expert_groups: int = 1  # group-limited routing: the experts' groups (DeepSeek-V3's n_group)
    group_top_k: int = 1  # groups each token's experts are chosen from (topk_group)
    expert_bias: bool = False  # both expert GEMMs add a bias (GPT-OSS: mlp1_bias, mlp2_bias)
    expert_clamp: bool = False  # the gated activation clamps its halves (GPT-OSS: limit 7.0)

    kind: ClassVar[str] = "moe"
    knobs: ClassVar[frozenset[str]] = frozenset(PLAN_KNOBS)

    @property
    def routes(self) -> bool:
        """True when tokens are routed: a single expert is the dense MLP, with no router and
        nothing to permute or dispatch."""
        return self.experts > 1

    @property
    def shared_ffn_hidden(self) -> int:
        """Width of the shared experts taken together: an MLP every token passes through."""
        return self.shared_experts * self.expert_ffn_hidden

    def describe(self) -> str:
        return (f"{self.name}: heads={self.heads}, layers={self.layers}, "
                f"experts={self.experts}, seq_len={self.seq_len}")

    def parameters(self) -> int:
        """Every parameter: dense layers, MoE layers with all their experts, vocabulary."""
        return self._parameters(self.experts)

    def active_parameters(self) -> int:
        """Parameters one token passes through: its top_k routed experts per MoE layer."""
        return self._parameters(self.top_k)

    def _parameters(self, experts: int) -> int:
        """The model's parameters with `experts` routed experts per MoE layer; the
        multi-token-prediction modules are not part of the model (DeepSeek-V3's 671B)."""
        moe = moe_layer_count(self)
        return ((self.layers - moe) * layer_parameters(self)
                + moe * moe_layer_parameters(self, experts=experts)
                + vocabulary_parameters(self))

    def rules(self, training: TrainingSpec) -> tuple[Rule, ...]:
        return moe_rules(self)

    def stage_cost(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                   eff: Efficiency) -> StageCost:
        return moe_time.stage_cost(self, cluster, training, d, eff)

    def footprint(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                  eff: Efficiency) -> Footprint:
        return moe_memory.footprint(self, training, d, eff)

    def layer_costs(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                    eff: Efficiency) -> LayerCosts | None:
        """None: dense and expert layers differ (dense_layers, moe_layer_freq), so the layers
        cannot be split over pools of different GPUs by one layer's speed; across pools a
        mixture of experts trains data-parallel (placement: data)."""
        return None

    def model_flops_per_step(self, training: TrainingSpec) -> float:
        """6·N_active + attention per token (shared/SPEC.md): N_active counts the matmul
        parameters a token passes through (top_k routed and the shared experts, the router,
        attention, the dense layers, the logits; not the input embedding, a lookup), and each
        multi-token-prediction module's MoE layer, projection and logits (as Megatron-Core
        counts them)."""
        moe = moe_layer_count(self)
        layer = moe_layer_parameters(self, experts=self.top_k)
        logits = self.vocab * self.hidden
        matmul = ((self.layers - moe) * layer_parameters(self) + moe * layer + logits
                  + self.mtp_layers * (layer + 2 * self.hidden * self.hidden + logits))
        attention = attention_flops_per_token(self) * (1.0 + self.mtp_layers / self.layers)
        return (6.0 * matmul + attention) * self.units_per_step(training)

    def checkpoint_bytes(self, training: TrainingSpec) -> float:
        """Weights and optimizer state of every parameter, every expert included."""
        sizes = element_bytes(training.precision)
        return float(self.parameters()) * (sizes["weight"] + sizes["optimizer"])


def moe_layers(model: MoEModelSpec) -> tuple[bool, ...]:
    """Which layers have experts, in order: layer i (from 0) when i >= dense_layers and
    i % moe_layer_freq == 0 (HF DeepSeek-V3's first_k_dense_replace and moe_layer_freq;
    Megatron-Core's --moe-layer-freq)."""
    return tuple(i >= model.dense_layers and i % model.moe_layer_freq == 0
                 for i in range(model.layers))


def moe_layer_count(model: MoEModelSpec) -> int:
    """Layers with experts (moe_layers)."""
    return sum(moe_layers(model))


def moe_layer_parameters(model: MoEModelSpec, *, experts: int) -> int:
    """One MoE layer holding `experts` routed experts: attention, two norms and the shared
    experts (moe_memory.moe_dense_parameters), the router, and the routed experts (each an
    MLP of expert_ffn_hidden, moe_memory.routed_expert_parameters)."""
    return (moe_dense_parameters(model) + router_parameters(model)
            + experts * routed_expert_parameters(model))


def _divides(d: Value, n: Value) -> Array:
    return np.isclose(np.mod(n, np.maximum(d, 1.0)), 0.0)


def _one(value: Array) -> float:
    return float(np.ravel(value)[0])


def moe_rules(model: MoEModelSpec) -> tuple[Rule, ...]:
    """The transformer's rules on heads and sequence; pipeline chunks of any size (Megatron's
    --pipeline-model-parallel-layout: every chunk holds a layer, the embedding or the loss,
    as Qwen3-235B's 94 layers run on 32 x 3 chunks); ep divides the experts; the
    expert layout folds into the attention layout (ep·etp divides tp·cp·dp, Megatron-Core's
    parallel folding); etp divides the expert width, tp the dense layers' and the shared
    experts' (cost.transformer.width_rules); tp > 1 with sequence parallelism
    (Megatron-LM refuses expert with tensor parallelism without it)."""
    from .validity import passing_values

    kept = tuple(r for r in transformer_rules(model) if r.name not in ("layers", "tp_width"))
    widths: dict[str, int] = {}  # what tp splits: dense layers' MLPs, shared experts
    if moe_layer_count(model) < model.layers:
        widths["ffn_hidden"] = model.ffn_hidden
    if model.shared_experts:
        widths["shared_experts x expert_ffn_hidden"] = model.shared_ffn_hidden

    def chunks(d: Degrees) -> Array:
        return d.pp * d.vs > model.layers + 2

    def experts(d: Degrees) -> Array:
        return ~_divides(d.ep, model.experts) | (d.ep < 1)

    def fold(d: Degrees) -> Array:  # a dp that is not whole is the root cause, said first
        ranks = d.tp * d.cp * d.dp
        return np.isclose(ranks, np.round(ranks)) & ~_divides(d.ep * d.etp, ranks)

    def width(d: Degrees) -> Array:
        return ~_divides(d.etp, model.expert_ffn_hidden) | (d.etp < 1)

    def sequence(d: Degrees) -> Array:
        return (d.tp > 1) & (d.sp < 1)

    heads = next(r.broken for r in kept if r.name == "tp_heads")
    return (*kept, *width_rules(widths, heads),
            Rule("layers", ("pp", "virtual_stages"), chunks,
                 lambda d: f"pp·virtual_stages = {_one(d.pp * d.vs):g} is more than "
                           f"layers + 2 = {model.layers + 2}: every pipeline chunk needs a layer "
                           "(or the embedding, or the loss)"),
            Rule("ep_experts", ("ep",), experts,
                 lambda d: f"ep={_one(d.ep):g} does not divide experts={model.experts}; choose "
                           "one of "
                           f"{passing_values(experts, d, 'ep', range(1, model.experts + 1))}"),
            Rule("etp_width", ("etp",), width,
                 lambda d: f"etp={_one(d.etp):g} does not divide "
                           f"expert_ffn_hidden={model.expert_ffn_hidden}; choose a divisor"),
            Rule("ep_fold", ("ep", "etp", "dp", "tp", "pp", "cp", "gpus"), fold,
                 lambda d: f"ep·etp = {_one(d.ep * d.etp):g} does not divide tp·cp·dp = "
                           f"{_one(d.tp * d.cp * d.dp):g}, the ranks of a pipeline stage the "
                           "experts fold into; choose ep and etp whose product divides it"),
            Rule("moe_sequence_parallel", ("tp", "sequence_parallel"), sequence,
                 lambda d: f"tp={_one(d.tp):g} in a mixture of experts needs "
                           "sequence_parallel: true (tokens enter the experts split across "
                           "the tensor-parallel ranks)"))
