"""Attention's softmax exponentials against its matmuls (cost.transformer_time
.exponential_bound), hand-counted."""

from __future__ import annotations

import pytest

from cost import DEFAULT_EFFICIENCY, ClusterSpec, Plan
from cost.degrees import degrees
from cost.transformer_time import exponential_bound, layer_times
from search_spaces.catalog import gpu_catalog
from tests.factories import a100, cluster, run, small_model


def test_a_64_wide_head_on_blackwell_waits_for_its_exponentials() -> None:
    """B200: 8192 bf16 FLOPs per 16 exponentials = 512 per exponential. A 64-wide head does
    2·(64 + 64) = 256 matmul FLOPs per score forward, so the forward takes 512 / 256 = 2x its
    matmul time; the backward's 2.5·256 = 640 FLOPs per recomputed exponential stay the
    slower pipe (1x)."""
    model = small_model(hidden=256, heads=4, head_dim=64)
    assert exponential_bound(model, gpu_catalog()["b200"].flops_per_exponential) == (2.0, 1.0)


@pytest.mark.parametrize(("gpu", "head_dim"), [("b200", 128), ("h100-80gb", 64),
                                               ("gb300", 64), ("a100-80gb", 64)])
def test_balanced_or_matmul_bound_heads_keep_their_time(gpu: str, head_dim: int) -> None:
    """128-wide heads on Blackwell (512 / 512), 64-wide on Hopper (256 / 256), on Blackwell
    Ultra (doubled exponentials: 8192 / 32 = 256) and on Ampere (2048 / 16 = 128): the
    matmuls are never faster than the exponentials, so nothing changes."""
    model = small_model(hidden=512, heads=8, head_dim=head_dim)
    assert exponential_bound(model, gpu_catalog()[gpu].flops_per_exponential) == (1.0, 1.0)


def test_an_uncited_rate_never_binds() -> None:
    assert exponential_bound(small_model(head_dim=16), None) == (1.0, 1.0)


def test_the_bound_lengthens_the_attention_forward_alone() -> None:
    """A 64-wide head on a GPU of 512 FLOPs per exponential: the attention core's forward
    takes 2x as long as without a cited rate, its backward and the GEMMs the same."""
    model = small_model(hidden=1024, heads=16, head_dim=64, seq_len=4096)
    c = cluster(1)
    d = degrees(c, run(64), Plan(tp=1, pp=1, dp=8, micro_batch=1))
    plain = layer_times(model, c, run(64), d, DEFAULT_EFFICIENCY)
    bound = layer_times(model, ClusterSpec.of(a100(flops_per_exponential=512.0), nodes=1),
                        run(64), d, DEFAULT_EFFICIENCY)
    extra = float(bound.attention_forward_s) - float(plain.attention_forward_s)
    assert float(bound.attention_forward_s) == pytest.approx(2.0 * float(plain.attention_forward_s))
    assert float(bound.forward_s) - float(plain.forward_s) == pytest.approx(extra)
    assert float(bound.backward_s) == pytest.approx(float(plain.backward_s))
