"""Results of the cost model: every total with its breakdown; fields are numpy arrays.

Field names carry their units (`compute_s`, `weights_bytes`); `as_dict` gives the names of
shared/SPEC.md's JSON (`compute`, `weights`), in builtin numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from .inputs import Array

if TYPE_CHECKING:
    from .pools import PoolUse

__all__ = ["CostReport", "MemoryUse", "Price", "StepTime"]


def pick(value: Array, index: Any = ()) -> float:
    """One plan's value as a builtin float (numpy scalars do not serialise to JSON)."""
    arr = np.asarray(value)
    return float(arr if arr.ndim == 0 else arr[index])


def _strip(name: str, suffix: str) -> str:
    return name[: -len(suffix)] if name.endswith(suffix) else name


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    """Seconds per optimizer step on the slowest pipeline stage, by cause (exposed time only)."""

    compute_s: Array
    recompute_s: Array
    tp_comm_s: Array
    cp_comm_s: Array
    pp_comm_s: Array
    pp_bubble_s: Array
    dp_comm_s: Array
    optimizer_s: Array
    offload_s: Array
    launch_s: Array  # the GPU waiting for the host to launch kernels (small micro-batches)
    ep_comm_s: Array | float = 0.0  # exposed expert-parallel token all-to-alls (MoE only)

    @property
    def total_s(self) -> Array:
        return sum((getattr(self, f.name) for f in fields(self)), start=np.float64(0.0))

    def as_dict(self, index: Any = ()) -> dict[str, float]:
        """{"compute": s, "recompute": s, ...} for one plan."""
        return {_strip(f.name, "_s"): pick(getattr(self, f.name), index) for f in fields(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryUse:
    """Bytes per GPU on the fullest pipeline stage, and in the memory-expansion tier."""

    weights_bytes: Array
    gradients_bytes: Array
    optimizer_bytes: Array
    activations_bytes: Array
    buffers_bytes: Array
    expansion_bytes: Array

    @property
    def total_bytes(self) -> Array:
        """What HBM holds: everything but the expansion tier."""
        return (self.weights_bytes + self.gradients_bytes + self.optimizer_bytes
                + self.activations_bytes + self.buffers_bytes)

    def as_dict(self, index: Any = ()) -> dict[str, float]:
        """{"weights": bytes, ..., "expansion": bytes, "total": bytes} for one plan."""
        out = {_strip(f.name, "_bytes"): pick(getattr(self, f.name), index)
               for f in fields(self)}
        out["total"] = pick(self.total_bytes, index)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """What the cluster costs per hour, and the time and money to train `tokens`."""

    cost_per_hour_usd: Array
    time_to_train_s: Array  # expected wall time, revocations included
    cost_to_train_usd: Array
    revocation_overhead: Array  # extra wall time per second of useful work (0 on demand)
    checkpoint_interval_s: Array  # Young's optimal interval (inf without revocations)

    def as_dict(self, index: Any = ()) -> dict[str, float]:
        return {
            "cost_per_hour_usd": pick(self.cost_per_hour_usd, index),
            "time_to_train_days": pick(self.time_to_train_s, index) / 86400.0,
            "cost_to_train_usd": pick(self.cost_to_train_usd, index),
            "revocation_overhead": pick(self.revocation_overhead, index),
            "checkpoint_interval_s": pick(self.checkpoint_interval_s, index),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CostReport:
    """The whole answer for an array of plans: time, memory, price, throughput, feasibility."""

    step: StepTime
    memory: MemoryUse
    price: Price
    gpus: Array
    units_per_step: float  # tokens (or samples, for a layers model) trained per step
    model_flops_per_step: float  # attention as computed (causal)
    palm_flops_per_step: float  # PaLM's count (all scores)
    peak_flops_per_s: float
    hbm_usable_bytes: Array
    expansion_capacity_bytes: Array
    valid: Array  # structurally valid plan
    fits: Array  # fits in HBM and in the expansion tier
    pools: tuple[PoolUse, ...] = ()  # what each pool does, on a cluster of several GPU types
    bottleneck: Array | None = None  # the pool bounding the step (cost.pools.SERVERS: servers)

    @property
    def step_time_s(self) -> Array:
        return self.step.total_s

    @property
    def tokens_per_s(self) -> Array:
        """Tokens (or samples) trained per second: shared/SPEC.md's `tokens_per_s`."""
        return self.units_per_step / self.step_time_s

    @property
    def model_flops_per_gpu(self) -> Array:
        """Achieved model FLOP/s per GPU (no recompute), PaLM's numerator of MFU."""
        return self.model_flops_per_step / (self.step_time_s * self.gpus)

    @property
    def mfu(self) -> Array:
        """Model FLOP/s per GPU over the dense peak, attention as computed."""
        return self.model_flops_per_gpu / self.peak_flops_per_s

    @property
    def mfu_palm(self) -> Array:
        """MFU in PaLM's convention (Chowdhery et al. 2022, appendix B)."""
        return self.palm_flops_per_step / (self.step_time_s * self.gpus) / self.peak_flops_per_s

    @property
    def feasible(self) -> Array:
        return self.valid & self.fits
