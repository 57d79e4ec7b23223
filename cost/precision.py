"""Bytes per element by role for each training precision."""

from __future__ import annotations

from .errors import CostModelError
from .inputs import PRECISIONS

__all__ = ["element_bytes"]

_WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 2.0, "fp32": 4.0}
_GRAD_BYTES = {"bf16": 4.0, "fp16": 2.0, "fp8": 4.0, "fp32": 4.0}
_OPTIMIZER_BYTES = {"bf16": 12.0, "fp16": 12.0, "fp8": 12.0, "fp32": 8.0}


def element_bytes(precision: str) -> dict[str, float]:
    """Bytes per element by role for mixed-precision training (Micikevicius et al. 2018):
    weights and activations in 16 bits, gradients reduced in fp32 for bf16/fp8 (Megatron's
    main grads) and fp16 for fp16, Adam state as fp32 master copy + two moments (ZeRO, sec. 3)."""
    if precision not in _WEIGHT_BYTES:
        raise CostModelError(f"training.precision {precision!r} is unknown; use one of "
                             f"{', '.join(PRECISIONS)}")
    return {
        "weight": _WEIGHT_BYTES[precision],
        "activation": 4.0 if precision == "fp32" else 2.0,
        "gradient": _GRAD_BYTES[precision],
        "optimizer": _OPTIMIZER_BYTES[precision],
    }
