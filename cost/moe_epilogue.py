"""Element-wise work around the experts' GEMMs that a model's expert biases and clamped gated
activation add, as the training software runs it.

GPT-OSS's experts (openai/gpt-oss gpt_oss/torch/model.py, MLPBlock and swiglu) add a bias to
both GEMMs (mlp1_bias, mlp2_bias) and clamp their gated activation's two halves
(swiglu(x, alpha=1.702, limit=7.0): the gate at most 7, the linear half within +-7). A plain
SwiGLU expert runs its activation as one fused kernel (cost.moe_time's
`elementwise_passes_ffn`); what the biases and the clamp add depends on the stack
(`Efficiency.expert_epilogue`, EPILOGUES):

- "megatron": Megatron-Core's TEGroupedMLP without Transformer Engine's operation fuser (its
  default, and what Megatron-Bridge's performance scripts force: v0.4.0
  scripts/performance/utils/overrides.py:63-64 and HEAD src/megatron/bridge/perf_recipes/
  _common.py:67-68 set use_transformer_engine_op_fuser = False). Core 0.15-0.18
  transformer/moe/experts.py: linear_fc1 adds its bias inside Transformer Engine's grouped GEMM
  (skip_bias_add=False; TE GroupedLinear's cuBLAS bias epilogue, its gradient fused in the
  weight-gradient GEMM, TE v2.14 module/grouped_linear.py:379); the clamp runs eagerly before
  the fused activation (fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl: two
  `clamp`s of the halves and a `torch.cat`); linear_fc2 returns its bias
  (skip_bias_add=True) and `_apply_bias` adds bias x routing probability expert by expert:
  `torch.cat([t + b * p for t, b, p in zip(split(out), biases, split(probs))]).to(dtype)`
  (core_v0.17.0 experts.py:251-267).
- "automodel": NeMo Automodel's GroupedExpertsDeepEP (components/moe/experts.py at
  e4581201, _apply_bias and quick_geglu_deepep): both biases added expert by expert after
  each grouped GEMM (`torch._grouped_mm` takes no bias), the clamp inside the
  torch.compile'd activation.
- "fused": Transformer Engine's operation fuser (Megatron-Core's
  use_transformer_engine_op_fuser: GroupedLinear, ScaledClampedQGeGLU and GroupedLinear ops
  with their biases, core_v0.18.0 experts.py:374-500): nothing beyond the activation.

A bias weighted by the routing probability is computed at the probability's precision: fp32
with the flex dispatchers (`Efficiency.ep_dedup`: DeepEP and HybridEP "only support float32
probs", core_v0.17.0 transformer/moe/token_dispatcher.py:1033-1039 and 1178-1184), else the
activation's (the router's logits dtype, Megatron-Core's default moe_router_dtype None).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .errors import named
from .inputs import Array, Value

if TYPE_CHECKING:
    from .efficiency import Efficiency
    from .moe import MoEModelSpec

__all__ = ["EPILOGUES", "EpilogueCost", "EpilogueStyle", "epilogue_cost"]

PROBABILITY_BYTES_FLEX = 4.0
"""Bytes of a routing probability behind DeepEP or HybridEP (fp32, see the module)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EpilogueStyle:
    """Which of the experts' bias and clamp work a stack runs as separate eager kernels."""

    fc1_bias: bool  # the first GEMM's bias added expert by expert
    fc2_bias: bool  # the second GEMM's bias x routing probability, expert by expert
    clamp: bool  # the clamp of the gated activation's halves, then their concatenation


