"""Time of one kernel on one GPU: GEMMs on a shape-aware roofline, memory-bound passes."""

from __future__ import annotations

import numpy as np

from .efficiency import Efficiency
from .inputs import Array, Value

__all__ = ["gemm_s", "gemm_shape_factor", "memory_bound_s"]


def gemm_shape_factor(m: Value, k: Value, n: Value, half_dim: float) -> Value:
    """Throughput of an (m x k) @ (k x n) GEMM relative to a large one: prod d / (d + d_half).

    A saturating form for tile and wave quantisation: small per-GPU shards after tensor
    parallelism run less efficiently (Narayanan et al. SC'21, fig. 13 and sec. 3.3)."""
    return (m / (m + half_dim)) * (k / (k + half_dim)) * (n / (n + half_dim))


def gemm_s(
    m: Value, k: Value, n: Value, *, peak_flops_per_s: float, hbm_bytes_per_s: float,
    element_bytes: float, fraction: float, eff: Efficiency, rate_ratio: float = 1.0,
) -> Array:
    """Roofline time of a GEMM: max(2mkn / (peak·fraction·shape), bytes moved / HBM rate).

    `rate_ratio` is the peak of the GEMM's number format over the 16-bit peak (2 for fp8 on
    Hopper and Blackwell): a tile's fixed costs (prologue, epilogue, the last partial wave) take
    the same time while its math runs that much faster, so each dimension needs `rate_ratio`
    times more extent to reach the same share of peak (half-dimension scaled)."""
    half_dim = eff.gemm_half_dim * rate_ratio
    rate = peak_flops_per_s * fraction * gemm_shape_factor(m, k, n, half_dim)
    compute_s = 2.0 * m * k * n / np.maximum(rate, 1e-30)
    memory_s = element_bytes * (m * k + k * n + m * n) / (hbm_bytes_per_s * eff.hbm_fraction)
    return np.maximum(compute_s, memory_s)


def memory_bound_s(nbytes: Value, *, hbm_bytes_per_s: float, eff: Efficiency) -> Value:
    """Time of element-wise work that streams `nbytes` through HBM."""
    return nbytes / (hbm_bytes_per_s * eff.hbm_fraction)
