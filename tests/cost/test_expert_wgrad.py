"""The experts' weight-gradient GEMMs accumulate into the gradient buffer every micro-batch
(cost.moe_time.grouped_gemm_s `accumulate_bytes`), hand-counted."""

from __future__ import annotations

import pytest

from cost.efficiency import DEFAULT_EFFICIENCY as EFF
from cost.moe_time import grouped_gemm_s


def gemm(groups: float, m: float, k: float, n: float, accumulate_bytes: float = 0.0) -> float:
    """A GPU of 1 PFLOP/s and 1 TB/s, bf16 inputs, at its whole peak."""
    return float(grouped_gemm_s(groups, m, k, n, peak_flops_per_s=1e15, hbm_bytes_per_s=1e12,
                                element_bytes=2.0, fraction=1.0, eff=EFF,
                                accumulate_bytes=accumulate_bytes))


def test_few_rows_per_expert_make_the_wgrad_memory_bound() -> None:
    """32 experts of 64 rows, 1024 x 1024 weights, bf16 inputs, fp32 gradient buffer: the
    wgrad reads 2·2048·(1024 + 1024) = 8,388,608 input bytes and reads and writes
    8·32·1024·1024 = 268,435,456 gradient bytes, 276,824,064 bytes at 0.85 of 1 TB/s:
    325.67 us; its 4.3 GFLOP at a 1 PFLOP/s peak take about 10 us."""
    wgrad = gemm(32, 64, 1024, 1024, accumulate_bytes=4.0)
    assert float(wgrad) == pytest.approx(276_824_064 / (1e12 * EFF.hbm_fraction))


def test_the_forward_reads_the_weights_once() -> None:
    """The same GEMM forward moves 2·(2048·1024 + 32·1024·1024 + 2048·1024) = 75,497,472
    bytes: 88.82 us, so the gradient's read-modify-write is what the backward adds."""
    forward = gemm(32, 64, 1024, 1024)
    assert float(forward) == pytest.approx(75_497_472 / (1e12 * EFF.hbm_fraction))


def test_many_rows_per_expert_stay_compute_bound() -> None:
    """16384 rows per expert: 2·16384 FLOPs per gradient element against its 8 bytes, above
    this GPU's 1000 FLOPs per byte, so the wgrad takes the forward's time (the same FLOPs)."""
    forward = gemm(8, 16384, 4096, 4096)
    wgrad = gemm(8, 16384, 4096, 4096, accumulate_bytes=4.0)
    assert float(wgrad) == pytest.approx(float(forward))
