"""Number formats by role: what the weights, gradients, optimizer state and saved activations
of a run take per element, from the training precision and what the software keeps
(cost.efficiency.Efficiency: `params`, `main_grads`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import CostModelError
from .inputs import PRECISIONS
from .workload import StateBytes

if TYPE_CHECKING:
    from .efficiency import Efficiency

__all__ = ["MXFP8_SM", "activation_bytes", "element_bytes", "fp8_recipe_runs", "gemm_input_bytes",
           "state_bytes"]

_WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 2.0, "fp32": 4.0}
_GRAD_BYTES = {"bf16": 4.0, "fp16": 2.0, "fp8": 4.0, "fp32": 4.0}
_OPTIMIZER_BYTES = {"bf16": 12.0, "fp16": 12.0, "fp8": 12.0, "fp32": 8.0}
PARAMS = ("bf16", "fp32", "fp8")
MAIN_GRADS = ("fp32", "bf16")
FP8_RECIPES = ("delayed", "current", "mxfp8", "blockwise")
MXFP8_SM = 10.0
"""Compute capability MXFP8 needs: its per-32-element scales are Blackwell's tensor-core
block scaling (Transformer Engine v2.x, transformer_engine/pytorch/fp8.py,
check_mxfp8_support: "Device compute capability 10.0 or higher required for MXFP8
execution")."""


def fp8_recipe_runs(recipe: str, compute_capability: float | None) -> bool:
    """Whether fp8 scaling `recipe` runs on a GPU of this compute capability (None: not
    stated, not judged): MXFP8 from Blackwell (MXFP8_SM) on; the others wherever fp8 does."""
    return recipe != "mxfp8" or compute_capability is None or compute_capability >= MXFP8_SM


def _check(precision: str) -> None:
    if precision not in _WEIGHT_BYTES:
        raise CostModelError(f"training.precision {precision!r} is unknown; use one of "
                             f"{', '.join(PRECISIONS)}")


def element_bytes(precision: str) -> dict[str, float]:
    """Bytes per element by role for mixed-precision training (Micikevicius et al. 2018), as
    Megatron-LM keeps them: 16-bit weights and activations, gradients reduced in fp32 for
    bf16/fp8 (main grads) and fp16 for fp16, Adam state as fp32 master copy + two moments
    (ZeRO, sec. 3); fp32 training keeps no master copy."""
    _check(precision)
    return {
        "weight": _WEIGHT_BYTES[precision],
        "activation": 4.0 if precision == "fp32" else 2.0,
        "gradient": _GRAD_BYTES[precision],
        "optimizer": _OPTIMIZER_BYTES[precision],
    }


_BF16_OPTIMIZER_BYTES = {
    "remainders": 10.0,  # the fp32 master is the bf16 weight and a 16-bit remainder
    "none": 4.0,  # no master: Adam's two moments in the weights' bf16
    "none_fp32_moments": 8.0,  # no master: Adam's two moments in fp32
}
"""Optimizer bytes per bf16 parameter by `stack.master_weights`, where the default keeps an
fp32 master and fp32 moments (12; state_bytes)."""


def state_bytes(precision: str, eff: Efficiency) -> StateBytes:
    """Bytes per parameter of weights, gradients and optimizer state.

    `eff.params`: "bf16" (Megatron: 16-bit weights, fp32 master copy in the optimizer),
    "fp32" (PyTorch autocast: fp32 weights are their own master, optimizer 8 bytes of Adam
    moments), "fp8" (Transformer Engine's fp8 primary weights / fp8 parameter all-gather, fp32
    master in the optimizer); None: element_bytes, except that fp8 training keeps fp8 weights,
    as the fp8 recipes of Megatron-Bridge and NeMo 2 set fp8_param_gather (Megatron-Bridge
    src/megatron/bridge/training/mixed_precision.py: bf16_with_fp8_delayed_scaling_mixed,
    bf16_with_fp8_current_scaling_mixed, bf16_with_mxfp8_mixed). `eff.main_grads`: "fp32" or
    "bf16" for the gradient buffer (grad_reduce_in_fp32, FSDP2's reduce_dtype); None: as
    element_bytes (fp32 for bf16 and fp8: bf16_mixed's grad_reduce_in_fp32=True).
    `eff.master_weights` "remainders": a bf16 weight's master copy takes 2 bytes, not 4;
    "none": no master copy, the optimizer updates the bf16 weights and keeps its moments in
    their dtype (plain torch.optim.Adam over bf16 parameters: 2 + 2 bytes);
    "none_fp32_moments": no master copy, fp32 moments (4 + 4 bytes: Transformer Engine's
    FusedAdam defaults, master_weights=False, exp_avg_dtype and exp_avg_sq_dtype float32,
    transformer_engine/pytorch/optimizers/fused_adam.py)."""
    base = element_bytes(precision)
    weight, optimizer = base["weight"], base["optimizer"]
    params = eff.params or ("fp8" if precision == "fp8" else None)
    if params == "fp32":
        weight, optimizer = 4.0, 8.0
    elif params == "fp8":
        weight = 1.0
    gradient = {"fp32": 4.0, "bf16": 2.0}.get(eff.main_grads or "", base["gradient"])
    if weight == 2.0 and optimizer == 12.0:  # bf16 weights, fp32 master and moments
        optimizer = _BF16_OPTIMIZER_BYTES.get(eff.master_weights, optimizer)
    return StateBytes(weight=weight, gradient=gradient, optimizer=optimizer)


def activation_bytes(precision: str) -> float:
    """Bytes per element of activations outside GEMMs (norms, residual, attention)."""
    return element_bytes(precision)["activation"]


def gemm_input_bytes(precision: str) -> float:
    """Bytes per element of a GEMM input saved for the backward pass: fp8 runs save the fp8
    copy the forward GEMM read (Transformer Engine keeps the quantised input, transposed where
    the wgrad GEMM needs it), others the activation itself."""
    return 1.0 if precision == "fp8" else activation_bytes(precision)