EPILOGUES = {
    "megatron": EpilogueStyle(fc1_bias=False, fc2_bias=True, clamp=True),
    "automodel": EpilogueStyle(fc1_bias=True, fc2_bias=True, clamp=False),
    "fused": EpilogueStyle(fc1_bias=False, fc2_bias=False, clamp=False),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class EpilogueCost:
    """Per row of the experts' GEMMs (a routed copy of a token; etp rows with expert tensor
    parallelism, each expert_ffn_hidden/etp wide): HBM bytes of the eager epilogue forward
    (`forward_bytes`, of which `activation_bytes` is redone with the activation under
    selective recompute) and backward; and the kernels it launches per micro-batch forward
    and backward, as `fixed + per_expert x local experts`."""

    forward_bytes: Array
    activation_bytes: Array
    backward_bytes: Array
    forward_kernels: float
    forward_kernels_per_expert: float
    backward_kernels: float
    backward_kernels_per_expert: float

    def kernels(self, local_experts: Value, *, backward: bool) -> Array:
        """Kernels one MoE layer launches per micro-batch, forward (or backward)."""
        if backward:
            return np.asarray(self.backward_kernels
                              + self.backward_kernels_per_expert * np.asarray(local_experts))
        return np.asarray(self.forward_kernels
                          + self.forward_kernels_per_expert * np.asarray(local_experts))


def _style(eff: Efficiency) -> EpilogueStyle:
    return named(EPILOGUES, eff.expert_epilogue, field="stack.expert_epilogue")


def epilogue_cost(model: MoEModelSpec, eff: Efficiency, *, act_bytes: float, etp: Value
                  ) -> EpilogueCost:
    """The eager epilogue of one row of the experts' GEMMs (bytes a = act_bytes per activation
    element, p per probability, first GEMM output w = (2 if gated) x expert_ffn_hidden / etp
    wide, second h = hidden wide), summed over what the stack runs eagerly (EpilogueStyle):

    - clamp (a clamped gated activation): forward two clamps read and write the halves, the
      concatenation reads and writes w (4aw); backward each clamp's gradient reads its input
      and gradient and writes one, and the split's gradient is concatenated (3aw + 2aw).
    - first bias: forward add (read, write) and the concatenation of the experts' pieces
      (4aw); backward the bias gradient's row sum reads w, the split's gradient is
      concatenated (3aw).
    - second bias x probability: forward b·p written, t + b·p read and written, the
      concatenation read and written at p bytes, and a cast back to a where p != a:
      (a + 5p)h [+ (p + a)h]; backward the cast's and the add's gradient casts where p != a
      (2(p + a)h), the two product gradients each materialised and summed (6ph), the split's
      gradient concatenated (2ah).

    Kernels: the clamps and concatenation (3 forward, 3 backward); per local expert the add
    (1 forward, 1 backward) or the product and add (2 forward, 4 backward), and each
    concatenation and cast once. Zero for a model without expert biases or clamp."""
    style = _style(eff)
    gate = 2.0 if model.gated_mlp else 1.0
    a = act_bytes
    w = gate * model.expert_ffn_hidden / np.asarray(etp, dtype=np.float64)
    h = float(model.hidden)
    p = PROBABILITY_BYTES_FLEX if eff.ep_dedup else a
    cast = 1.0 if p != a else 0.0
    clamp = style.clamp and model.expert_clamp and model.gated_mlp
    fc1 = style.fc1_bias and model.expert_bias
    fc2 = style.fc2_bias and model.expert_bias
    return EpilogueCost(
        forward_bytes=(4.0 * a * w * (clamp + fc1)
                       + fc2 * ((a + 5.0 * p) * h + cast * (p + a) * h)),
        activation_bytes=4.0 * a * w * clamp,
        backward_bytes=(5.0 * a * w * clamp + 3.0 * a * w * fc1
                        + fc2 * (6.0 * p * h + 2.0 * a * h + cast * 2.0 * (p + a) * h)),
        forward_kernels=3.0 * clamp + fc1 + fc2 * (1.0 + cast),
        forward_kernels_per_expert=1.0 * fc1 + 2.0 * fc2,
        backward_kernels=3.0 * clamp + fc1 + fc2 * (1.0 + 2.0 * cast),
        backward_kernels_per_expert=1.0 * fc1 + 4.0 * fc2)
