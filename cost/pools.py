"""A cluster of several GPU types: pools of nodes, each of one GPU type with its own node,
network and price (a ClusterSpec), and the link between pools (shared/SPEC.md
`cluster.pools`).

A plan on such a cluster uses some of its pools (a pool may stay idle) and places its ranks
on them: each pool holds whole data-parallel replicas (cost.hetero_dp), or the pipeline
stages of every replica span the pools (cost.hetero_pipeline); cost.mixed picks, per plan,
the pools and their order that run it fastest.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .breakdown import MemoryUse, StepTime
from .inputs import Array, ClusterSpec, Plan

__all__ = ["ROLES", "SERVERS", "MixedCluster", "MixedStep", "PoolUse", "dp_link_cluster",
           "price_cluster", "single_pool_plan"]


def _one(value: Any) -> float:
    return float(np.ravel(np.asarray(value, dtype=np.float64))[0])


@dataclass(frozen=True, slots=True, kw_only=True)
class MixedCluster:
    """Pools of nodes of different GPU types (scalar fields: one cluster), in the order the
    spec lists them, with their names, and the link between pools: per GPU, one direction."""

    pools: tuple[ClusterSpec, ...]
    names: tuple[str, ...]
    inter_pool_bandwidth_bytes_per_s: float
    inter_pool_latency_s: float = 30e-6
    order: tuple[int, ...] = ()  # the pools a plan uses, in pipeline order; () all active

    @property
    def used(self) -> tuple[int, ...]:
        """The pools in use, in order: `order`, else every pool with nodes."""
        return self.order or tuple(i for i, c in enumerate(self.pools) if _one(c.nodes) > 0)

    @property
    def gpus(self) -> float:
        """GPUs of the pools in use."""
        return float(sum(_one(self.pools[i].gpus) for i in self.used))

    @property
    def nodes(self) -> float:
        return float(sum(_one(self.pools[i].nodes) for i in self.used))

    @property
    def all_gpus(self) -> float:
        """GPUs of every pool, used or idle (what the cluster costs)."""
        return float(sum(_one(c.gpus) for c in self.pools))

    def active(self) -> tuple[int, ...]:
        """Every pool with nodes, used by a plan or not."""
        return tuple(i for i, c in enumerate(self.pools) if _one(c.nodes) > 0)

    def using(self, order: tuple[int, ...]) -> MixedCluster:
        """The same cluster with a plan using the pools `order`, in that pipeline order."""
        return replace(self, order=tuple(order))

    def choices(self, *, ordered: bool) -> Iterator[tuple[int, ...]]:
        """Every non-empty set of active pools a plan may use (each order of it, `ordered`)."""
        active = self.active()
        for size in range(1, len(active) + 1):
            for chosen in itertools.combinations(active, size):
                yield from (itertools.permutations(chosen) if ordered else (chosen,))

    def pool_gpus(self, i: int) -> float:
        return _one(self.pools[i].gpus)

    def label(self, i: int) -> str:
        """'owned (a100-80gb)', or the GPU's name where the pool has no name of its own."""
        gpu = self.pools[i].gpu.name
        return gpu if self.names[i] in ("", gpu) else f"{self.names[i]} ({gpu})"


def single_pool_plan(plan: Plan) -> Plan:
    """The plan on one pool alone: placement and batch shares have no meaning there."""
    return replace(plan, placement=0.0, batch_shares=0.0)


def dp_link_cluster(mixed: MixedCluster, pools: tuple[int, ...]) -> ClusterSpec:
    """A cluster whose links are the slowest of the pools' and of the link between pools: a
    data-parallel group across pools runs as fast as its slowest link (a ring's every hop
    carries the whole message). Its scale-up domain is empty, so the group always counts as
    crossing nodes; the first pool's other fields stand."""
    chosen = [mixed.pools[i] for i in pools]

    def least(name: str) -> float:
        return min(_one(getattr(c, name)) for c in chosen)

    def most(name: str) -> float:
        return max(_one(getattr(c, name)) for c in chosen)

    out_bw = min(least("scale_out_bandwidth_bytes_per_s"), mixed.inter_pool_bandwidth_bytes_per_s)
    return replace(
        chosen[0], gpus_per_node=least("gpus_per_node"), scale_up_domain_gpus=0.0,
        scale_up_bandwidth_bytes_per_s=least("scale_up_bandwidth_bytes_per_s"),
        scale_out_bandwidth_bytes_per_s=out_bw,
        scale_up_latency_s=most("scale_up_latency_s"),
        scale_out_latency_s=max(most("scale_out_latency_s"), mixed.inter_pool_latency_s))


