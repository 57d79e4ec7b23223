"""Bare numbers that cannot mean what they say.

A number without a unit is in base units (shared/SPEC.md): `hbm_capacity: 94` is 94 bytes and
`scale_out_bandwidth: 400` is 400 bytes/s. Such a value is never what a user meant, and the
model would answer for it anyway (a 12-year step, "-2.4 GiB usable"). Each field below has the
least value a bare number may take, with the reason; a bare number under it is refused with the
unit the user probably meant. A value written with a unit is always taken as written (a
512 MB GPU is `"512 MB"`), and so is the catalog, whose values all carry units.

The bounds sit far below any real part (tests/search_spaces/test_plausible.py checks every
catalog GPU against them): the smallest GPU memory in the catalog is 12 GiB (K80), the
slowest network 1.25 Gbit/s per GPU (K80 on AWS p2), the lowest peak 4.4 TFLOP/s (K80 fp32).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from .errors import SpecError
from .units import parse_quantity, quantity_factor

__all__ = [
    "BOUNDS",
    "Bound",
    "CheckpointBandwidth",
    "ExpansionBandwidth",
    "ExpansionCapacity",
    "HbmBandwidth",
    "HbmCapacity",
    "InterPoolBandwidth",
    "ScaleOutBandwidth",
    "ScaleOutPerNode",
    "ScaleUpBandwidth",
    "ServerBandwidth",
    "bare_checked",
    "check_bare",
    "is_bare",
]


@dataclass(frozen=True)
class Bound:
    """The least SI value a bare number of one field may take, and what it likely meant."""

    kind: str  # quantity kind of search_spaces.units
    least: float  # SI; a bare number under it (and not 0 where `zero` allows it) is refused
    units: tuple[str, ...]  # the units users write for this field, the likeliest first
    typical: tuple[float, float]  # SI range a real value falls in: picks among `units`
    reason: str  # why a value under `least` cannot be meant
    what: str = ""  # what the field measures ("per GPU, one direction")
    zero: bool = False  # 0 is a real value (no expansion tier)
    also: str = ""  # a last hint


_NETWORK = "no network link of a training cluster is slower than 0.1 GB/s (1 Gbit/s Ethernet)"
BOUNDS: dict[str, Bound] = {
    "hbm_capacity": Bound("bytes", 1e9, ("GiB", "TiB"), (1e9, 2e13),
                          "no GPU trains with less than 1 GB of memory"),
    "hbm_bandwidth": Bound("bytes_per_s", 1e8, ("TB/s", "GB/s"), (5e10, 5e13),
                           "no GPU memory is slower than 0.1 GB/s"),
    "peak_flops": Bound("flops_per_s", 1e12, ("TFLOP/s", "PFLOP/s"), (1e12, 1e17),
                        "no GPU in use for training peaks under 1 TFLOP/s"),
    "scale_up_bandwidth": Bound("bytes_per_s", 1e8, ("GB/s", "Gbit/s"), (1e9, 5e12), _NETWORK,
                                "per GPU, one direction, inside a node"),
    "scale_out_bandwidth": Bound("bytes_per_s", 1e8, ("Gbit/s", "GB/s"), (1e8, 5e11),
                                 _NETWORK, "per GPU, one direction, between nodes",
                                 also="(a whole node's NICs: scale_out_bandwidth_per_node)"),
    "scale_out_bandwidth_per_node": Bound(
        "bytes_per_s", 1e8, ("Gbit/s", "Tbit/s", "GB/s"), (1e8, 5e12), _NETWORK,
        "a whole node's NICs together, one direction",
        also="(per GPU: scale_out_bandwidth)"),
    "inter_pool_bandwidth": Bound("bytes_per_s", 1e8, ("Gbit/s", "GB/s"), (1e8, 5e11), _NETWORK,
                                  "per GPU, one direction, between pools"),
    "parameter_server_bandwidth": Bound("bytes_per_s", 1e8, ("Gbit/s", "GB/s"), (1e8, 5e11),
                                        _NETWORK, "per parameter server, one direction"),
    "checkpoint_bandwidth": Bound("bytes_per_s", 1e6, ("GB/s", "MB/s"), (1e6, 1e12),
                                  "no storage a checkpoint is written to is slower than 1 MB/s",
                                  "per node, to durable storage"),
    "expansion.capacity": Bound("bytes", 1e9, ("GiB", "TiB"), (1e9, 1e15),
                                "a memory expansion tier holds at least 1 GB (0: none)",
                                zero=True),
    "expansion.bandwidth": Bound("bytes_per_s", 1e8, ("GB/s", "Gbit/s"), (1e9, 5e12),
                                 "no memory expansion link is slower than 0.1 GB/s (0: none)",
                                 "per GPU, one direction", zero=True),
}
"""Field (as written under `cluster`, `cluster.gpu`, a pool) -> its bound for bare numbers."""


def is_bare(value: object) -> bool:
    """True for a number written without a unit: 400, 4e11, "4e11"."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if not isinstance(value, str):
        return False
    try:
        float(value.strip())
    except ValueError:
        return False
    return True


