"""The layers model against CNN steps measured on one H100 (shared/validation/gpu): step time
within 10% (20% where launch-bound), peak memory within 10% (benchmarks/cnn_h100.py)."""

from __future__ import annotations

import pytest

from benchmarks.cnn_h100 import RUNS, read, rows

pytestmark = pytest.mark.skipif(not (RUNS / "h100-cnn-eager.jsonl").is_file(),
                                reason="../shared/validation/gpu is not beside the checkout")


def test_cnn_steps_are_within_ten_percent_or_twenty_where_launch_bound() -> None:
    for r in rows(read()):
        limit = 0.20 if r["launch_bound"] else 0.10
        assert abs(r["step_error"]) <= limit, r


def test_the_cifar_resnet_is_launch_bound_and_resnet_50_is_not() -> None:
    found = {(r["model"], r["launch_bound"]) for r in rows(read())}
    assert found == {("resnet-32", True), ("resnet-50", False)}


def test_peak_memory_is_within_ten_percent() -> None:
    """Eager and compiled runs alike, each with the stack it declares (torch.compile's
    autotuning buffer counted for the compiled ones)."""
    for r in rows(read()):
        assert abs(r["memory_error"]) <= 0.10, r
