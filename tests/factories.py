"""Small named factories for the tests: models, GPUs, clusters, runs."""

from __future__ import annotations

from typing import Any

import numpy as np

from cost import ClusterSpec, GPUSpec, ModelSpec, TrainingSpec
from cost.workload import Footprint, ParamGroup, StateBytes


def gpt(**overrides: Any) -> ModelSpec:
    """GPT-3 175B (Brown et al. 2020, Table 2.1)."""
    fields: dict[str, Any] = dict(name="gpt3-175b", layers=96, hidden=12288, heads=96,
                                  vocab=51200, seq_len=2048)
    return ModelSpec(**{**fields, **overrides})


def small_model(**overrides: Any) -> ModelSpec:
    fields: dict[str, Any] = dict(name="small", layers=4, hidden=256, heads=8, vocab=1000,
                                  seq_len=128)
    return ModelSpec(**{**fields, **overrides})


def a100(**overrides: Any) -> GPUSpec:
    fields: dict[str, Any] = dict(
        name="a100-80gb", peak_flops_per_s={"bf16": 312e12, "fp16": 312e12, "fp32": 156e12},
        hbm_capacity_bytes=80 * 2**30, hbm_bandwidth_bytes_per_s=2.039e12, gpus_per_node=8,
        scale_up_domain_gpus=8, scale_up_bandwidth_bytes_per_s=300e9,
        scale_out_bandwidth_bytes_per_s=25e9, scale_up_latency_s=2e-6, scale_out_latency_s=5e-6,
        price_usd_per_hour=2.0, gemm_fraction=0.7)
    return GPUSpec(**{**fields, **overrides})


def cluster(nodes: int = 8, **overrides: Any) -> ClusterSpec:
    return ClusterSpec.of(a100(), nodes=nodes, **overrides)


def run(global_batch: int = 64, **overrides: Any) -> TrainingSpec:
    return TrainingSpec(global_batch=global_batch, **{"precision": "bf16", **overrides})


def one_group(replicas: float, stride: float, params: float = 1e9) -> Footprint:
    """What one GPU holds of `params` parameters in one replica group of `replicas` ranks
    spaced `stride` apart: 2-byte weights and gradients, 12-byte optimizer state, nothing
    else (the data-parallel traffic's inputs, cost.schedule)."""
    return Footprint(groups=(ParamGroup(params=np.float64(params), replicas=np.float64(replicas),
                                        stride=np.float64(stride)),),
                     state=StateBytes(weight=2, gradient=2, optimizer=12),
                     resident_params=np.float64(0.0), activations_bytes=np.float64(0.0),
                     buffers_bytes=np.float64(0.0))
