"""The `cluster` section: the GPU (catalog name, custom mapping or a list), nodes, network,
memory expansion and pricing; any value may be a choice."""

# Annotations evaluated as written (no `from __future__ import annotations`): pydantic would
# otherwise compile and evaluate each field's annotation from its string when the class is
# made, 4 ms of every start with the spec sections (issue 14).

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import AfterValidator, Discriminator, Field, Tag, model_validator

from cost import ClusterSpec

from .catalog import gpu_catalog, unknown_name_message
from .choices import Choice, Choosable, IntChoosable, IntRange, fixed
from .errors import SpecError
from .fields import MAX_GPUS, Count, Frozen, NonNegative, Seconds, Usd
from .gpu import GPUSection, gpu_spec, node_gpus
from .node import check_node_fields, node_overrides
from .plausible import (
    CheckpointBandwidth,
    ExpansionBandwidth,
    ExpansionCapacity,
    InterPoolBandwidth,
    ScaleOutBandwidth,
    ScaleOutPerNode,
    ScaleUpBandwidth,
    ServerBandwidth,
)

if TYPE_CHECKING:
    from cost import MixedCluster

__all__ = ["MAX_POOLS", "ClusterSection", "Expansion", "GPUSection", "NodeFields", "PoolSection",
           "gpu_spec", "node_cluster"]

MAX_POOLS = 8
"""Pools of one cluster: a plan may use any set of them (2^pools - 1 ways), so a few."""


def _known_gpu(name: str) -> str:
    if name not in gpu_catalog():
        raise ValueError(unknown_name_message("GPU", name, gpu_catalog()))
    return name


CatalogGPU = Annotated[str, AfterValidator(_known_gpu)]
FixedGPU = Annotated[
    Union[Annotated[CatalogGPU, Tag("<catalog>")], Annotated[GPUSection, Tag("<custom>")]],  # noqa: UP007
    Discriminator(lambda v: "<custom>" if isinstance(v, (dict, GPUSection)) else "<catalog>"),
]


PoolCount = Annotated[int, Field(strict=True, ge=0, le=MAX_GPUS)]
"""A pool's nodes: 0 leaves the pool out."""


class Expansion(Frozen):
    """A per-GPU memory expansion tier (CXL or host memory) that offload moves state into."""

    capacity: Choosable[ExpansionCapacity] = 0.0
    bandwidth: Choosable[ExpansionBandwidth] = 0.0

    @model_validator(mode="after")
    def _bandwidth_of_a_tier(self) -> "Expansion":
        """A tier with a capacity and no bandwidth (left out, or 0 among its choices) moved
        offloaded state at the cost model's floor of 1 byte/s: steps of years, on plans
        called feasible."""
        capacity = max(_each(self.capacity))
        if capacity > 0 and min(_each(self.bandwidth)) == 0:
            raise SpecError(f"a tier of {capacity / 2**30:,.4g} GiB moves nothing without a "
                            "bandwidth (per GPU, one direction); give it, e.g. "
                            "bandwidth: \"64 GB/s\", or capacity: 0 for no tier",
                            field="bandwidth")
        return self


class NodeFields(Frozen):
    """What a cluster and each of its pools say about their nodes; left-out fields take the
    GPU's catalog defaults (its usual node: NVLink, NIC, price). Bandwidths are per GPU and
    one direction, but `scale_out_bandwidth_per_node` (a whole node's NICs, divided among its
    GPUs); prices are the GPU's (USD per GPU-hour, or `price_per_gpu_hour` in its place), but
    `price_per_node_hour` and `spot_price_per_node_hour` (USD per node-hour)."""

    gpu: Choosable[FixedGPU] | None = None
    nodes: IntChoosable[PoolCount] = 1
    gpus_per_node: IntChoosable[Count] | None = None
    scale_up_bandwidth: Choosable[ScaleUpBandwidth] | None = None
    scale_out_bandwidth: Choosable[ScaleOutBandwidth] | None = None
    scale_out_bandwidth_per_node: Choosable[ScaleOutPerNode] | None = None
    expansion: Expansion | None = None
    pricing: Choosable[Literal["on_demand", "spot"]] = "on_demand"
    revocations_per_node_hour: Choosable[NonNegative] = 0.0
    price_per_gpu_hour: Usd | None = None
    """USD per GPU-hour in place of the GPU's price, on demand or spot: 0 for GPUs one owns."""
    price_per_node_hour: Usd | None = None
    """USD per node-hour, on demand, over the GPU's price."""
    spot_price_per_node_hour: Usd | None = None
    """USD per node-hour with pricing: spot."""


