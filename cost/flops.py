"""Parameter counts and FLOPs of a decoder-only transformer.

GEMM shapes follow Megatron-LM's layer (Shoeybi et al. 2019; Narayanan et al. SC'21, sec. 3.2):
QKV and the first MLP matrix are column-parallel, the attention output and the second MLP
matrix row-parallel, so every GEMM's sharded dimension is divided by the tensor-parallel size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .inputs import Value

if TYPE_CHECKING:
    from .transformer import ModelSpec

__all__ = [
    "LayerGemm",
    "attention_core_flops",
    "layer_gemms",
    "layer_parameters",
    "matmul_parameters",
    "model_flops_per_token",
    "parameter_count",
]


def layer_parameters(model: ModelSpec) -> int:
    """Weights and biases of one layer: attention (QKV with GQA, output), MLP, two norms."""
    h, kv, f = model.hidden, model.kv_hidden, model.ffn_hidden
    attention = h * (h + 2 * kv) + (h + 2 * kv) + h * h + h
    mlp_in = h * f * (2 if model.gated_mlp else 1) + f * (2 if model.gated_mlp else 1)
    mlp = mlp_in + f * h + h
    return attention + mlp + 4 * h


def parameter_count(model: ModelSpec) -> int:
    """All parameters: layers, input embedding, output layer unless tied, final norm."""
    embeddings = model.vocab * model.hidden * (1 if model.tied_embeddings else 2)
    return model.layers * layer_parameters(model) + embeddings + 2 * model.hidden


def matmul_parameters(model: ModelSpec) -> int:
    """Parameters that take part in a matrix multiply: the layers plus the logits matrix.

    This is the N of the 6·N FLOPs-per-token rule (the input embedding is a lookup)."""
    return model.layers * layer_parameters(model) + model.vocab * model.hidden


def model_flops_per_token(model: ModelSpec, *, causal: bool = True) -> float:
    """Model FLOPs per token, forward and backward, no recompute: 6·N plus the attention core.

    N from matmul_parameters (Kaplan et al. 2020). Attention as computed by a causal model: a
    token attends to the tokens before it, s/2 on average, so QK^T and scores·V cost
    2 matmuls x 2 FLOPs x h x s/2 forward and twice that backward: 6·layers·hidden·seq
    (shared/SPEC.md `model_flops_per_gpu`; Megatron-Core's causal count). `causal=False`
    gives PaLM's convention, which counts the masked half too: 12·layers·hidden·seq
    (Chowdhery et al. 2022, appendix B: `mfu_palm`)."""
    attention = (6.0 if causal else 12.0) * model.layers * model.hidden * model.seq_len
    return 6.0 * matmul_parameters(model) + attention


@dataclass(frozen=True, slots=True)
class LayerGemm:
    """One GEMM of a layer's forward pass for `tokens` tokens: (tokens x k) @ (k x n)."""

    name: str
    k: float
    n: float
    tp_sharded_k: bool  # row-parallel: k divided by tp; else column-parallel: n divided by tp


def layer_gemms(model: ModelSpec) -> tuple[LayerGemm, ...]:
    """The four weight GEMMs of one layer, unsharded; callers divide the sharded side by tp."""
    h, kv, f = model.hidden, model.kv_hidden, model.ffn_hidden
    return (
        LayerGemm("qkv", h, h + 2 * kv, tp_sharded_k=False),
        LayerGemm("attention_out", h, h, tp_sharded_k=True),
        LayerGemm("mlp_in", h, f * (2 if model.gated_mlp else 1), tp_sharded_k=False),
        LayerGemm("mlp_out", f, h, tp_sharded_k=True),
    )


def attention_core_flops(model: ModelSpec, tokens: Value, keys: Value) -> Value:
    """Forward FLOPs of QK^T and scores·V for `tokens` queries over `keys` keys, all heads.

    2 matmuls x 2 FLOPs x tokens x keys x hidden (no causal saving, as in PaLM's count)."""
    return 4.0 * tokens * keys * model.hidden
