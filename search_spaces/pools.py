"""Clusters of several GPU types (shared/SPEC.md `cluster.pools`): what such a cluster section
may say, its conversion into the cost model's MixedCluster, and the pool knobs a search space
offers (`cluster.pools[i].nodes`, ...)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from cost import ClusterSpec

from .choices import Choice, IntRange, fixed
from .errors import SpecError
from .fields import MAX_GPUS
from .gpu import node_gpus

if TYPE_CHECKING:
    from cost import MixedCluster

    from .cluster import ClusterSection, PoolSection

__all__ = ["POOL_KNOBS", "check_pools_or_gpu", "mixed_cluster", "pool_choices",
           "pool_gpu_counts", "pool_knobs", "with_pool_values"]

POOL_KNOBS = ("gpu", "nodes", "gpus_per_node", "scale_up_bandwidth", "scale_out_bandwidth",
              "scale_out_bandwidth_per_node", "pricing", "revocations_per_node_hour")
"""Fields of each pool that may be choices: a new cluster for each combination."""
_POOL_ONLY = ("nodes", "gpus_per_node", "scale_up_bandwidth", "scale_out_bandwidth",
              "scale_out_bandwidth_per_node", "pricing", "revocations_per_node_hour",
              "price_per_gpu_hour", "price_per_node_hour", "spot_price_per_node_hour",
              "expansion")
"""Cluster fields that belong to each pool when the cluster has pools."""
_SHARED = ("parameter_server_bandwidth", "checkpoint_bandwidth", "restart_time")
"""Cluster fields every pool shares."""


def _values(value: Any) -> tuple[Any, ...]:
    if isinstance(value, (Choice, IntRange)):
        return tuple(value.values())
    return (value,)


def _number(value: Any) -> float:
    return float(np.ravel(np.asarray(value, dtype=np.float64))[0])


def _node_size(pool: PoolSection, gpu: Any) -> int:
    if pool.gpus_per_node is not None:
        return max(_values(pool.gpus_per_node))
    return node_gpus(gpu)


def check_pools_or_gpu(section: ClusterSection) -> None:
    """A cluster names one GPU (cluster.gpu) or several pools, not both; with pools, the node
    fields are each pool's; at most MAX_GPUS GPUs; pool names unique."""
    if section.pools is None:
        if section.gpu is None:
            raise SpecError("give the GPU (cluster.gpu: a100-80gb), or pools of several GPU "
                            "types (cluster.pools: [{gpu: a100-80gb, nodes: 16}, ...])",
                            field="gpu")
        for name in ("inter_pool_bandwidth", "inter_pool_latency"):
            if getattr(section, name) is not None:
                raise SpecError("applies to a cluster of several pools (cluster.pools); "
                                "leave it out", field=name)
        return
    if section.gpu is not None:
        raise SpecError("give cluster.gpu or cluster.pools, not both: put each GPU type in "
                        "a pool", field="gpu")
    if len(section.pools) == 1:
        for name in ("inter_pool_bandwidth", "inter_pool_latency"):
            if getattr(section, name) is not None:
                raise SpecError("is the link between pools, and this cluster has one pool; "
                                "add the other pools or leave it out", field=name)
    misplaced = [n for n in _POOL_ONLY if n in section.model_fields_set]
    if misplaced:
        raise SpecError(f"with cluster.pools each pool has its own {misplaced[0]}; move it "
                        "into the pools", field=misplaced[0])
    gpus = sum(max(_values(p.nodes)) * max(_node_size(p, g) for g in _values(p.gpu))
               for p in section.pools)
    if gpus > MAX_GPUS:
        raise SpecError(f"the pools hold up to {gpus:,} GPUs, more than {MAX_GPUS:,}; lower "
                        "their nodes", field="pools")
    names = [p.name for p in section.pools if p.name]
    if len(set(names)) != len(names):
        raise SpecError(f"two pools are named {sorted(n for n in names if names.count(n) > 1)[0]!r}"
                        "; give each a name of its own", field="pools")


