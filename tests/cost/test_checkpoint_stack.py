"""How PyTorch's checkpointing and torch.compile change what a layer recomputes and keeps."""

from __future__ import annotations

import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY, Plan
from cost.degrees import degrees
from cost.transformer_time import layer_times
from tests.factories import cluster, gpt, run


def test_torch_checkpoint_stops_before_the_mlp_output_gemm() -> None:
    """GPT-3 175B at tp 8, micro-batch 1 (2048 tokens), eager PyTorch: full recompute redoes
    the forward except the MLP's second GEMM (2048 x 6144 x 12288 per GPU), whose inputs are
    the last tensors the layer saves. On an A100 (312 TFLOP/s, fraction 0.7) with the shape
    discount d / (d + 256) per dimension that GEMM takes
    2·2048·6144·12288 / (312e12 · 0.7 · (2048/2304)(6144/6400)(12288/12544)) = 1.6939 ms.
    Megatron's fused stack reruns the whole forward."""
    d = degrees(cluster(8), run(64), Plan(tp=8, pp=8, recompute=np.array([2.0])))
    eager = layer_times(gpt(), cluster(8), run(64), d, DEFAULT_EFFICIENCY.with_(kernels="eager"))
    fused = layer_times(gpt(), cluster(8), run(64), d, DEFAULT_EFFICIENCY)
    skipped = float(eager.forward_s[0] - eager.recompute_s[0])
    assert skipped == pytest.approx(1.6939e-3, rel=1e-3)
    assert float(fused.recompute_s[0]) == pytest.approx(float(fused.forward_s[0]))
