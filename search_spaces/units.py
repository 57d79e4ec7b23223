"""Quantities with units ("80 GiB", "400 Gbit/s", "989 TFLOP/s", "5 us") parsed into SI floats.

Decimal prefixes k M G T P E are powers of 10, binary prefixes Ki Mi Gi Ti Pi Ei powers of 2;
"B"/"byte" are bytes, "b"/"bit" bits (a bit is 1/8 byte: "400 Gbit/s" = 50e9 bytes/s).
A plain number (or a numeric string such as "300e9") is already in base units.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Literal

from .errors import SpecError

__all__ = ["KINDS", "Kind", "parse_quantity", "quantity_factor"]

Kind = Literal["bytes", "bytes_per_s", "flops_per_s", "seconds", "usd", "count"]
KINDS: tuple[str, ...] = ("bytes", "bytes_per_s", "flops_per_s", "seconds", "usd", "count")

_EXAMPLES = {
    "bytes": '"80 GiB" or 85899345920',
    "bytes_per_s": '"900 GB/s" or "400 Gbit/s"',
    "flops_per_s": '"989 TFLOP/s" or 989e12',
    "seconds": '"5 us", "3 ms" or 1.5',
    "usd": "3.43 or \"3.43 USD\"",
    "count": "8 or 300e9",
}
_DESCRIPTION = {
    "bytes": "a size in bytes",
    "bytes_per_s": "a bandwidth (bytes/s)",
    "flops_per_s": "a compute rate (FLOP/s)",
    "seconds": "a duration",
    "usd": "an amount in USD",
    "count": "a plain number",
}
_NUMBER = re.compile(r"^\s*\$?\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*?)\s*$")
_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {p + "i": 2.0 ** (10 * n) for n, p in enumerate("KMGTPE", start=1)}


def _unit_table() -> dict[str, tuple[str, float, float]]:
    """Unit string -> (kind, multiplier, divisor): SI value = number * multiplier / divisor
    (dividing keeps "5 us" exactly 5e-6)."""
    table: dict[str, tuple[str, float, float]] = {}
    for prefix, factor in {**_DECIMAL, **_BINARY}.items():
        for name, bits in (("B", 1.0), ("byte", 1.0), ("bytes", 1.0),
                           ("b", 8.0), ("bit", 8.0), ("bits", 8.0)):
            table[prefix + name] = ("bytes", factor, bits)
            for rate in ("/s", "ps"):
                table[prefix + name + rate] = ("bytes_per_s", factor, bits)
    for prefix, factor in _DECIMAL.items():
        for name in ("FLOP/s", "FLOPS", "FLOPs/s", "flop/s", "flops", "FLOPs"):
            table[prefix + name] = ("flops_per_s", factor, 1.0)
    seconds = {"s": (1.0, 1.0), "sec": (1.0, 1.0), "ms": (1.0, 1e3), "us": (1.0, 1e6),
               "µs": (1.0, 1e6), "μs": (1.0, 1e6), "ns": (1.0, 1e9), "min": (60.0, 1.0),
               "h": (3600.0, 1.0), "hour": (3600.0, 1.0), "hours": (3600.0, 1.0),
               "d": (86400.0, 1.0), "day": (86400.0, 1.0), "days": (86400.0, 1.0)}
    table.update({name: ("seconds", m, d) for name, (m, d) in seconds.items()})
    table.update({"USD": ("usd", 1.0, 1.0), "usd": ("usd", 1.0, 1.0)})
    return table


_UNITS = _unit_table()


def parse_quantity(value: object, kind: str, *, field: str, positive: bool = False) -> float:
    """`value` (a number in base units, or a string with a unit of `kind`) as a float in SI
    base units: bytes, bytes/s, FLOP/s, seconds, USD, or a plain count.

    Raises SpecError naming `field` and a correct example for negative (with `positive`,
    zero too), NaN/inf, boolean, unparseable values and units of another kind ("80 GB/s"
    where bytes are expected)."""
    if kind not in _EXAMPLES:
        raise ValueError(f"unknown quantity kind {kind!r}; choose one of {', '.join(KINDS)}")
    hint = f"write {_DESCRIPTION[kind]}, e.g. {_EXAMPLES[kind]}"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SpecError(f"expected {_DESCRIPTION[kind]}, got {value!r}; {hint}", field=field)
    number = float(value) if not isinstance(value, str) else _parse_text(value, kind, field, hint)
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "above 0" if positive else ">= 0"
        raise SpecError(f"{value!r} must be a finite number {bound}; {hint}", field=field)
    return number


def _parse_text(text: str, kind: str, field: str, hint: str) -> float:
    match = _NUMBER.match(text)
    if match is None:
        raise SpecError(f"cannot read {text!r} as {_DESCRIPTION[kind]}; {hint}", field=field)
    digits, unit = match.group(1), match.group(2)
    if text.strip().startswith("$"):
        unit = unit or "USD"
    if not unit:
        return float(digits)
    found = _UNITS.get(unit)
    if found is None:
        raise SpecError(f"unknown unit {unit!r} in {text!r}; {hint}", field=field)
    unit_kind, multiplier, divisor = found
    if unit_kind != kind:
        raise SpecError(f"{text!r} is {_DESCRIPTION[unit_kind]}, not {_DESCRIPTION[kind]}; "
                        f"{hint}", field=field)
    return float(Decimal(digits) * Decimal(multiplier) / Decimal(divisor))


def quantity_factor(unit: str) -> float:
    """SI value of one `unit` ("Gbit/s" -> 1.25e8); ValueError for an unknown unit."""
    found = _UNITS.get(unit)
    if found is None:
        raise ValueError(f"unknown unit {unit!r}")
    return found[1] / found[2]
