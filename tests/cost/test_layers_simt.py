"""fp32 convolutions on CUDA cores (SIMT: GPUs without TF32) run on narrower tiles than on
tensor cores, with cuDNN's Winograd algorithms; tensor cores keep the wide tiles."""

from __future__ import annotations

import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY
from cost.layers import Layer
from cost.layers_time import LayerShapes, device_seconds
from search_spaces import gpu_catalog


def _one_gemm_s(gpu: str, precision: str, **changes: float) -> float:
    """Forward device seconds of one dense layer (P = 1): M = batch 4096, N = 32 outputs,
    K = 1024 inputs; large enough in FLOPs to be compute-bound."""
    layer = Layer(name="fc", forward_flops=2.0 * 1024 * 32, params=1024 * 32,
                  activation_bytes=32 * 8.0)
    shapes = LayerShapes.of([layer])
    eff = DEFAULT_EFFICIENCY.with_(**changes)
    forward, _ = device_seconds(shapes, 0, 1, gpu=gpu_catalog()[gpu], precision=precision,
                                batch=np.array(4096.0), eff=eff)
    return float(forward[..., 0])


def _expected_s(gpu: str, precision: str, half: float, winograd: float) -> float:
    spec = gpu_catalog()[gpu]
    m, n, k = 4096.0, 32.0, 1024.0
    rate = (spec.peak_for(precision) * DEFAULT_EFFICIENCY.layers_fraction_for(spec) * winograd
            * m / (m + half) * n / (n + half) * k / (k + half))
    size = 4.0 if precision == "fp32" else 2.0
    passes = DEFAULT_EFFICIENCY.layers_forward_passes * size * m * n / (
        spec.hbm_bandwidth_bytes_per_s * DEFAULT_EFFICIENCY.hbm_fraction)
    return 2 * m * n * k / rate + passes


def test_fp32_without_tf32_runs_on_cuda_cores_with_their_tiles() -> None:
    e = DEFAULT_EFFICIENCY
    assert _one_gemm_s("p100", "fp32") == pytest.approx(
        _expected_s("p100", "fp32", e.layers_half_dim_simt, e.layers_winograd))
    assert _one_gemm_s("p100", "fp32", layers_half_dim=1.0) == _one_gemm_s("p100", "fp32")


def test_tensor_cores_keep_the_wide_tiles_and_no_winograd() -> None:
    e = DEFAULT_EFFICIENCY
    assert _one_gemm_s("h100-80gb", "bf16") == pytest.approx(
        _expected_s("h100-80gb", "bf16", e.layers_half_dim, 1.0), rel=1e-9)
    assert _one_gemm_s("h100-80gb", "bf16", layers_half_dim_simt=1.0) == \
        _one_gemm_s("h100-80gb", "bf16")
    assert _one_gemm_s("a100-80gb", "fp32", layers_half_dim_simt=1.0) == \
        _one_gemm_s("a100-80gb", "fp32")


def test_a_narrow_layer_loses_less_on_cuda_cores_than_on_tensor_cores() -> None:
    """32 output channels: half the rate on SIMT tiles (32 / (32 + 32)), a fifth on 128-wide
    tensor-core tiles (32 / (32 + 128))."""
    simt = _one_gemm_s("p100", "fp32", layers_winograd=1.0)
    wide = _one_gemm_s("p100", "fp32", layers_winograd=1.0,
                       layers_half_dim_simt=DEFAULT_EFFICIENCY.layers_half_dim)
    assert wide / simt > 2.0

