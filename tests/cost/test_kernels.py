import pytest

from cost import DEFAULT_EFFICIENCY
from cost.kernels import gemm_s, gemm_shape_factor, memory_bound_s


def test_shape_factor() -> None:
    assert gemm_shape_factor(128.0, 128.0, 128.0, 128.0) == pytest.approx(1 / 8)
    assert gemm_shape_factor(1e9, 1e9, 1e9, 128.0) == pytest.approx(1.0)


def test_large_gemm_is_compute_bound() -> None:
    eff = DEFAULT_EFFICIENCY.with_(gemm_half_dim=0.0)
    t = gemm_s(8192.0, 8192.0, 8192.0, peak_flops_per_s=100e12, hbm_bytes_per_s=2e12,
               element_bytes=2.0, fraction=0.5, eff=eff)
    assert t == pytest.approx(2 * 8192.0**3 / 50e12)


def test_matrix_vector_product_is_memory_bound() -> None:
    eff = DEFAULT_EFFICIENCY.with_(hbm_fraction=1.0, gemm_half_dim=0.0)
    t = gemm_s(1.0, 8192.0, 8192.0, peak_flops_per_s=100e12, hbm_bytes_per_s=2e12,
               element_bytes=2.0, fraction=0.5, eff=eff)
    assert t == pytest.approx(2.0 * (8192 + 8192 * 8192 + 8192) / 2e12)


def test_memory_bound() -> None:
    eff = DEFAULT_EFFICIENCY.with_(hbm_fraction=0.5)
    assert memory_bound_s(1e9, hbm_bytes_per_s=1e12, eff=eff) == pytest.approx(2e-3)
