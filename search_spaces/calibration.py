"""Calibration profiles: the cost model's efficiency parameters fitted to measured runs
(`tuner calibrate` writes them; a spec names one with `calibration: FILE`)."""

from __future__ import annotations

import difflib
import math
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from cost import DEFAULT_EFFICIENCY, Efficiency

from .errors import SpecError
from .sections import StackSection
from .yaml_io import load_yaml, read_text

__all__ = ["load_profile", "profile_text"]

_BY_GPU = ("gemm_fraction_by_gpu", "layers_fraction_by_gpu")
"""Profile sections mapping a GPU name to a fraction; a layers fraction may exceed 1."""
_FRACTIONS = ("gemm_fraction", "attention_fraction", "hbm_fraction", "network_fraction",
              "dp_overlap", "tp_overlap", "usable_fraction", "overlap_slowdown", "ep_overlap")
_RATES = ("gemm_fraction", "attention_fraction", "hbm_fraction", "network_fraction",
          "layers_fraction", "ps_bytes_per_s", "layers_winograd")
"""Fields a rate is multiplied by (or divided by): 0 made steps of infinite time (null in the
JSON, a plan still feasible) or a ZeroDivisionError."""
_SECTIONS = ("efficiency", *_BY_GPU)
_NUMBERS = frozenset(f.name for f in fields(Efficiency) if f.type in ("float", "float | None"))
"""The efficiency fields that are numbers; the others are settings (a name, a flag, a list
of names) that take the values the spec's `stack` section takes for them."""


def _choices(annotation: Any) -> tuple[Any, ...]:
    """The values a `stack` field's type allows: its Literal's, true and false for a flag
    (None left out: a profile gives a value or leaves the field out)."""
    if annotation is bool:
        return (True, False)
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    return tuple(c for a in get_args(annotation) if a is not type(None) for c in _choices(a))


def _shown(value: Any) -> str:
    """A value as YAML writes it: true, null, bf16, 0."""
    return yaml.safe_dump(value, default_flow_style=True).removesuffix("\n...\n").strip()


def _setting(name: str, value: Any, file: str, where: str) -> Any:
    """`value` of a setting of the efficiency (a name such as `params: bf16`, a flag, a list
    of names), checked against what the spec's `stack.NAME` takes: a number (`params: 0`)
    or null for a setting that has a value was taken as it came."""
    annotation = StackSection.model_fields[name].annotation
    if value is None and getattr(DEFAULT_EFFICIENCY, name) is None:
        return None  # the training precision's, as leaving it out
    listed = [a for a in get_args(annotation) if get_origin(a) is tuple]  # tuple[..., ...]
    if listed:
        allowed = _choices(get_args(listed[0])[0])
        if isinstance(value, list) and all(isinstance(v, str) and v in allowed
                                           for v in value):
            return tuple(value)
        raise SpecError(f"must be a list of {', '.join(allowed)} (the names the spec's "
                        f"stack.{name} takes), got {_shown(value)}", file=file, field=where)
    allowed = _choices(annotation)
    if any(type(value) is type(c) and value == c for c in allowed):
        return value
    raise SpecError(f"must be one of {', '.join(_shown(c) for c in allowed)} (what the "
                    f"spec's stack.{name} takes), got {_shown(value)}", file=file, field=where)


def _check(name: str, value: Any, file: str, where: str = "", *, by_gpu: bool = False) -> Any:
    """`value` of efficiency field `name` checked (SpecError naming `where`, else
    efficiency.NAME); None for a fraction left to the GPU's own (a GPU's entry of a by-GPU
    section has a number: a null one was taken as 0)."""
    where = where or f"efficiency.{name}"
    if name not in _NUMBERS:
        return _setting(name, value, file, where)
    if value is None and name in ("gemm_fraction", "layers_fraction"):
        if not by_gpu:
            return None
        raise SpecError(f"must be a number more than 0, got null; leave the GPU out to use "
                        f"the profile's {name} (or the catalog's)", file=file, field=where)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
            or not math.isfinite(value):
        raise SpecError(f"must be a finite number >= 0, got {_shown(value)}", file=file,
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
        close = difflib.get_close_matches(str(unknown[0]), sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise SpecError(f"unknown field {unknown[0]!r}; {hint}known: {', '.join(sorted(known))}",
                        file=file, field="efficiency")
    values: dict[str, Any] = {k: _check(k, v, file) for k, v in given.items()}
    for section in _BY_GPU:
        by_gpu = data.get(section) or {}
        checked = "gemm_fraction" if section.startswith("gemm") else "layers_fraction"
        values[section] = tuple(
            (str(g), float(_check(checked, f, file, f"{section}.{g}", by_gpu=True)))
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