def _likely_unit(number: float, bound: Bound) -> str:
    """The first of the field's units that puts `number` in the field's typical range."""
    low, high = bound.typical
    for unit in bound.units:
        if low <= number * quantity_factor(unit) <= high:
            return unit
    return bound.units[0]


def _si(value: float, kind: str) -> str:
    names = {"bytes": "bytes", "bytes_per_s": "bytes/s", "flops_per_s": "FLOP/s"}
    return f"{value:g} {names.get(kind, '')}".strip()


def check_bare(value: Any, field: str) -> float:
    """`value` parsed into SI units (search_spaces.units), above 0 unless the field's bound
    takes 0 (Bound.zero: an expansion tier of none); SpecError when it is a bare number under
    the field's bound (BOUNDS), naming the unit the user probably meant."""
    bound = BOUNDS[field]
    number = parse_quantity(value, bound.kind, field="", positive=not bound.zero)
    if not is_bare(value) or number >= bound.least or number == 0:
        return number
    unit = _likely_unit(number, bound)
    what = f" ({bound.what})" if bound.what else ""
    also = f" {bound.also}" if bound.also else ""
    raise SpecError(f"{value!r} has no unit, so it is {_si(number, bound.kind)}{what}, too "
                    f"little to be meant: {bound.reason}; did you mean \"{number:g} {unit}\"? "
                    f"Write the unit{also}")


def bare_checked(field: str) -> BeforeValidator:
    """A pydantic validator: the value in SI units (a number, or a string with a unit), a bare
    number checked against BOUNDS[field]."""

    def parse(value: Any) -> float:
        try:
            return check_bare(value, field)
        except SpecError as err:
            raise ValueError(err.message) from None

    return BeforeValidator(parse, json_schema_input_type=float | str)  # "400 Gbit/s"


HbmCapacity = Annotated[float, bare_checked("hbm_capacity"), Field(gt=0)]
HbmBandwidth = Annotated[float, bare_checked("hbm_bandwidth"), Field(gt=0)]
ScaleUpBandwidth = Annotated[float, bare_checked("scale_up_bandwidth"), Field(gt=0)]
ScaleOutBandwidth = Annotated[float, bare_checked("scale_out_bandwidth"), Field(gt=0)]
ScaleOutPerNode = Annotated[float, bare_checked("scale_out_bandwidth_per_node"), Field(gt=0)]
InterPoolBandwidth = Annotated[float, bare_checked("inter_pool_bandwidth"), Field(gt=0)]
ServerBandwidth = Annotated[float, bare_checked("parameter_server_bandwidth"), Field(gt=0)]
CheckpointBandwidth = Annotated[float, bare_checked("checkpoint_bandwidth"), Field(gt=0)]
ExpansionCapacity = Annotated[float, bare_checked("expansion.capacity"), Field(ge=0)]
ExpansionBandwidth = Annotated[float, bare_checked("expansion.bandwidth"), Field(ge=0)]
