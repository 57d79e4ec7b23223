"""Calibration profiles: the cost model's efficiency parameters fitted to measured runs
(`tuner calibrate` writes them; a spec names one with `calibration: FILE`)."""

from __future__ import annotations

import difflib
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from cost import DEFAULT_EFFICIENCY, Efficiency

from .errors import SpecError
from .yaml_io import load_yaml, read_text

__all__ = ["load_profile", "profile_text"]

_BY_GPU = ("gemm_fraction_by_gpu", "layers_fraction_by_gpu")
"""Profile sections mapping a GPU name to a fraction; a layers fraction may exceed 1."""
_FRACTIONS = ("gemm_fraction", "attention_fraction", "hbm_fraction", "network_fraction",
              "dp_overlap", "tp_overlap", "usable_fraction", "overlap_slowdown", "ep_overlap")
_FLAGS = ("flash_attention", "ep_dedup")
_RATES = ("gemm_fraction", "attention_fraction", "hbm_fraction", "network_fraction",
          "layers_fraction", "ps_bytes_per_s", "layers_winograd")
"""Fields a rate is multiplied by (or divided by): 0 made steps of infinite time (null in the
JSON, a plan still feasible) or a ZeroDivisionError."""
_SECTIONS = ("efficiency", *_BY_GPU)


def _check(name: str, value: Any, file: str, where: str = "") -> float | bool | None:
    """`value` of efficiency field `name` checked (SpecError naming `where`, else
    efficiency.NAME); None for a fraction left to the GPU's own."""
    where = where or f"efficiency.{name}"
    if name in _FLAGS:
        if not isinstance(value, bool):
            raise SpecError("must be true or false", file=file, field=where)
        return value
    if value is None and name in ("gemm_fraction", "layers_fraction"):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
            or not math.isfinite(value):
        raise SpecError(f"must be a finite number >= 0, got {value!r}", file=file,
                        field=where)
    if name in _RATES and value == 0:
        raise SpecError("must be more than 0 (a rate is multiplied by it), got 0", file=file,
                        field=where)
    if name in _FRACTIONS and value > 1:
        raise SpecError(f"is a fraction: give a value in [0, 1], got {value}", file=file,
                        field=where)
    return float(value)


def _profile_data(path: str | Path) -> dict[str, Any]:
    """The mapping of a profile file; SpecError for a file that is missing, unreadable,
    empty, not a mapping, or holding a section a profile does not have (a misspelt
    `efficency:` was ignored, and the profile changed nothing)."""
    file = str(path)
    try:
        data = load_yaml(read_text(path), file=file)
    except FileNotFoundError:
        raise SpecError("no such calibration profile; check the path (relative to the spec) "
                        "or run `tuner calibrate`", file=file) from None
    except OSError as err:  # a directory, a file one may not read
        raise SpecError(f"cannot be read ({err.strerror or err}); give the profile file that "
                        "`tuner calibrate --out` wrote", file=file) from None
    if not isinstance(data, dict) or not data:
        got = "an empty file" if not data else f"a {type(data).__name__}"
        raise SpecError(f"a profile is a mapping with `efficiency` and `gemm_fraction_by_gpu` "
                        f"(as `tuner calibrate` writes it); got {got}", file=file)
    for key in data:
        if key not in _SECTIONS:
            close = difflib.get_close_matches(str(key), _SECTIONS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise SpecError(f"unknown section {key!r}; {hint}a profile has "
                            f"{', '.join(_SECTIONS)}", file=file, field=str(key))
        if data[key] is not None and not isinstance(data[key], dict):
            what = "field: value" if key == "efficiency" else "GPU name: fraction"
            raise SpecError(f"must be a mapping of {what}, got {data[key]!r}", file=file,
                            field=str(key))
    return data


def load_profile(path: str | Path) -> Efficiency:
    """The Efficiency of a profile file: `efficiency: {field: value}` over the defaults,
    `gemm_fraction_by_gpu: {gpu: fraction}` and `layers_fraction_by_gpu: {gpu: fraction}`.
    SpecError names the file and field."""
    file = str(path)
    data = _profile_data(path)
    known = {f.name for f in fields(Efficiency)} - set(_BY_GPU)
    given = data.get("efficiency") or {}
    unknown = sorted(set(given) - known)
    if unknown:
        raise SpecError(f"unknown field {unknown[0]!r}; known: {', '.join(sorted(known))}",
                        file=file, field="efficiency")
    values: dict[str, Any] = {k: _check(k, v, file) for k, v in given.items()}
    for section in _BY_GPU:
        by_gpu = data.get(section) or {}
        checked = "gemm_fraction" if section.startswith("gemm") else "layers_fraction"
        values[section] = tuple(
            (str(g), float(_check(checked, f, file, f"{section}.{g}") or 0.0))
            for g, f in sorted(by_gpu.items()))
    return DEFAULT_EFFICIENCY.with_(**values)


def profile_text(efficiency: Efficiency, *, header: str) -> str:
    """A profile file for `efficiency`: only the fields that differ from the defaults."""
    base, mine = DEFAULT_EFFICIENCY.as_dict(), efficiency.as_dict()
    changed = {k: v for k, v in mine.items() if k not in _BY_GPU and v != base[k]}
    body = {"efficiency": changed, **{k: mine[k] for k in _BY_GPU if mine[k] or
                                      k == "gemm_fraction_by_gpu"}}
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    return comment + yaml.safe_dump(body, sort_keys=True)