def price_cluster(mixed: MixedCluster) -> ClusterSpec:
    """One cluster that prices like the pools together (cost.price on its GPUs): every pool
    is paid for, used or idle. USD per GPU-hour is the GPU-weighted mean, revocations per node
    hour the node-weighted mean of the spot pools, checkpoint bandwidth the node-weighted
    mean; pricing is spot if any pool is."""
    pools = [c for c in mixed.pools if _one(c.nodes) > 0] or list(mixed.pools[:1])
    gpus = sum(_one(c.gpus) for c in pools)
    nodes = sum(_one(c.nodes) for c in pools)
    usd = sum(_one(c.gpus) * _one(c.price_usd_per_gpu_hour) for c in pools)
    spot = [c for c in pools if c.pricing == "spot"]
    revocations = sum(_one(c.nodes) * _one(c.revocations_per_node_hour) for c in spot)
    checkpoint = sum(_one(c.nodes) * _one(c.checkpoint_bandwidth_bytes_per_s) for c in pools)
    return replace(
        pools[0], nodes=nodes, gpus_per_node=gpus / max(nodes, 1.0),
        price_usd_per_gpu_hour=usd / max(gpus, 1.0),
        revocations_per_node_hour=revocations / max(nodes, 1.0),
        checkpoint_bandwidth_bytes_per_s=checkpoint / max(nodes, 1.0),
        restart_s=max(_one(c.restart_s) for c in pools),
        pricing="spot" if spot else "on_demand")


@dataclass(frozen=True, eq=False, slots=True, kw_only=True)
class PoolUse:
    """What one pool does in a plan (arrays over the plans): its role (0 idle, 1 whole
    data-parallel replicas, 2 pipeline stages), replicas and stages (and the index of its
    first stage in the pipeline), the layers of its
    fullest stage, micro-batches per replica and step, its share of the samples (data) or of
    the layers (pipeline), the seconds its busiest GPU computes per step, the memory of
    its fullest GPU against its usable HBM, and how many of its replicas do one micro-batch
    fewer (data: balanced shares that do not divide the batch, cost.hetero_dp)."""

    role: Array
    replicas: Array
    stages: Array
    first_stage: Array
    layers: Array
    micro_batches: Array
    share: Array
    busy_s: Array
    memory_bytes: Array
    usable_bytes: Array
    fewer: Array | float = 0.0

    @classmethod
    def idle(cls, shape: tuple[int, ...], usable_bytes: Array | float) -> PoolUse:
        zero = np.zeros(shape)
        return cls(role=zero, replicas=zero, stages=zero, first_stage=zero, layers=zero,
                   micro_batches=zero,
                   share=zero, busy_s=zero, memory_bytes=zero,
                   usable_bytes=np.broadcast_to(np.asarray(usable_bytes, dtype=np.float64),
                                                shape).copy())


ROLES = ("idle", "data", "pipeline")
"""PoolUse.role codes."""
SERVERS = -1
"""MixedStep.bottleneck when the parameter servers bound the step."""


@dataclass(frozen=True, eq=False, slots=True, kw_only=True)
class MixedStep:
    """One plan on a mixed cluster: its step (the bottleneck pool's parts and what all pools
    share), the memory of the pool fullest against its HBM and that HBM, validity and fit,
    what every pool of the cluster does (idle ones included), and which pool bounds the step
    (an index into the cluster's pools, or SERVERS)."""

    step: StepTime
    memory: MemoryUse
    usable_bytes: Array
    valid: Array
    fits: Array
    pools: tuple[PoolUse, ...]
    bottleneck: Array
