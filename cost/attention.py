"""The shape of a transformer's attention: grouped-query attention with an explicit head width,
or DeepSeek's multi-head latent attention (MLA).

`AttentionShape` gives the widths that the GEMMs, the attention core, the activations and the
context-parallel exchange read; a model with default fields (head width hidden / heads, no MLA)
has Q and the output projection `hidden` wide and K and V `kv_heads · head_dim` wide, as
before this generalisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .transformer import ModelSpec

__all__ = ["AttentionShape", "attention_shape"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionShape:
    """Widths (elements per token) of one layer's attention, all heads, unsharded."""

    qk_head_dim: int  # width of one query (and key) head in QK^T
    v_head_dim: int  # width of one value head in scores·V
    q_width: int  # Q: heads · qk_head_dim
    k_width: int  # K as attention reads it
    v_width: int  # V as attention reads it
    out_width: int  # input of the output projection: heads · v_head_dim
    latent_width: int  # MLA's down-projected latents (q_lora + kv_lora + rope), else 0


def attention_shape(model: ModelSpec) -> AttentionShape:
    """GQA: Q is heads·head_dim wide, K and V kv_heads·head_dim (Ainslie et al. 2023). MLA:
    K and V are expanded per head from the latent, Q and K heads·(qk + rope) wide, V
    heads·v_head_dim (DeepSeek-V3 inference/model.py, MLA.forward)."""
    mla = model.attention
    if mla is None:
        hd = model.head_dim
        return AttentionShape(qk_head_dim=hd, v_head_dim=hd, q_width=model.heads * hd,
                              k_width=model.kv_heads * hd, v_width=model.kv_heads * hd,
                              out_width=model.heads * hd, latent_width=0)
    qk = mla.qk_head_dim + mla.qk_rope_head_dim
    return AttentionShape(qk_head_dim=qk, v_head_dim=mla.v_head_dim,
                          q_width=model.heads * qk, k_width=model.heads * qk,
                          v_width=model.heads * mla.v_head_dim,
                          out_width=model.heads * mla.v_head_dim,
                          latent_width=mla.q_lora_rank + mla.kv_lora_rank
                          + mla.qk_rope_head_dim)
