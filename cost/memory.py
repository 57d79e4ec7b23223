"""Memory per GPU of any workload: model states by ZeRO stage and offload, with the
activations and buffers the workload holds (cost.workload.Footprint)."""

from __future__ import annotations

import numpy as np

from .breakdown import MemoryUse
from .degrees import Degrees
from .efficiency import Efficiency
from .inputs import Array, ClusterSpec
from .workload import Footprint

__all__ = ["hbm_usable_bytes", "memory_use"]


def hbm_usable_bytes(cluster: ClusterSpec, eff: Efficiency) -> float:
    """HBM that tensors can fill: capacity less the reserve, times the allocator's fraction."""
    return (cluster.gpu.hbm_capacity_bytes - eff.reserved_bytes) * eff.usable_fraction


def memory_use(held: Footprint, d: Degrees) -> MemoryUse:
    """Bytes per GPU by kind. ZeRO (Rajbhandari et al. SC'20): stage 1 shards the optimizer
    state over each group's replicas, 2 also gradients, 3 also weights. Offload moves the
    optimizer state (and the weights, keeping `resident_params` in HBM) to the expansion
    tier."""
    state = held.state
    weights: Array = np.float64(0.0)
    gradients: Array = np.float64(0.0)
    optimizer: Array = np.float64(0.0)
    for group in held.groups:
        weights = weights + group.params * state.weight / np.where(
            d.zero >= 3, group.replicas, 1.0)
        gradients = gradients + group.params * state.gradient / np.where(
            d.zero >= 2, group.replicas, 1.0)
        optimizer = optimizer + group.params * state.optimizer / np.where(
            d.zero >= 1, group.replicas, 1.0)
    resident = held.resident_params * state.weight
    off_opt = d.offload >= 1
    off_w = d.offload >= 2
    expansion = np.where(off_opt, optimizer, 0.0) + np.where(off_w, weights, 0.0)
    return MemoryUse(
        weights_bytes=np.where(off_w, np.minimum(weights, resident), weights),
        gradients_bytes=gradients, optimizer_bytes=np.where(off_opt, 0.0, optimizer),
        activations_bytes=held.activations_bytes, buffers_bytes=held.buffers_bytes,
        expansion_bytes=expansion)
