"""Frozen inputs of the cost model: the GPU, the cluster, the training run, the plan (the
model is a workload: cost.workload).

Every numeric field is SI (bytes, bytes/s, FLOP/s, seconds, USD) and may be a numpy array:
the cost functions are written with numpy operations only, so one call evaluates a whole array
of plans (or of clusters) by broadcasting.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "PRECISIONS",
    "ClusterSpec",
    "GPUSpec",
    "Plan",
    "TrainingSpec",
    "Value",
]

PRECISIONS = ("bf16", "fp16", "fp8", "fp32")

Array = NDArray[Any]
"""A numpy array of any shape; cost functions broadcast their arrays together."""
Value = NDArray[Any] | float
"""A number or an array of numbers."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GPUSpec:
    """One accelerator: dense peak rates per precision, HBM, and its usual node."""

    name: str
    peak_flops_per_s: dict[str, float]  # precision -> dense FLOP/s
    hbm_capacity_bytes: float
    hbm_bandwidth_bytes_per_s: float
    gpus_per_node: int = 8
    scale_up_domain_gpus: int = 8
    scale_up_bandwidth_bytes_per_s: float = 300e9
    scale_out_bandwidth_bytes_per_s: float = 25e9
    scale_up_latency_s: float = 3e-6
    scale_out_latency_s: float = 6e-6
    price_usd_per_hour: float = 0.0
    spot_price_usd_per_hour: float | None = None
    gemm_fraction: float | None = None  # sustained share of peak in training GEMMs, if known
    layers_fraction: float | None = None  # the same for a layers model's convolutions, if known
    l2_cache_bytes: float | None = None  # the L2 cache, if cited
    flops_per_exponential: float | None = None  # bf16 tensor FLOPs per exponential, if cited
    compute_capability: float | None = None  # CUDA compute capability (9.0: Hopper), if cited
    sources: dict[str, str] = field(default_factory=dict)

    def peak_for(self, precision: str) -> float:
        """Dense FLOP/s for `precision`; 0.0 when the GPU lacks that format."""
        return float(self.peak_flops_per_s.get(precision, 0.0))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec:
    """A cluster of identical GPUs; network and expansion fields may be arrays."""

    gpu: GPUSpec
    nodes: ArrayLike = 1
    gpus_per_node: ArrayLike = 8
    scale_up_domain_gpus: ArrayLike = 8
    scale_up_bandwidth_bytes_per_s: ArrayLike = 300e9
    scale_out_bandwidth_bytes_per_s: ArrayLike = 25e9
    scale_up_latency_s: ArrayLike = 3e-6
    scale_out_latency_s: ArrayLike = 6e-6
    expansion_capacity_bytes: ArrayLike = 0.0
    expansion_bandwidth_bytes_per_s: ArrayLike = 0.0
    price_usd_per_gpu_hour: ArrayLike = 0.0
    revocations_per_node_hour: ArrayLike = 0.0
    parameter_server_bandwidth_bytes_per_s: ArrayLike = 0.0  # 0: the scale-out bandwidth
    checkpoint_bandwidth_bytes_per_s: ArrayLike = 2e9  # per node, to durable storage
    restart_s: ArrayLike = 600.0  # replace a revoked node and reload: provision, start, load
    pricing: str = "on_demand"

    @classmethod
    def of(cls, gpu: GPUSpec, **overrides: Any) -> ClusterSpec:
        """A cluster of `gpu` with the GPU's usual node, overridden by `overrides`."""
        base: dict[str, Any] = {
            "gpus_per_node": gpu.gpus_per_node,
            "scale_up_domain_gpus": gpu.scale_up_domain_gpus,
            "scale_up_bandwidth_bytes_per_s": gpu.scale_up_bandwidth_bytes_per_s,
            "scale_out_bandwidth_bytes_per_s": gpu.scale_out_bandwidth_bytes_per_s,
            "scale_up_latency_s": gpu.scale_up_latency_s,
            "scale_out_latency_s": gpu.scale_out_latency_s,
            "price_usd_per_gpu_hour": gpu.price_usd_per_hour,
        }
        base.update(overrides)
        return cls(gpu=gpu, **base)

    @property
    def gpus(self) -> Any:
        return np.asarray(self.nodes) * np.asarray(self.gpus_per_node)

    def with_(self, **changes: Any) -> ClusterSpec:
        return replace(self, **changes)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingSpec:
    """What is trained: batch (sequences per optimizer step), tokens, number format."""

    global_batch: int
    precision: str = "bf16"
    tokens: float = 0.0
    optimizer: str = "adam"


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A plan in the model's numbers; every field may be an array (all broadcast together).

    `dp` 0 means "the rest": GPUs / (tp * pp * cp). `recompute`, `offload`, `sync`,
    `placement` and `batch_shares` are codes of cost.codec's vocabularies (sync -1: the
    fastest collective for the message); cost.codec.PlanRecord is one plan in the user's
    words.
    """

    tp: ArrayLike = 1
    pp: ArrayLike = 1
    dp: ArrayLike = 0
    cp: ArrayLike = 1
    virtual_stages: ArrayLike = 1
    micro_batch: ArrayLike = 1
    recompute: ArrayLike = 0
    sequence_parallel: ArrayLike = False
    zero: ArrayLike = 0
    offload: ArrayLike = 0
    sync: ArrayLike = -1  # code into cost.sync.SYNC; -1: the fastest collective
    parameter_servers: ArrayLike = 1
    shard_group: ArrayLike = 0  # ranks of one ZeRO shard among the dp·cp replicas; 0: all
    ep: ArrayLike = 1  # expert-parallel degree (mixture of experts)
    etp: ArrayLike = 1  # tensor-parallel degree inside an expert
    placement: ArrayLike = 0  # code into cost.codec.Placement: 0 data, 1 pipeline
    batch_shares: ArrayLike = 0  # code into cost.codec.Shares: 0 balanced, 1 equal

    def arrays(self, gpus: ArrayLike) -> dict[str, Array]:
        """All fields as float arrays broadcast to one shape, with dp resolved."""
        names = (
            "tp", "pp", "dp", "cp", "virtual_stages", "micro_batch",
            "recompute", "sequence_parallel", "zero", "offload", "sync", "parameter_servers",
            "shard_group", "ep", "etp",
            "placement", "batch_shares",
        )
        values = [np.asarray(getattr(self, n), dtype=np.float64) for n in names]
        values.append(np.asarray(gpus, dtype=np.float64))
        out = dict(zip((*names, "gpus"), np.broadcast_arrays(*values), strict=True))
        model_parallel = out["tp"] * out["pp"] * out["cp"]
        out["dp"] = np.where(out["dp"] > 0, out["dp"], out["gpus"] / model_parallel)
        return out
