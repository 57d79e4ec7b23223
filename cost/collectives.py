"""Collective communication: latency-bandwidth (alpha-beta) costs and the link a group crosses.

Costs follow Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
Operations in MPICH" (IJHPCA 2005) and NCCL's ring and double-binary-tree algorithms:
`nbytes` is the size of the whole buffer on each rank, `n` the ranks, `bw` bytes/s of the
slowest link each rank drives, `lat` seconds per message step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .inputs import Array, ClusterSpec, Value

__all__ = [
    "Link",
    "all_gather_s",
    "all_to_all_s",
    "allreduce_s",
    "domain_members",
    "group_link",
    "inside_domain",
    "members_in_domain",
    "p2p_s",
    "reduce_scatter_s",
    "ring_allreduce_s",
    "tree_allreduce_s",
]


def ring_allreduce_s(nbytes: Value, n: Value, bw: Value, lat: Value) -> Array:
    """Ring all-reduce: 2(n-1)/n of the buffer per link, 2(n-1) latency steps; 0 when n = 1."""
    steps = 2.0 * (n - 1.0)
    return np.where(n > 1, steps / n * nbytes / bw + steps * lat, 0.0)


def tree_allreduce_s(nbytes: Value, n: Value, bw: Value, lat: Value) -> Array:
    """Double binary tree all-reduce (NCCL): the buffer up and down, 2·log2(n) latency steps."""
    return np.where(n > 1, 2.0 * nbytes / bw + 2.0 * np.log2(np.maximum(n, 1.0)) * lat, 0.0)


def allreduce_s(nbytes: Value, n: Value, bw: Value, lat: Value) -> Array:
    """The faster of ring and tree, as NCCL's tuner picks per message size."""
    return np.minimum(ring_allreduce_s(nbytes, n, bw, lat), tree_allreduce_s(nbytes, n, bw, lat))


def reduce_scatter_s(nbytes: Value, n: Value, bw: Value, lat: Value) -> Array:
    """Ring reduce-scatter of a buffer of `nbytes`: (n-1)/n of it per link, n-1 steps."""
    return np.where(n > 1, (n - 1.0) / n * nbytes / bw + (n - 1.0) * lat, 0.0)


def all_gather_s(nbytes: Value, n: Value, bw: Value, lat: Value) -> Array:
    """Ring all-gather into a buffer of `nbytes`: the same cost as reduce-scatter."""
    return reduce_scatter_s(nbytes, n, bw, lat)


def domain_members(cluster: ClusterSpec, *, stride: Value, size: Value) -> Array:
    """Ranks of a group of `size` spaced `stride` apart (Megatron rank order) that share one
    scale-up (NVLink) domain: the whole group when it fits in one."""
    return members_in_domain(cluster.scale_up_domain_gpus, stride=stride, size=size)


def members_in_domain(domain_gpus: ArrayLike, *, stride: Value, size: Value) -> Array:
    """domain_members for a domain of `domain_gpus` GPUs."""
    domain = np.asarray(domain_gpus, dtype=np.float64)
    return np.clip(np.floor(domain / np.maximum(stride, 1.0)), 1.0, size)


def all_to_all_s(cluster: ClusterSpec, *, remote_bytes: Value, local_bytes: Value,
                 size: Value, fraction: float, message_s: float) -> Array:
    """An all-to-all among `size` ranks, its traffic split by the link it crosses: each rank
    sends `remote_bytes` to ranks in other scale-up domains through its own NIC (one per GPU,
    rail-optimised) and `local_bytes` to ranks of its domain over NVLink, both at once; the
    slower sets the time. The bandwidth term is the pairwise exchange's (n-1)/n of the buffer
    per rank (Thakur, Rabenseifner and Gropp 2005, sec. 4.4), split by destination; every
    message is posted at once (NCCL's grouped send/recv, DeepEP), so the latency is paid once
    plus `message_s` per peer. 0 when size = 1."""
    up = np.asarray(cluster.scale_up_bandwidth_bytes_per_s, dtype=np.float64) * fraction
    out = np.asarray(cluster.scale_out_bandwidth_bytes_per_s, dtype=np.float64) * fraction
    remote = np.asarray(remote_bytes, dtype=np.float64) > 0
    lat = np.where(remote, cluster.scale_out_latency_s, cluster.scale_up_latency_s)
    seconds = np.maximum(remote_bytes / out, local_bytes / up) + lat + (size - 1.0) * message_s
    return np.where(size > 1, seconds, 0.0)


def p2p_s(nbytes: Value, bw: Value, lat: Value) -> Value:
    """One point-to-point send."""
    return nbytes / bw + lat


@dataclass(frozen=True, eq=False, slots=True)
class Link:
    """Effective per-rank bandwidth (bytes/s) and latency (s) of a communication group."""

    bandwidth_bytes_per_s: Array
    latency_s: Array


def inside_domain(cluster: ClusterSpec, *, stride: Value, size: Value) -> Array:
    """True where every group of `size` ranks spaced `stride` apart (Megatron rank order) lies
    inside one scale-up domain, so that it never drives a NIC: its span (stride·size) divides
    the domain, or the whole job fits in one (group_link)."""
    domain = np.asarray(cluster.scale_up_domain_gpus, dtype=np.float64)
    span = np.multiply(stride, size)
    aligned = np.isclose(np.mod(domain, np.maximum(span, 1.0)), 0.0) | (
        np.asarray(cluster.gpus, dtype=np.float64) <= domain)
    return np.asarray((span <= domain) & aligned)


def group_link(cluster: ClusterSpec, *, stride: Value, size: Value, fraction: float) -> Link:
    """The link a group of `size` ranks spaced `stride` apart (Megatron rank order) crosses.

    Inside one scale-up domain (NVLink: an HGX node, or a whole NVL72 rack) the group runs at
    scale-up speed, when every such group lies inside a domain: its span (stride·size) divides
    the domain, or the job fits in one (a span of 16 on a 72-GPU rack straddles two racks for
    some groups, and the slowest group sets the pace). Across domains each rank drives a NIC;
    the k members of a group in one domain share the domain's NICs through the scale-up
    fabric (NCCL's PXN), so a ring's inter-domain hop carries k·scale_out (one channel per
    NIC), never more than the scale-up link feeding it. `fraction` is the achievable share of
    the link rate."""
    domain = np.asarray(cluster.scale_up_domain_gpus, dtype=np.float64)
    up_bw = np.asarray(cluster.scale_up_bandwidth_bytes_per_s, dtype=np.float64)
    out_bw = np.asarray(cluster.scale_out_bandwidth_bytes_per_s, dtype=np.float64)
    inside = inside_domain(cluster, stride=stride, size=size)
    members_per_domain = np.clip(domain / stride, 1.0, size)
    crossing_bw = np.minimum(up_bw, members_per_domain * out_bw)
    bw = np.where(inside, up_bw, crossing_bw) * fraction
    lat = np.where(inside, cluster.scale_up_latency_s, cluster.scale_out_latency_s)
    return Link(bandwidth_bytes_per_s=bw, latency_s=lat)
