"""The `cluster` section: the GPU (catalog name, custom mapping or a list), nodes, network,
memory expansion and pricing; any value may be a choice."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, Discriminator, Tag, model_validator

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
    ScaleOutBandwidth,
    ScaleOutPerNode,
    ScaleUpBandwidth,
    ServerBandwidth,
)

__all__ = ["ClusterSection", "Expansion", "GPUSection", "gpu_spec"]


def _known_gpu(name: str) -> str:
    if name not in gpu_catalog():
        raise ValueError(unknown_name_message("GPU", name, gpu_catalog()))
    return name


CatalogGPU = Annotated[str, AfterValidator(_known_gpu)]
FixedGPU = Annotated[
    Union[Annotated[CatalogGPU, Tag("<catalog>")], Annotated[GPUSection, Tag("<custom>")]],  # noqa: UP007
    Discriminator(lambda v: "<custom>" if isinstance(v, (dict, GPUSection)) else "<catalog>"),
]


class Expansion(Frozen):
    """A per-GPU memory expansion tier (CXL or host memory) that offload moves state into."""

    capacity: Choosable[ExpansionCapacity] = 0.0
    bandwidth: Choosable[ExpansionBandwidth] = 0.0


class ClusterSection(Frozen):
    """GPUs, nodes, network, expansion and pricing; left-out fields take the GPU's defaults.
    Bandwidths are per GPU and one direction, but `scale_out_bandwidth_per_node` (a whole
    node's NICs, divided among its GPUs); prices are the GPU's (USD per GPU-hour), but
    `price_per_node_hour` and `spot_price_per_node_hour` (USD per node-hour)."""

    gpu: Choosable[FixedGPU]
    nodes: IntChoosable[Count] = 1
    gpus_per_node: IntChoosable[Count] | None = None
    scale_up_bandwidth: Choosable[ScaleUpBandwidth] | None = None
    scale_out_bandwidth: Choosable[ScaleOutBandwidth] | None = None
    scale_out_bandwidth_per_node: Choosable[ScaleOutPerNode] | None = None
    expansion: Expansion | None = None
    pricing: Choosable[Literal["on_demand", "spot"]] = "on_demand"
    revocations_per_node_hour: Choosable[NonNegative] = 0.0
    price_per_node_hour: Usd | None = None
    spot_price_per_node_hour: Usd | None = None
    parameter_server_bandwidth: Choosable[ServerBandwidth] | None = None
    checkpoint_bandwidth: CheckpointBandwidth | None = None
    """Per node, to durable storage: how fast a checkpoint is written (spot pricing)."""
    restart_time: Seconds | None = None
    """Seconds to replace a revoked node and reload the last checkpoint (spot pricing)."""

    @model_validator(mode="after")
    def _size(self) -> ClusterSection:
        gpus = _largest(self.nodes) * _largest(self.gpus_per_node or _node_size(self.gpu))
        if gpus > MAX_GPUS:
            raise SpecError(f"nodes x gpus_per_node = {gpus:,} GPUs is more than "
                            f"{MAX_GPUS:,}; lower nodes", field="nodes")
        check_node_fields(self)
        return self

    def to_cluster_spec(self, precision: str) -> ClusterSpec:
        """The cost model's cluster for a spec without choices (see StudySpec.to_cost_inputs)."""
        c = {name: fixed(value, field=f"cluster.{name}") for name, value in self}
        if self.expansion is not None:
            c["expansion"] = {k: fixed(v, field=f"cluster.expansion.{k}")
                              for k, v in self.expansion}
        gpu = gpu_spec(c["gpu"], precision)
        over: dict[str, Any] = {"nodes": c["nodes"]}
        if c["gpus_per_node"] is not None:
            over["gpus_per_node"] = c["gpus_per_node"]
            if gpu.scale_up_domain_gpus == gpu.gpus_per_node:  # the domain is the node
                over["scale_up_domain_gpus"] = c["gpus_per_node"]
        if c["scale_up_bandwidth"] is not None:
            over["scale_up_bandwidth_bytes_per_s"] = c["scale_up_bandwidth"]
        if c["scale_out_bandwidth"] is not None:
            over["scale_out_bandwidth_bytes_per_s"] = c["scale_out_bandwidth"]
        if c["expansion"] is not None:
            over["expansion_capacity_bytes"] = c["expansion"]["capacity"]
            over["expansion_bandwidth_bytes_per_s"] = c["expansion"]["bandwidth"]
        over.update(node_overrides(c, gpu))
        over["pricing"] = c["pricing"]
        over["revocations_per_node_hour"] = c["revocations_per_node_hour"]
        if c["checkpoint_bandwidth"] is not None:
            over["checkpoint_bandwidth_bytes_per_s"] = c["checkpoint_bandwidth"]
        if c["restart_time"] is not None:
            over["restart_s"] = c["restart_time"]
        return ClusterSpec.of(gpu, **over)


def _largest(value: Any) -> int:
    if isinstance(value, (Choice, IntRange)):
        return max(value.values())
    return int(value)


def _node_size(gpu: Any) -> int:
    names = gpu.values() if isinstance(gpu, Choice) else (gpu,)
    return max(node_gpus(n) for n in names)
