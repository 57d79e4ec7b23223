"""Memory per GPU of any workload: model states by ZeRO stage and offload, with the
activations and buffers the workload holds (cost.workload.Footprint)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .breakdown import MemoryUse
from .degrees import Degrees
from .efficiency import Efficiency
from .inputs import Array, ClusterSpec
from .software import kernel_style
from .workload import Footprint

__all__ = ["gathered_bytes", "hbm_usable_bytes", "memory_use"]


def hbm_usable_bytes(cluster: ClusterSpec, eff: Efficiency, *, gpus: Any = None) -> Array:
    """HBM that tensors can fill: capacity less the CUDA context and (with more than one GPU
    in the job: `gpus`, default the cluster's) NCCL's buffers, times the allocator's
    fraction: all of it with expandable segments, which do not fragment; less where the
    training loop reallocates its gradients every step (plain PyTorch: the kernel style's
    `grads_reallocated`, Efficiency.reallocated_usable_fraction), whose split blocks strand
    more."""
    gpus = np.asarray(cluster.gpus if gpus is None else gpus, dtype=np.float64)
    nccl = np.where(gpus > 1, eff.nccl_bytes, 0.0)
    fraction = 1.0 if eff.expandable_segments else (
        eff.reallocated_usable_fraction if kernel_style(eff).grads_reallocated
        else eff.usable_fraction)
    return (cluster.gpu.hbm_capacity_bytes - eff.reserved_bytes - nccl) * fraction


def memory_use(held: Footprint, d: Degrees) -> MemoryUse:
    """Bytes per GPU by kind. ZeRO (Rajbhandari et al. SC'20): stage 1 shards the optimizer
    state over each group's shard ranks (all replicas, or an HSDP group), 2 also gradients, 3
    also weights. Offload moves the optimizer state (and the weights, keeping
    `resident_params` in HBM) to the expansion tier. With weights offloaded under ZeRO-3 the
    layers in HBM are the gathered layers in flight (ZeRO-Infinity streams each layer's
    weights in before its compute: Rajbhandari et al., SC'21, sec. 5), counted once, in the
    buffers (gathered_bytes); only the layers of groups ZeRO-3 does not shard stay
    resident."""
    state = held.state
    weights: Array = np.float64(0.0)
    gradients: Array = np.float64(0.0)
    optimizer: Array = np.float64(0.0)
    for group in held.groups:
        shard = group.shard_ranks
        weights = weights + group.params * state.weight / np.where(d.zero >= 3, shard, 1.0)
        gradients = gradients + group.params * state.gradient / np.where(
            d.zero >= 2, shard, 1.0)
        optimizer = optimizer + group.params * state.optimizer / np.where(
            d.zero >= 1, shard, 1.0)
    streamed = np.where(d.zero >= 3, _gathered_params(held), 0.0)  # in gathered_bytes
    resident = (held.resident_params - streamed) * state.weight
    off_opt = d.offload >= 1
    off_w = d.offload >= 2
    expansion = np.where(off_opt, optimizer, 0.0) + np.where(off_w, weights, 0.0)
    return MemoryUse(
        weights_bytes=np.where(off_w, np.minimum(weights, resident), weights),
        gradients_bytes=gradients, optimizer_bytes=np.where(off_opt, 0.0, optimizer),
        activations_bytes=held.activations_bytes,
        buffers_bytes=held.buffers_bytes + gathered_bytes(held, d),
        expansion_bytes=expansion)


def gathered_bytes(held: Footprint, d: Degrees) -> Array:
    """ZeRO-3 / FSDP's unsharded layers in flight: the layer being computed and the one
    prefetched behind it, gathered in the compute format (16 bits, or fp8 for fp8 weights),
    and one layer's full gradient before its reduce-scatter (Zhao et al., VLDB'23, sec. 3.3:
    FSDP's forward and backward prefetch of one unit). `resident_params` is two layers. A
    group sharded over one rank holds its weights whole and gathers nothing (PyTorch FSDP
    runs NO_SHARD on a world of one): only the sharded groups' parameters count
    (Footprint.gathered_params)."""
    state = held.state
    compute = min(state.weight, 2.0)
    per_two_layers = _gathered_params(held) * (compute + 0.5 * state.gradient)
    return np.where(d.zero >= 3, per_two_layers, 0.0)


def _gathered_params(held: Footprint) -> Array:
    """Of the two layers of `resident_params`, the parameters ZeRO-3 gathers."""
    if held.gathered_params is not None:
        return held.gathered_params
    sharded: Array = np.zeros((), dtype=bool)
    for group in held.groups:
        sharded = sharded | (np.asarray(group.shard_ranks) > 1.0)
    return np.where(sharded, held.resident_params, 0.0)
