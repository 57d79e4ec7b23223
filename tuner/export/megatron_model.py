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
them trains another model; this module writes each fact of the model (cost.ModelSpec's
architecture fields) that differs from those defaults."""

from __future__ import annotations

from typing import Any

from .launch import LaunchPlan

__all__ = ["architecture"]

_MEGATRON_EPSILON = 1e-5
_MEGATRON_ROTARY_BASE = 10000


def architecture(lp: LaunchPlan) -> tuple[list[str], list[str]]:
    """(the flags that build the model's architecture, notes on what Megatron-LM cannot
    build): attention groups, MLP, norms, biases, positions, dropout, embeddings."""
    m = lp.model
    out = _attention(m)
    if m.gated_mlp:
        out.append("--swiglu")
    if not m.tied_embeddings:
        out.append("--untie-embeddings-and-output-weights")
    if m.normalization == "rmsnorm":
        out += ["--normalization", "RMSNorm"]
    if m.norm_epsilon != _MEGATRON_EPSILON:
        out += ["--norm-epsilon", f"{m.norm_epsilon:g}"]
    if m.qk_norm:
        out.append("--qk-layernorm")
    if not m.dropout:
        out += ["--attention-dropout", "0.0", "--hidden-dropout", "0.0"]
    bias, notes = _bias(m)
    if not bias:
        out.append("--disable-bias-linear")
    position, more = _position(m)
    return out + position, notes + more


def _attention(m: Any) -> list[str]:
    """Grouped-query attention's groups; none for latent attention, whose keys and values
    are per head (MLATransformerConfig takes no query groups; the spec refuses kv_heads with
    it)."""
    if getattr(m, "attention", None) is None and m.kv_heads != m.heads:
        return ["--group-query-attention", "--num-query-groups", str(m.kv_heads)]
    return []


def _bias(m: Any) -> tuple[bool, list[str]]:
    """Whether the command keeps Megatron-LM's linear biases. One flag sets them for the dense
    layers and the experts alike (add_bias_linear; TransformerConfig.add_bias_linear feeds
    the expert MLP), so a mixture of experts whose experts and other layers differ follows
    its experts (the bulk of its weights, and what Megatron Core's etp rule reads), with a
    note."""
    bias = bool(m.linear_bias)
    if m.kind != "moe" or bool(m.expert_bias) == bias:
        return bias, []
    experts = bool(m.expert_bias)
    said = {True: "with biases", False: "without"}
    return experts, [f"biases: the experts are {said[experts]} and the other linear layers "
                     f"{said[bias]} (model.expert_bias, model.linear_bias), which one Megatron-LM "
                     f"flag sets alike: the command builds every linear layer "
                     f"{said[experts]}"]


def _position(m: Any) -> tuple[list[str], list[str]]:
    """Rotary positions and their base; learned absolute ones are the default; ALiBi has no
    Megatron-LM option (--position-embedding-type: learned_absolute, rope, mrope, relative,
    none)."""
    if m.position_embedding == "rope":
        base = (["--rotary-base", str(m.rotary_base)]
                if m.rotary_base != _MEGATRON_ROTARY_BASE else [])
        return ["--position-embedding-type", "rope", *base], []
    if m.position_embedding == "alibi":
        return [], ["position_embedding: alibi has no Megatron-LM option (core_v0.15.0 "
                    "--position-embedding-type: learned_absolute, rope, mrope, relative, "
                    "none): the command builds learned absolute positions"]
    return [], []
