"""The planned model in Megatron Core's words: each fact of cost.ModelSpec (its shape, its
architecture, its experts and latent attention) as the field of Megatron Core's config that
builds it, derived here once for every format that builds through Megatron Core
(tuner.export.megatron_model writes them as Megatron-LM's flags, tuner.export.nemo as a NeMo
recipe's recipe.model.config).

Field names from core_v0.15.0 (commit 0d7e02bd26d3eb347ad8d1bef625002babfa6df7)
megatron/core/transformer/transformer_config.py: TransformerConfig's num_layers (line 45),
mtp_num_layers (48), hidden_size (96), num_attention_heads (99), num_query_groups (116),
ffn_hidden_size (119), kv_channels (123), hidden_dropout and attention_dropout (127, 130,
default 0.1), layernorm_epsilon (140), add_bias_linear (147), gated_linear_unit (154),
activation_func (157, default F.gelu), num_moe_experts (172), normalization (189),
qk_layernorm (192), moe_shared_expert_intermediate_size (426), moe_layer_freq (442),
moe_ffn_hidden_size (447), moe_router_topk (464), moe_router_num_groups (477),
moe_router_group_topk (493), moe_grouped_gemm (528), and MLATransformerConfig's
multi_latent_attention, q_lora_rank, kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim,
v_head_dim (1552-1567); GPTModel's share_embeddings_and_output_weights,
position_embedding_type, rotary_base and max_sequence_length, which NeMo v2.4.0's GPTConfig
holds as
share_embeddings_and_output_weights, position_embedding_type, rotary_base and seq_length
(nemo/collections/llm/gpt/model/base.py, lines 292-298)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, cast

from .launch import LaunchPlan

if TYPE_CHECKING:
    from cost.moe import MoEModelSpec

__all__ = ["DROPOUT", "Code", "core_model", "layer_pattern"]

DROPOUT = 0.1
"""The hidden and attention dropout of a model trained with dropout: Megatron Core's default
(TransformerConfig.hidden_dropout, attention_dropout; Megatron-LM's --hidden-dropout)."""


class Code(str):
    """A value that is a Python expression, written as it is (not quoted) where a format
    writes Python: `([0]*3+[1]*58)`, `torch.nn.functional.silu`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def layer_pattern(m: Any) -> Code:
    """moe_layer_freq as the Python list expression Megatron-LM evaluates (and NeMo takes as
    Python), 1 for a layer with experts (cost.moe.moe_layers), run-length encoded:
    "([0]*3+[1]*58)"."""
    from cost.moe import moe_layers

    runs = itertools.groupby(map(int, moe_layers(m)))
    return Code("(" + "+".join(f"[{flag}]*{len(list(run))}" for flag, run in runs) + ")")


def core_model(lp: LaunchPlan, framework: str) -> tuple[dict[str, Any], list[str]]:
    """({Megatron Core field: value} for every fact of the planned model, in order; notes on
    what `framework` cannot build)."""
    m = lp.model
    out: dict[str, Any] = {
        "num_layers": m.layers, "hidden_size": m.hidden, "ffn_hidden_size": m.ffn_hidden,
        "num_attention_heads": m.heads}
    if getattr(m, "attention", None) is None:  # latent attention's heads are its own widths,
        out["kv_channels"] = m.head_dim  # and it has no query groups (the spec refuses
        out["num_query_groups"] = m.kv_heads  # kv_heads with it): _latent_attention
    out["gated_linear_unit"] = bool(m.gated_mlp)  # Megatron-LM's --swiglu: SiLU's gate
    out["activation_func"] = Code("torch.nn.functional." + ("silu" if m.gated_mlp else "gelu"))
    out["normalization"] = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}[m.normalization]
    out["layernorm_epsilon"] = m.norm_epsilon
    out["qk_layernorm"] = bool(m.qk_norm)
    bias, notes = _bias(m, framework)
    out["add_bias_linear"] = bias
    dropout = DROPOUT if m.dropout else 0.0
    out["hidden_dropout"] = out["attention_dropout"] = dropout
    position, more = _position(m, framework)
    out.update(position)
    out["share_embeddings_and_output_weights"] = bool(m.tied_embeddings)
    out["seq_length"] = m.seq_len
    return {**out, **_latent_attention(m), **_experts(m)}, notes + more


def _latent_attention(m: Any) -> dict[str, Any]:
    """DeepSeek's multi-head latent attention (model.attention, kind mla)."""
    mla = getattr(m, "attention", None)
    if mla is None:
        return {}
    return {"multi_latent_attention": True, "q_lora_rank": mla.q_lora_rank or None,
            "kv_lora_rank": mla.kv_lora_rank, "qk_head_dim": mla.qk_head_dim,
            "qk_pos_emb_head_dim": mla.qk_rope_head_dim, "v_head_dim": mla.v_head_dim}


def _experts(model: Any) -> dict[str, Any]:
    """A mixture of experts: the experts, their router and widths, the layers that have them
    (an int 1 where every layer has), group-limited routing, multi-token prediction, grouped
    GEMMs."""
    if model.kind != "moe":
        return {}
    m = cast("MoEModelSpec", model)
    out: dict[str, Any] = {"num_moe_experts": m.experts, "moe_router_topk": m.top_k,
                           "moe_ffn_hidden_size": m.expert_ffn_hidden}
    if m.shared_experts:
        out["moe_shared_expert_intermediate_size"] = m.shared_ffn_hidden
    out["moe_layer_freq"] = (layer_pattern(m) if m.dense_layers or m.moe_layer_freq != 1
                             else 1)
    if m.expert_groups > 1:
        out["moe_router_num_groups"] = m.expert_groups
        out["moe_router_group_topk"] = m.group_top_k
    if m.mtp_layers:
        out["mtp_num_layers"] = m.mtp_layers
    out["moe_grouped_gemm"] = True
    return out


def _bias(m: Any, framework: str) -> tuple[bool, list[str]]:
    """Whether the model keeps linear biases. One field sets them for the dense layers and the
    experts alike (TransformerConfig.add_bias_linear feeds the expert MLP), so a mixture of
    experts whose experts and other layers differ follows its experts (the bulk of its
    weights, and what Megatron Core's etp rule reads), with a note."""
    bias = bool(m.linear_bias)
    if m.kind != "moe" or bool(m.expert_bias) == bias:
        return bias, []
    experts = bool(m.expert_bias)
    said = {True: "with biases", False: "without"}
    return experts, [f"biases: the experts are {said[experts]} and the other linear layers "
                     f"{said[bias]} (model.expert_bias, model.linear_bias), which one "
                     f"{framework} setting (add_bias_linear) sets alike: the {framework} "
                     f"model has every linear layer {said[experts]}"]


def _position(m: Any, framework: str) -> tuple[dict[str, Any], list[str]]:
    """Rotary positions and their base, or learned absolute ones; ALiBi has no Megatron Core
    option (position_embedding_type: learned_absolute, rope, mrope, relative, none), so it is
    built with learned absolute positions, with a note."""
    if m.position_embedding == "rope":
        return {"position_embedding_type": "rope", "rotary_base": m.rotary_base}, []
    notes = []
    if m.position_embedding == "alibi":
        notes.append(f"position_embedding: alibi has no {framework} option (core_v0.15.0 "
                     "position_embedding_type: learned_absolute, rope, mrope, relative, none): "
                     f"the {framework} model has learned absolute positions")
    return {"position_embedding_type": "learned_absolute"}, notes
