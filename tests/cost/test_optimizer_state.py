"""Optimizer state by hand for plain PyTorch Adam over bf16 parameters (no master copy)."""

from __future__ import annotations

from cost.efficiency import DEFAULT_EFFICIENCY
from cost.precision import state_bytes


def test_no_master_copy_keeps_adam_moments_in_bf16() -> None:
    """bf16 weights without a master: the two moments at 2 bytes each (4), against 12 with an
    fp32 master (4 + 8); fp32 and fp8 weights are untouched."""
    none = DEFAULT_EFFICIENCY.with_(master_weights="none")
    assert state_bytes("bf16", none).optimizer == 4.0
    assert state_bytes("bf16", none.with_(params="bf16")).weight == 2.0
    assert state_bytes("bf16", DEFAULT_EFFICIENCY).optimizer == 12.0
    assert state_bytes("bf16", none.with_(params="fp32")).optimizer == 8.0
    assert state_bytes("fp8", none).optimizer == 12.0
