"""Field types shared by the spec sections: counts, quantities with units, the frozen base."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from .errors import SpecError
from .units import parse_quantity

__all__ = [
    "MAX_GPUS",
    "MAX_SEED",
    "Bytes",
    "BytesPerS",
    "Count",
    "FlopsPerS",
    "Frozen",
    "NonNegative",
    "PositiveBytes",
    "PositiveBytesPerS",
    "PositiveNumber",
    "PositiveUsd",
    "Seconds",
    "Size",
    "TokenCount",
    "Usd",
]

MAX_GPUS = 1_000_000
"""More GPUs than any cluster has: a larger count is a typo."""
MAX_SEED = 2**32 - 1
"""The largest seed the samplers take: Optuna seeds numpy's RandomState, which refuses more
(a traceback from deep in `tuner search`, the spec already read)."""


class Frozen(BaseModel):
    """Base of every spec model: immutable, unknown keys refused. Validators are built when a
    model is first used (`defer_build`), not at import: a command builds those of the
    sections it reads, once, and `tuner --help` none."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def _quantity(kind: str, *, positive: bool = False) -> Any:
    def parse(value: Any) -> float:
        try:
            return parse_quantity(value, kind, field="", positive=positive)
        except SpecError as err:
            raise ValueError(err.message) from None

    return BeforeValidator(parse, json_schema_input_type=float | str)  # "400 Gbit/s"


Count = Annotated[int, Field(strict=True, ge=1, le=MAX_GPUS)]
"""A whole number of things (GPUs, nodes, parallel degrees): 1 to 1,000,000."""
Size = Annotated[int, Field(strict=True, ge=1, le=10**9)]
"""A model dimension or batch size: a whole number >= 1."""
Bytes = Annotated[float, _quantity("bytes")]
PositiveBytes = Annotated[float, _quantity("bytes", positive=True), Field(gt=0)]
BytesPerS = Annotated[float, _quantity("bytes_per_s")]
PositiveBytesPerS = Annotated[float, _quantity("bytes_per_s", positive=True),
                              Field(gt=0)]
FlopsPerS = Annotated[float, _quantity("flops_per_s", positive=True), Field(gt=0)]
Seconds = Annotated[float, _quantity("seconds", positive=True), Field(gt=0)]
Usd = Annotated[float, _quantity("usd")]
PositiveUsd = Annotated[float, _quantity("usd", positive=True), Field(gt=0)]
"""A limit in USD: 0 allows nothing, and a plan's share of it divided by zero."""
TokenCount = Annotated[float, _quantity("count")]
NonNegative = Annotated[float, _quantity("count")]
PositiveNumber = Annotated[float, _quantity("count", positive=True), Field(gt=0)]
"""A plain number above 0 (`true` refused, not read as 1)."""
