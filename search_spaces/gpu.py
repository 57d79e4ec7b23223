"""`cluster.gpu` as a mapping: a GPU that is not in the catalog, or a catalog GPU with some of
its figures replaced by the user's (`{base: h100-80gb, price_per_hour: 2.10}`), and the
cost model's GPUSpec of either."""

# Annotations evaluated as written (no `from __future__ import annotations`): pydantic would
# otherwise compile and evaluate each field's annotation from its string when the class is
# made, 4 ms of every start with the spec sections (issue 14).

import math
from dataclasses import replace
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from cost import PRECISIONS, GPUSpec

from .catalog import gpu_catalog, unknown_name_message
from .errors import SpecError
from .fields import Frozen, Usd
from .plausible import HbmBandwidth, HbmCapacity, check_bare

__all__ = ["CUSTOM_REQUIRED", "GPUSection", "gpu_spec", "has_price", "node_gpus"]

CUSTOM_REQUIRED = ("name", "peak_flops", "hbm_capacity", "hbm_bandwidth")
"""What a GPU without a `base` must give."""


def _positive_rate(value: Any, precision: str) -> float:
    try:
        rate = check_bare(value, "peak_flops")
    except SpecError as err:
        raise ValueError(err.message) from None
    if not rate > 0:
        where = f" for {precision}" if precision else ""
        raise ValueError(f"the peak rate{where} must be greater than 0 FLOP/s, e.g. "
                         "'989 TFLOP/s'; leave out a precision the GPU lacks")
    return rate


def _parse_peaks(value: Any) -> Any:
    """One dense rate (for the training precision) or a mapping precision -> rate; every
    rate greater than zero (and, written without a unit, at least 1 TFLOP/s)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return _positive_rate(value, "")
    unknown = sorted(set(value) - set(PRECISIONS))
    if unknown:
        raise ValueError(f"unknown precision {unknown[0]!r}; use {', '.join(PRECISIONS)}")
    return {p: _positive_rate(v, p) for p, v in value.items()}


def _default_name(value: Any) -> Any:
    """A GPU from a `base` is called by the base's name unless it is given one."""
    if isinstance(value, dict) and value.get("base") is not None and value.get("name") is None:
        return {**value, "name": str(value["base"])}
    return value


