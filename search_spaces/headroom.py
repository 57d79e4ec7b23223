"""`constraints.memory_headroom`: HBM each GPU must leave free, as a size ("4 GiB") or as a
share of the HBM a plan may use ("10%"), for what the model does not see (allocator
fragmentation, a larger batch later, a profiler). A plan meets it when its memory per GPU plus
the headroom fits in the usable HBM."""

from __future__ import annotations

import re
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator

from .errors import SpecError
from .units import parse_quantity

__all__ = ["Headroom", "parse_headroom", "required_free_bytes"]

_PERCENT = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*%\s*$")
_LEAST_BARE_BYTES = 1e6
"""A bare number is bytes: under 1 MB it is a size or a share written without its unit."""


def parse_headroom(value: Any) -> tuple[float, float]:
    """(bytes, share of the usable HBM) of a headroom: "4 GiB" -> (4 GiB, 0), "10%" -> (0,
    0.1). SpecError (message only) for anything else."""
    if isinstance(value, str) and (match := _PERCENT.match(value)):
        share = float(match.group(1)) / 100.0
        if not 0.0 <= share < 1.0:
            raise SpecError(f"{value!r} must be a share from 0% to under 100% of the usable "
                            "HBM, e.g. '10%'")
        return 0.0, share
    hint = 'a size such as "4 GiB" or a share of the usable HBM such as "10%"'
    try:
        size = parse_quantity(value, "bytes", field="")
    except SpecError as err:
        raise SpecError(f"cannot read {value!r} as HBM to leave free; write {hint}") from err
    bare = not isinstance(value, str) or not re.search(r"[A-Za-z]", value)
    if bare and 0 < size < _LEAST_BARE_BYTES:
        raise SpecError(f"{value!r} has no unit, so it is {size:g} bytes, too little to be "
                        f'meant; did you mean "{size:g} GiB" or "{size:g}%"? Write the unit')
    return size, 0.0


def _normalise(value: Any) -> Any:
    """The headroom as given (a string, or a bare number of bytes), once it parses."""
    if value is None:
        return None
    try:
        parse_headroom(value)
    except SpecError as err:
        raise ValueError(err.message) from None
    return value if isinstance(value, str) else float(value)


Headroom = Annotated[str | float, BeforeValidator(_normalise)]
"""The spec type of `memory_headroom`: "4 GiB", "10%", or a number of bytes."""


def required_free_bytes(value: str | float, usable_bytes: Any) -> Any:
    """Bytes of HBM a plan must leave free under `value`, of `usable_bytes` (an array)."""
    size, share = parse_headroom(value)
    return size + share * np.asarray(usable_bytes, dtype=np.float64)
