"""Parameter counts and FLOPs of a decoder-only transformer.

GEMM shapes follow Megatron-LM's layer (Shoeybi et al. 2019; Narayanan et al. SC'21, sec. 3.2):
QKV and the first MLP matrix are column-parallel, the attention output and the second MLP
matrix row-parallel, so every GEMM's sharded dimension is divided by the tensor-parallel size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .attention import attention_shape
from .inputs import Value

if TYPE_CHECKING:
    from .transformer import ModelSpec

__all__ = [
    "LayerGemm",
    "attention_core_flops",
    "attention_flops_per_token",
    "attention_gemms",
    "attention_parameters",
    "has_linear_bias",
    "layer_gemms",
    "layer_parameters",
    "matmul_parameters",
    "mlp_gemms",
    "mlp_parameters",
    "model_flops_per_token",
    "norm_parameters",
    "normalization",
    "parameter_count",
    "vocabulary_parameters",
]


def has_linear_bias(model: ModelSpec) -> bool:
    """Whether the dense linear layers add a bias: as the model says, else by its family (a
    gated, SwiGLU-style MLP goes with none: Llama, Mistral, Qwen, DeepSeek; the GPT-2/3
    layout, Megatron-LM's default add_bias_linear, with one)."""
    return (not model.gated_mlp) if model.linear_bias is None else model.linear_bias


def norm_parameters(model: ModelSpec, width: int | None = None) -> int:
    """One normalization's parameters over `width` (default the hidden size): LayerNorm's
    weight and bias, RMSNorm's weight only (Zhang and Sennrich 2019); a model that does not
    say has its family's (RMSNorm with a gated MLP, else LayerNorm)."""
    w = model.hidden if width is None else width
    return w * (1 if normalization(model) == "rmsnorm" else 2)


def normalization(model: ModelSpec) -> str:
    """The model's normalization, else its family's: RMSNorm with a gated MLP (Llama), else
    LayerNorm (GPT-2/3, Megatron-LM's default)."""
    return model.normalization or ("rmsnorm" if model.gated_mlp else "layernorm")


def attention_parameters(model: ModelSpec) -> int:
    """Weights and biases of one layer's attention. GQA: QKV and the output projection, each
    with its bias where the model's linear layers have one, and with qk_norm the query's and
    the key's norm over one head (shared by the heads: Qwen3, Megatron-Core's
    qk_layernorm). MLA (DeepSeek-V3, no biases): the
    query and key/value down projections, their latent norms, the up projections and the
    output projection."""
    a = attention_shape(model)
    h = model.hidden
    if model.attention is None:
        qkv = a.q_width + a.k_width + a.v_width
        bias = (qkv + h) if has_linear_bias(model) else 0
        qk_norms = 2 * norm_parameters(model, a.qk_head_dim) if model.qk_norm else 0
        return h * qkv + a.out_width * h + bias + qk_norms
    mla = model.attention
    q = (h * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * a.q_width
         if mla.q_lora_rank else h * a.q_width)  # down, its norm and up; or straight
    kv = (h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
          + mla.kv_lora_rank * model.heads * (mla.qk_head_dim + mla.v_head_dim))
    return q + kv + a.out_width * h


def mlp_parameters(hidden: int, ffn_hidden: int, gated: bool, bias: bool) -> int:
    """Weights (and biases, with `bias`) of one MLP (or one expert) of width `ffn_hidden`:
    the first matrix (two for a gated, SwiGLU-style MLP) and the second."""
    width = ffn_hidden * (2 if gated else 1)
    return hidden * width + ffn_hidden * hidden + ((width + hidden) if bias else 0)


def layer_parameters(model: ModelSpec) -> int:
    """Weights and biases of one layer: attention, MLP, two norms."""
    return (attention_parameters(model)
            + mlp_parameters(model.hidden, model.ffn_hidden, model.gated_mlp,
                             has_linear_bias(model))
            + 2 * norm_parameters(model))


def parameter_count(model: ModelSpec) -> int:
    """All parameters: layers, input embedding, output layer unless tied, final norm."""
    return model.layers * layer_parameters(model) + vocabulary_parameters(model)


def vocabulary_parameters(model: ModelSpec) -> int:
    """The input embedding, the output layer unless tied, and the final norm."""
    embeddings = model.vocab * model.hidden * (1 if model.tied_embeddings else 2)
    return embeddings + norm_parameters(model)


def matmul_parameters(model: ModelSpec) -> int:
    """Parameters that take part in a matrix multiply: the layers plus the logits matrix.

    This is the N of the 6·N FLOPs-per-token rule (the input embedding is a lookup)."""
    return model.layers * layer_parameters(model) + model.vocab * model.hidden


def attention_flops_per_token(model: ModelSpec, *, causal: bool = True) -> float:
    """Attention-core FLOPs per token of all layers, forward and backward (3x the forward).

    As computed by a causal model a token attends to the tokens before it, s/2 on average:
    6·layers·hidden·seq for standard attention (shared/SPEC.md `model_flops_per_gpu`;
    Megatron-Core's causal count). `causal=False` gives PaLM's convention, which counts the
    masked half too: 12·layers·hidden·seq (Chowdhery et al. 2022, appendix B: `mfu_palm`)."""
    full = 3.0 * model.layers * float(attention_core_flops(model, 1.0, model.seq_len))
    return 0.5 * full if causal else full


def model_flops_per_token(model: ModelSpec, *, causal: bool = True) -> float:
    """Model FLOPs per token, forward and backward, no recompute: 6·N plus the attention core
    (attention_flops_per_token); N from matmul_parameters (Kaplan et al. 2020)."""
    return 6.0 * matmul_parameters(model) + attention_flops_per_token(model, causal=causal)


@dataclass(frozen=True, slots=True)
class LayerGemm:
    """One GEMM of a layer's forward pass for `tokens` tokens: (tokens x k) @ (k x n)."""

    name: str
    k: float
    n: float
    tp_sharded_k: bool  # row-parallel: k divided by tp; else column-parallel: n divided by tp
    replicated: bool = False  # neither: every tensor-parallel rank computes it whole

    def per_gpu(self, tp: Value) -> tuple[Value, Value]:
        """(k, n) on one of `tp` tensor-parallel ranks."""
        if self.replicated:
            return self.k, self.n
        if self.tp_sharded_k:
            return self.k / tp, self.n
        return self.k, self.n / tp


def attention_gemms(model: ModelSpec) -> tuple[LayerGemm, ...]:
    """The weight GEMMs of one layer's attention, unsharded. GQA: QKV (column-parallel) and
    the output projection (row-parallel). MLA: the down projections are computed whole on
    every tensor-parallel rank, the up projections column-parallel (Megatron-Core's
    MLASelfAttention); without a query latent the query projection is column-parallel."""
    a = attention_shape(model)
    h = model.hidden
    out = LayerGemm("attention_out", a.out_width, h, tp_sharded_k=True)
    mla = model.attention
    if mla is None:
        return (LayerGemm("qkv", h, a.q_width + a.k_width + a.v_width, tp_sharded_k=False),
                out)
    kv_up = model.heads * (mla.qk_head_dim + mla.v_head_dim)
    query = ((LayerGemm("q_down", h, mla.q_lora_rank, tp_sharded_k=False, replicated=True),
              LayerGemm("q_up", mla.q_lora_rank, a.q_width, tp_sharded_k=False))
             if mla.q_lora_rank else (LayerGemm("q", h, a.q_width, tp_sharded_k=False),))
    return (
        *query,
        LayerGemm("kv_down", h, mla.kv_lora_rank + mla.qk_rope_head_dim, tp_sharded_k=False,
                  replicated=True),
        LayerGemm("kv_up", mla.kv_lora_rank, kv_up, tp_sharded_k=False),
        out,
    )


def mlp_gemms(hidden: float, ffn_hidden: float, gated: bool) -> tuple[LayerGemm, ...]:
    """The two weight GEMMs of an MLP (or of one expert) of width `ffn_hidden`: column- then
    row-parallel; none for a zero width."""
    if ffn_hidden <= 0:
        return ()
    return (LayerGemm("mlp_in", hidden, ffn_hidden * (2 if gated else 1), tp_sharded_k=False),
            LayerGemm("mlp_out", ffn_hidden, hidden, tp_sharded_k=True))


def layer_gemms(model: ModelSpec, ffn_hidden: float | None = None) -> tuple[LayerGemm, ...]:
    """The weight GEMMs of one layer, unsharded (LayerGemm.per_gpu shards them): attention,
    then the MLP of width `ffn_hidden` (default: the model's; 0: none, as in a mixture of
    experts' layer without shared experts)."""
    f = model.ffn_hidden if ffn_hidden is None else ffn_hidden
    return (*attention_gemms(model), *mlp_gemms(model.hidden, f, model.gated_mlp))


def attention_core_flops(model: ModelSpec, tokens: Value, keys: Value) -> Value:
    """Forward FLOPs of QK^T and scores·V for `tokens` queries over `keys` keys, all heads.

    2 FLOPs x tokens x keys x heads x (qk_head_dim + v_head_dim): 4·tokens·keys·hidden for
    standard attention (no causal saving, as in PaLM's count)."""
    a = attention_shape(model)
    return 2.0 * tokens * keys * model.heads * (a.qk_head_dim + a.v_head_dim)
