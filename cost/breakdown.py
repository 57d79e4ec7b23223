"""Results of the cost model: every total with its breakdown; fields are numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .inputs import Array

__all__ = ["CostReport", "MemoryUse", "Price", "StepTime"]


def _pick(value: Array, index: Any) -> float:
    """One plan's value as a builtin float (numpy scalars do not serialise to JSON)."""
    arr = np.asarray(value)
    return float(arr if arr.ndim == 0 else np.broadcast_to(arr, arr.shape)[index])


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    """Seconds per optimizer step on the slowest pipeline stage, by cause (exposed time only)."""

    compute: Array
    recompute: Array
    tp_comm: Array
    cp_comm: Array
    pp_comm: Array
    pp_bubble: Array
    dp_comm: Array
    optimizer: Array
    offload: Array

    @property
    def total_s(self) -> Array:
        return sum((getattr(self, f.name) for f in fields(self)), start=np.float64(0.0))

    def as_dict(self, index: Any = ()) -> dict[str, float]:
        return {f.name: _pick(getattr(self, f.name), index) for f in fields(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryUse:
    """Bytes per GPU on the fullest pipeline stage, and in the memory-expansion tier."""

    weights: Array
    gradients: Array
    optimizer: Array
    activations: Array
    buffers: Array
    expansion: Array

    @property
    def total_bytes(self) -> Array:
        return self.weights + self.gradients + self.optimizer + self.activations + self.buffers

    def as_dict(self, index: Any = ()) -> dict[str, float]:
        out = {f.name: _pick(getattr(self, f.name), index) for f in fields(self)}
        out["total"] = _pick(self.total_bytes, index)
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
            "cost_per_hour_usd": _pick(self.cost_per_hour_usd, index),
            "time_to_train_days": _pick(self.time_to_train_s, index) / 86400.0,
            "cost_to_train_usd": _pick(self.cost_to_train_usd, index),
            "revocation_overhead": _pick(self.revocation_overhead, index),
            "checkpoint_interval_s": _pick(self.checkpoint_interval_s, index),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CostReport:
    """The whole answer for an array of plans: time, memory, price, throughput, feasibility."""

    step: StepTime
    memory: MemoryUse
    price: Price
    gpus: Array
    tokens_per_step: float
    model_flops_per_step: float
    peak_flops_per_s: float
    hbm_usable_bytes: Array
    expansion_capacity_bytes: Array
    valid: Array  # structurally valid plan
    fits: Array  # fits in HBM and in the expansion tier

    @property
    def step_time_s(self) -> Array:
        return self.step.total_s

    @property
    def tokens_per_s(self) -> Array:
        return self.tokens_per_step / self.step_time_s

    @property
    def model_flops_per_gpu(self) -> Array:
        """Achieved model FLOP/s per GPU (no recompute), PaLM's numerator of MFU."""
        return self.model_flops_per_step / (self.step_time_s * self.gpus)

    @property
    def mfu(self) -> Array:
        return self.model_flops_per_gpu / self.peak_flops_per_s

    @property
    def feasible(self) -> Array:
        return self.valid & self.fits

    def result(self, index: Any = ()) -> dict[str, Any]:
        """One plan's numbers as builtin types: the `tuner evaluate --json` fields of
        shared/SPEC.md (without "plan" and "cluster", which the caller knows)."""
        memory = self.memory.as_dict(index)
        return {
            "feasible": bool(np.broadcast_to(self.feasible, np.shape(self.valid))[index]),
            "step_time_s": _pick(self.step_time_s, index),
            "tokens_per_s": _pick(self.tokens_per_s, index),
            "model_flops_per_gpu": _pick(self.model_flops_per_gpu, index),
            "mfu": _pick(self.mfu, index),
            "memory_per_gpu_bytes": memory,
            "hbm_usable_bytes": _pick(self.hbm_usable_bytes, index),
            "time_breakdown_s": self.step.as_dict(index),
            "dominant": self.dominant(index),
            **self.price.as_dict(index),
        }

    def dominant(self, index: Any = ()) -> str:
        """The largest term of the step time."""
        parts = self.step.as_dict(index)
        return max(parts, key=lambda k: parts[k])
