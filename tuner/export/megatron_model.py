"""The architecture a Megatron-LM command builds: what the model's shape does not say and
Megatron-LM's defaults would otherwise decide.

Megatron-LM's defaults (megatron/training/arguments.py at core_v0.15.0, commit
0d7e02bd26d3eb347ad8d1bef625002babfa6df7) are GPT-2's layout: --normalization LayerNorm
(line 1628), a bias on every linear layer (add_bias_linear unless --disable-bias-linear, line
2191; experts included), learned absolute positions (--position-embedding-type
learned_absolute, line 1588; rope with --rotary-base, default 10000, line 1598), no QK norm
(--qk-layernorm, line 3023), --norm-epsilon 1e-5 (line 1631), hidden and attention dropout
0.1 (lines 1876-1878), a GeLU MLP (--swiglu for a gated one) and multi-head attention
(--group-query-attention with --num-query-groups, line 1568). A Llama written without
them trains another model; this module writes each fact of the model (Megatron Core's fields,
tuner.export.core_model) that differs from those defaults."""

from __future__ import annotations

from typing import Any

from .core_model import DROPOUT

__all__ = ["architecture"]

_MEGATRON_EPSILON = 1e-5
_MEGATRON_ROTARY_BASE = 10000


def architecture(core: dict[str, Any]) -> list[str]:
    """The flags that build the model's architecture from its Megatron Core fields
    (tuner.export.core_model, whose notes say what Megatron-LM cannot build): attention
    groups, MLP, norms, biases, positions, dropout, embeddings."""
    out = _attention(core)
    if core["gated_linear_unit"]:
        out.append("--swiglu")
    if not core["share_embeddings_and_output_weights"]:
        out.append("--untie-embeddings-and-output-weights")
    if core["normalization"] != "LayerNorm":
        out += ["--normalization", core["normalization"]]
    if core["layernorm_epsilon"] != _MEGATRON_EPSILON:
        out += ["--norm-epsilon", f"{core['layernorm_epsilon']:g}"]
    if core["qk_layernorm"]:
        out.append("--qk-layernorm")
    if (core["attention_dropout"], core["hidden_dropout"]) != (DROPOUT, DROPOUT):
        out += ["--attention-dropout", str(core["attention_dropout"]),
                "--hidden-dropout", str(core["hidden_dropout"])]
    if not core["add_bias_linear"]:
        out.append("--disable-bias-linear")
    return out + _position(core)


def _attention(core: dict[str, Any]) -> list[str]:
    """Grouped-query attention's groups (none for latent attention: core_model)."""
    groups = core.get("num_query_groups", core["num_attention_heads"])
    if groups != core["num_attention_heads"]:
        return ["--group-query-attention", "--num-query-groups", str(groups)]
    return []


def _position(core: dict[str, Any]) -> list[str]:
    """Rotary positions and their base; learned absolute ones are the default."""
    if core["position_embedding_type"] != "rope":
        return []
    base = core["rotary_base"]
    return ["--position-embedding-type", "rope",
            *(["--rotary-base", str(base)] if base != _MEGATRON_ROTARY_BASE else [])]
