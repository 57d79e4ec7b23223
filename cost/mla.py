"""DeepSeek's multi-head latent attention (MLA) as a transformer's attention (ModelSpec.attention;
cost.attention gives the widths it implies). Imported where a model has it, so that a model with
grouped-query attention does not make its class (issue 14)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MLA"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3, arXiv 2405.04434 sec. 2.1; 2412.19437
    sec. 2.1): queries and keys/values are projected down to low-rank latents (`q_lora_rank`,
    `kv_lora_rank`) and up again per head; each query/key head is `qk_head_dim` wide without
    position and `qk_rope_head_dim` wide with RoPE (a key part shared by all heads), each
    value head `v_head_dim` wide. A `q_lora_rank` of 0: queries are projected straight from
    the hidden state (DeepSeek-V2-Lite, Megatron-Core's linear_q_proj where q_lora_rank is
    None)."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    kind: str = "mla"