class PoolSection(NodeFields):
    """One pool of a cluster of several GPU types: a name (for messages and reports), the GPU
    (the forms of cluster.gpu), the nodes (0 leaves the pool out) and the node's fields; any
    value may be a choice."""

    name: str = ""
    gpu: Choosable[FixedGPU]
    nodes: IntChoosable[PoolCount] = 1

    @model_validator(mode="after")
    def _node_fields(self) -> "PoolSection":
        check_node_fields(self)
        return self


class ClusterSection(NodeFields):
    """GPUs, nodes, network, expansion and pricing; or, for GPUs of several types, `pools`
    (search_spaces.pools) joined by `inter_pool_bandwidth`."""

    nodes: IntChoosable[Count] = 1
    parameter_server_bandwidth: Choosable[ServerBandwidth] | None = None
    checkpoint_bandwidth: CheckpointBandwidth | None = None
    """Per node, to durable storage: how fast a checkpoint is written (spot pricing)."""
    restart_time: Seconds | None = None
    """Seconds to replace a revoked node and reload the last checkpoint (spot pricing)."""
    pools: Annotated[tuple[PoolSection, ...], Field(min_length=1, max_length=MAX_POOLS)] | None \
        = None
    inter_pool_bandwidth: Choosable[InterPoolBandwidth] | None = None
    """Per GPU, one direction, between pools (defaults to the slowest pool's NIC)."""
    inter_pool_latency: Seconds | None = None

    @model_validator(mode="after")
    def _size(self) -> "ClusterSection":
        from .pools import check_pools_or_gpu

        check_pools_or_gpu(self)
        if self.pools is not None:
            return self
        gpus = _largest(self.nodes) * _largest(self.gpus_per_node or _node_size(self.gpu))
        if gpus > MAX_GPUS:
            raise SpecError(f"nodes x gpus_per_node = {gpus:,} GPUs is more than "
                            f"{MAX_GPUS:,}; lower nodes", field="nodes")
        check_node_fields(self)
        return self

    def to_cluster_spec(self, precision: str) -> "ClusterSpec | MixedCluster":
        """The cost model's cluster for a spec without choices (see StudySpec.to_cost_inputs):
        one GPU type, or pools of several (cost.pools.MixedCluster)."""
        if self.pools is not None:
            from .pools import mixed_cluster

            return mixed_cluster(self, precision)
        c = {name: fixed(value, field=f"cluster.{name}") for name, value in self}
        if self.expansion is not None:
            c["expansion"] = {k: fixed(v, field=f"cluster.expansion.{k}")
                              for k, v in self.expansion}
        return node_cluster(c, precision, where="cluster")


def node_cluster(c: dict[str, Any], precision: str, *, where: str) -> ClusterSpec:
    """A ClusterSpec of fixed node fields `c` (a cluster's or a pool's, named `where` in
    messages), over the GPU's catalog defaults."""
    gpu = gpu_spec(c["gpu"], precision)
    over: dict[str, Any] = {"nodes": c["nodes"]}
    if c.get("gpus_per_node") is not None:
        over["gpus_per_node"] = c["gpus_per_node"]
        if gpu.scale_up_domain_gpus == gpu.gpus_per_node:  # the domain is the node
            over["scale_up_domain_gpus"] = c["gpus_per_node"]
    for name, target in (("scale_up_bandwidth", "scale_up_bandwidth_bytes_per_s"),
                         ("scale_out_bandwidth", "scale_out_bandwidth_bytes_per_s"),
                         ("parameter_server_bandwidth", "parameter_server_bandwidth_bytes_per_s"),
                         ("checkpoint_bandwidth", "checkpoint_bandwidth_bytes_per_s"),
                         ("restart_time", "restart_s")):
        if c.get(name) is not None:
            over[target] = c[name]
    if c.get("expansion") is not None:
        over["expansion_capacity_bytes"] = c["expansion"]["capacity"]
        over["expansion_bandwidth_bytes_per_s"] = c["expansion"]["bandwidth"]
    over.update(node_overrides(c, gpu, where=where))
    over["pricing"] = c["pricing"]
    over["revocations_per_node_hour"] = c["revocations_per_node_hour"]
    return ClusterSpec.of(gpu, **over)


def _each(value: Any) -> tuple[float, ...]:
    """The values of a field that is fixed or a choice."""
    return tuple(value.values()) if isinstance(value, (Choice, IntRange)) else (value,)


def _largest(value: Any) -> int:
    if isinstance(value, (Choice, IntRange)):
        return max(value.values())
    return int(value)


def _node_size(gpu: Any) -> int:
    names = gpu.values() if isinstance(gpu, Choice) else (gpu,)
    return max(node_gpus(n) for n in names)