def _pool_cluster(section: ClusterSection, pool: PoolSection, i: int, precision: str
                  ) -> ClusterSpec:
    from .cluster import node_cluster

    where = f"cluster.pools[{i}]"
    c: dict[str, Any] = {name: fixed(value, field=f"{where}.{name}") for name, value in pool}
    if pool.expansion is not None:
        c["expansion"] = {k: fixed(v, field=f"{where}.expansion.{k}") for k, v in pool.expansion}
    c.update({name: getattr(section, name) for name in _SHARED})
    c["parameter_server_bandwidth"] = fixed(c["parameter_server_bandwidth"],
                                            field="cluster.parameter_server_bandwidth")
    return node_cluster(c, precision, where=where)


def mixed_cluster(section: ClusterSection, precision: str) -> MixedCluster:
    """The cost model's MixedCluster of a fixed pools section. The link between pools defaults
    to the slowest pool's NIC (pools on one fabric), its latency to the slowest pool's."""
    from cost import MixedCluster  # cost.pools, imported by a pools section only

    pools = tuple(_pool_cluster(section, pool, i, precision)
                  for i, pool in enumerate(section.pools or ()))
    active = [c for c in pools if _number(c.nodes) > 0]
    if not active:
        raise SpecError("every pool has 0 nodes; give at least one pool nodes",
                        field="cluster.pools")
    bandwidth = fixed(section.inter_pool_bandwidth, field="cluster.inter_pool_bandwidth")
    if bandwidth is None:
        bandwidth = min(_number(c.scale_out_bandwidth_bytes_per_s) for c in active)
    latency = section.inter_pool_latency
    if latency is None:
        latency = max(_number(c.scale_out_latency_s) for c in active)
    names = tuple(p.name for p in section.pools or ())
    return MixedCluster(pools=pools, names=names, inter_pool_bandwidth_bytes_per_s=bandwidth,
                        inter_pool_latency_s=latency)


def pool_knobs(section: ClusterSection) -> tuple[str, ...]:
    """The cluster knobs of a pools section: `pools[i].<field>` and `inter_pool_bandwidth`."""
    return (*(f"pools[{i}].{k}" for i in range(len(section.pools or ())) for k in POOL_KNOBS),
            "inter_pool_bandwidth")


def pool_choices(section: ClusterSection) -> dict[str, tuple[Any, ...]]:
    """Each pool knob's values."""
    out: dict[str, tuple[Any, ...]] = {}
    for i, pool in enumerate(section.pools or ()):
        for k in POOL_KNOBS:
            out[f"pools[{i}].{k}"] = _values(getattr(pool, k))
    out["inter_pool_bandwidth"] = _values(section.inter_pool_bandwidth)
    return out


def with_pool_values(section: ClusterSection, values: Mapping[str, Any]) -> ClusterSection:
    """The section with each pool knob set to its value in `values` (one combination)."""
    pools = []
    for i, pool in enumerate(section.pools or ()):
        mine = {k: values[f"pools[{i}].{k}"] for k in POOL_KNOBS if f"pools[{i}].{k}" in values}
        pools.append(pool.model_copy(update=mine))
    update: dict[str, Any] = {"pools": tuple(pools)}
    if "inter_pool_bandwidth" in values:
        update["inter_pool_bandwidth"] = values["inter_pool_bandwidth"]
    return section.model_copy(update=update)


def pool_gpu_counts(section: ClusterSection) -> set[int]:
    """Every GPU count a plan may use: the sums over any set of pools of their possible
    GPU counts (a plan may leave pools idle)."""
    per_pool = []
    for pool in section.pools or ():
        nodes = _values(pool.nodes)
        sizes = (set(_values(pool.gpus_per_node)) if pool.gpus_per_node is not None
                 else {_node_size(pool, g) for g in _values(pool.gpu)})
        per_pool.append({0} | {n * s for n in nodes for s in sizes})
    totals = {sum(combo) for combo in itertools.product(*per_pool)}
    return totals - {0}
