"""The `cluster` section: the GPU (catalog name, custom mapping or a list), nodes, network,
memory expansion and pricing; any value may be a choice."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BeforeValidator, Discriminator, Tag, model_validator

from cost import PRECISIONS, ClusterSpec, GPUSpec

from .catalog import gpu_catalog, unknown_name_message
from .choices import Choice, Choosable, IntChoosable, IntRange, fixed
from .errors import SpecError
from .fields import (
    MAX_GPUS,
    Bytes,
    BytesPerS,
    Count,
    Frozen,
    NonNegative,
    PositiveBytes,
    PositiveBytesPerS,
    Seconds,
    Usd,
)
from .units import parse_quantity

__all__ = ["ClusterSection", "Expansion", "GPUSection", "gpu_spec"]


def _positive_rate(value: Any, precision: str) -> float:
    rate = parse_quantity(value, "flops_per_s", field=precision)
    if not rate > 0:
        where = f" for {precision}" if precision else ""
        raise ValueError(f"the peak rate{where} must be greater than 0 FLOP/s, e.g. "
                         "'989 TFLOP/s'; leave out a precision the GPU lacks")
    return rate


def _parse_peaks(value: Any) -> Any:
    """One dense rate (for the training precision) or a mapping precision -> rate; every
    rate greater than zero."""
    if not isinstance(value, dict):
        return _positive_rate(value, "")
    unknown = sorted(set(value) - set(PRECISIONS))
    if unknown:
        raise ValueError(f"unknown precision {unknown[0]!r}; use {', '.join(PRECISIONS)}")
    return {p: _positive_rate(v, p) for p, v in value.items()}


class GPUSection(Frozen):
    """A GPU that is not in the catalog; network defaults are those of an 8-GPU HGX node."""

    name: str
    peak_flops: Annotated[float | dict[str, float], BeforeValidator(_parse_peaks)]
    hbm_capacity: PositiveBytes
    hbm_bandwidth: PositiveBytesPerS
    price_per_hour: Usd = 0.0
    spot_price_per_hour: Usd | None = None


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

    capacity: Choosable[Bytes] = 0.0
    bandwidth: Choosable[BytesPerS] = 0.0


class ClusterSection(Frozen):
    """GPUs, nodes, network, expansion and pricing; left-out fields take the GPU's defaults."""

    gpu: Choosable[FixedGPU]
    nodes: IntChoosable[Count] = 1
    gpus_per_node: IntChoosable[Count] | None = None
    scale_up_bandwidth: Choosable[PositiveBytesPerS] | None = None
    scale_out_bandwidth: Choosable[PositiveBytesPerS] | None = None
    expansion: Expansion | None = None
    pricing: Choosable[Literal["on_demand", "spot"]] = "on_demand"
    revocations_per_node_hour: Choosable[NonNegative] = 0.0
    parameter_server_bandwidth: Choosable[PositiveBytesPerS] | None = None
    checkpoint_bandwidth: PositiveBytesPerS | None = None
    """Per node, to durable storage: how fast a checkpoint is written (spot pricing)."""
    restart_time: Seconds | None = None
    """Seconds to replace a revoked node and reload the last checkpoint (spot pricing)."""

    @model_validator(mode="after")
    def _size(self) -> ClusterSection:
        gpus = _largest(self.nodes) * _largest(self.gpus_per_node or _node_size(self.gpu))
        if gpus > MAX_GPUS:
            raise SpecError(f"nodes x gpus_per_node = {gpus:,} GPUs is more than "
                            f"{MAX_GPUS:,}; lower nodes", field="nodes")
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
        if c["pricing"] == "spot":
            if gpu.spot_price_usd_per_hour is None:
                raise SpecError(f"GPU {gpu.name} has no spot price; set pricing: on_demand "
                                "or give the GPU a spot_price_per_hour", field="cluster.pricing")
            over["price_usd_per_gpu_hour"] = gpu.spot_price_usd_per_hour
        over["pricing"] = c["pricing"]
        over["revocations_per_node_hour"] = c["revocations_per_node_hour"]
        if c["checkpoint_bandwidth"] is not None:
            over["checkpoint_bandwidth_bytes_per_s"] = c["checkpoint_bandwidth"]
        if c["restart_time"] is not None:
            over["restart_s"] = c["restart_time"]
        return ClusterSpec.of(gpu, **over)


def gpu_spec(gpu: str | GPUSection, precision: str) -> GPUSpec:
    """The catalog GPU of that name, or a custom GPU (a single peak rate is `precision`'s)."""
    if isinstance(gpu, str):
        return gpu_catalog()[gpu]
    peaks = gpu.peak_flops if isinstance(gpu.peak_flops, dict) else {precision: gpu.peak_flops}
    return GPUSpec(
        name=gpu.name, peak_flops_per_s=dict(peaks), hbm_capacity_bytes=gpu.hbm_capacity,
        hbm_bandwidth_bytes_per_s=gpu.hbm_bandwidth, price_usd_per_hour=gpu.price_per_hour,
        spot_price_usd_per_hour=gpu.spot_price_per_hour, sources={"*": "user spec"},
    )


def _largest(value: Any) -> int:
    if isinstance(value, (Choice, IntRange)):
        return max(value.values())
    return int(value)


def _node_size(gpu: Any) -> int:
    names = gpu.values() if isinstance(gpu, Choice) else (gpu,)
    return max(gpu_catalog()[n].gpus_per_node if isinstance(n, str) else 8 for n in names)
