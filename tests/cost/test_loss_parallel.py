"""PyTorch's eager loss_parallel (torchtitan at tp > 1): what it holds and streams per logit."""

from __future__ import annotations

import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY, Plan
from cost.degrees import degrees
from cost.software import held_logits_bytes, streamed_logits_bytes
from cost.transformer_memory import footprint
from cost.transformer_time import logits_s
from tests.factories import cluster, gpt, run

EAGER = DEFAULT_EFFICIENCY.with_(kernels="eager")
PARALLEL = EAGER.with_(cross_entropy="loss_parallel")


def test_loss_parallel_holds_sixteen_bytes_per_logit_only_on_sharded_logits() -> None:
    """The decomposed backward keeps the saved log-softmax, the zero-filled gradient, exp(x)
    and their sum: 4 fp32 tensors, 16 bytes; at tp = 1 no DTensor is there and the eager
    kernels hold their 12."""
    held = held_logits_bytes(PARALLEL, tp=np.array([1.0, 2.0, 8.0]))
    assert held.tolist() == [12.0, 16.0, 16.0]
    assert held_logits_bytes(EAGER, tp=np.array([8.0])) == 12.0


def test_loss_parallel_buffers_at_tp_8() -> None:
    """GPT-3's 51200-entry vocabulary over tp 8, one micro-batch of 2048 tokens, no recompute:
    the last (only) stage holds (16 - 12) · 2048 · 51200 / 8 = 52,428,800 bytes more at the
    loss than eager PyTorch's own cross-entropy."""
    d = degrees(cluster(1), run(8), Plan(tp=8, pp=1))
    eager = footprint(gpt(), run(8), d, EAGER)
    parallel = footprint(gpt(), run(8), d, PARALLEL)
    assert float(parallel.buffers_bytes - eager.buffers_bytes) == pytest.approx(52_428_800)


def test_loss_parallel_streams_seventy_six_bytes_per_logit() -> None:
    """76 bytes per logit against the 16 counted for a fused kernel: at tp 8 and 2048 tokens,
    60 · 2048 · 6400 = 786,432,000 bytes on an A100 (2.039 TB/s at 0.85) take
    786,432,000 / 1.73315e12 = 0.45375 ms more; at tp 1 nothing changes."""
    assert streamed_logits_bytes(PARALLEL, tp=np.array([1.0]))[0] == 16.0
    d = degrees(cluster(1), run(8), Plan(tp=8, pp=1))
    tokens = np.array([2048.0])
    eager = logits_s(gpt(), cluster(1), run(8), tokens, d, EAGER)
    parallel = logits_s(gpt(), cluster(1), run(8), tokens, d, PARALLEL)
    assert float(parallel[0] - eager[0]) == pytest.approx(0.45375e-3, rel=1e-3)