class GPUSection(Frozen):
    """A GPU that is not in the catalog (name, peak_flops, hbm_capacity, hbm_bandwidth; its
    node's network defaults are those of an 8-GPU HGX node), or `base: CATALOG_NAME` with any
    of the same fields replacing the catalog's. An fp8 peak without a bf16 one implies bf16 at
    half of it (FP8_OVER_BF16), which fp8 training's attention and output layer run at.
    Prices are USD per GPU-hour; a GPU without a base and without `price_per_hour` has no
    price (refused for cost objectives). `compute_capability` (CUDA's, 9.0 for Hopper) says
    which kernels run on it (cost.deepep: DeepEP's dispatch); a GPU without one is taken to run
    them all."""

    base: str | None = None
    name: str | None = None
    peak_flops: Annotated[float | dict[str, float] | None, BeforeValidator(_parse_peaks)] = None
    hbm_capacity: HbmCapacity | None = None
    hbm_bandwidth: HbmBandwidth | None = None
    price_per_hour: Usd | None = None
    spot_price_per_hour: Usd | None = None
    compute_capability: Annotated[float, Field(ge=1.0, le=20.0)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _named(cls, value: Any) -> Any:
        return _default_name(value)

    @model_validator(mode="after")
    def _complete(self) -> "GPUSection":
        if self.name != self.base and self.name in gpu_catalog():
            # by name a calibration profile's fraction and the catalog's efficiency would
            # apply to it, and every listing would show the catalog GPU's name
            fix = (f"give it a name of its own, or leave name out (it is then {self.base})"
                   if self.base is not None else f"to change some of that GPU's figures "
                   f"write base: {self.name} instead of name, else give your GPU a name of "
                   "its own")
            raise SpecError(f"name {self.name!r} is a catalog GPU's; {fix}", field="name")
        if self.base is not None:
            if self.base not in gpu_catalog():
                raise SpecError(unknown_name_message("GPU", self.base, gpu_catalog()),
                                field="base")
            return self
        missing = [k for k in CUSTOM_REQUIRED if getattr(self, k) is None]
        if missing:
            raise SpecError(f"a GPU that is not in the catalog needs {', '.join(missing)}; "
                            "give them, or start from a catalog GPU with base: NAME (e.g. "
                            "{base: h100-80gb, price_per_hour: 2.1})", field=missing[0])
        return self


_FIELDS = {"hbm_capacity": "hbm_capacity_bytes", "hbm_bandwidth": "hbm_bandwidth_bytes_per_s",
           "price_per_hour": "price_usd_per_hour",
           "spot_price_per_hour": "spot_price_usd_per_hour",
           "compute_capability": "compute_capability"}
"""GPUSection field -> the GPUSpec field it sets (peak_flops aside: merged per precision)."""


FP8_OVER_BF16 = 2.0
"""Dense fp8 tensor FLOP/s over dense bf16 on every GPU with fp8 tensor cores: H100 SXM
1,979 / 989 TFLOP/s (NVIDIA H100 datasheet), B200 4.5 / 2.25 PFLOP/s (DGX B200 datasheet,
per GPU), MI300X 2,615 / 1,307 TFLOP/s (AMD Instinct MI300X data sheet)."""


def _peaks(gpu: GPUSection, precision: str) -> dict[str, float]:
    """The section's peak rates by precision. An fp8 rate without a bf16 one implies bf16 at
    1/FP8_OVER_BF16 of it: fp8 training still runs attention and the output layer in bf16
    (cost.transformer_time), so the model needs both."""
    if gpu.peak_flops is None:
        return {}
    peaks = dict(gpu.peak_flops) if isinstance(gpu.peak_flops, dict) else \
        {precision: gpu.peak_flops}
    if "fp8" in peaks and "bf16" not in peaks:
        peaks["bf16"] = peaks["fp8"] / FP8_OVER_BF16
    return peaks


def gpu_spec(gpu: str | GPUSection, precision: str) -> GPUSpec:
    """The catalog GPU of that name, a custom GPU (a single peak rate is `precision`'s; no
    price: NaN USD per hour), or a catalog GPU with the section's figures replacing its own."""
    if isinstance(gpu, str):
        return gpu_catalog()[gpu]
    given = {key: getattr(gpu, key) for key in _FIELDS if getattr(gpu, key) is not None}
    changes = {_FIELDS[key]: value for key, value in given.items()}
    if gpu.base is None:
        return GPUSpec(name=str(gpu.name), peak_flops_per_s=_peaks(gpu, precision),
                       **{"price_usd_per_hour": math.nan, **changes},
                       sources={"*": "user spec"})
    base = gpu_catalog()[gpu.base]
    replaced = [*given, *(["peak_flops"] if gpu.peak_flops is not None else [])]
    sources = {**base.sources, **{key: "user spec" for key in replaced}}
    return replace(base, name=str(gpu.name), sources=sources, **changes,
                   peak_flops_per_s={**base.peak_flops_per_s, **_peaks(gpu, precision)})


def has_price(gpu: str | GPUSection) -> bool:
    """Whether the GPU has an on-demand price: a catalog GPU's list price (the H800, sold
    in no public cloud, has none), a section's `price_per_hour`, or its base's."""
    if isinstance(gpu, str):
        return not math.isnan(gpu_catalog()[gpu].price_usd_per_hour)
    return gpu.price_per_hour is not None or (gpu.base is not None and has_price(gpu.base))


def node_gpus(gpu: str | GPUSection) -> int:
    """GPUs in the GPU's usual node: the catalog's (a base's), else an 8-GPU HGX node."""
    name = gpu if isinstance(gpu, str) else gpu.base
    return gpu_catalog()[name].gpus_per_node if name is not None else 8
