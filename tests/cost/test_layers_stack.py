"""A layers model under the stack a run declares: torch.compile's autotuning buffer in the
peak."""

from __future__ import annotations

import dataclasses

import pytest

from cost import DEFAULT_EFFICIENCY, ClusterSpec, Plan, TrainingSpec, evaluate
from cost.layers import compile_buffer_bytes
from search_spaces import gpu_catalog
from search_spaces.networks import resnet_cifar


def _buffers(gpu: str, kernels: str) -> float:
    cluster = ClusterSpec.of(gpu_catalog()[gpu], nodes=1, gpus_per_node=1,
                             scale_up_domain_gpus=1)
    report = evaluate(resnet_cifar("resnet-32", 32), cluster,
                      TrainingSpec(global_batch=128, precision="fp32"), Plan(micro_batch=128),
                      efficiency=DEFAULT_EFFICIENCY.with_(kernels=kernels))
    return float(report.memory.buffers_bytes)


def test_compiled_adds_the_gpus_l2_sized_autotuning_buffer() -> None:
    assert _buffers("h100-80gb", "compiled") - _buffers("h100-80gb", "eager") == \
        pytest.approx(50 * 2**20)
    assert _buffers("v100-16gb", "compiled") - _buffers("v100-16gb", "eager") == \
        pytest.approx(6 * 2**20)


def test_a_gpu_without_a_cited_l2_adds_nothing() -> None:
    bare = dataclasses.replace(gpu_catalog()["h100-80gb"], l2_cache_bytes=None)
    assert compile_buffer_bytes(bare, DEFAULT_EFFICIENCY.with_(kernels="compiled")) == 0.0
    assert compile_buffer_bytes(gpu_catalog()["h100-80gb"], DEFAULT_EFFICIENCY) == 0.0

