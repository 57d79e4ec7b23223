"""Hypothesis strategies for hostile specs: a small valid spec with exactly one field made
wrong (a wrong type, a negative, zero or absurd value, a unit of the wrong kind, a bare number
too small for its field, a name not in the catalog, an unknown field), paired with the dotted
path of the field an error must name."""

from __future__ import annotations

import copy
import keyword
from typing import Any

from hypothesis import strategies as st

from search_spaces import gpu_catalog, model_catalog

VALID: dict[str, Any] = {
    "model": "gpt3-1.3b",
    "training": {"global_batch": 64, "tokens": "300e9", "precision": "bf16"},
    "cluster": {"gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 8},
    "plan": {"tp": 2, "pp": 2, "micro_batch": 2, "recompute": "selective", "zero": 1},
}
"""gpt3-1.3b on 2 x 8 A100-80GB: valid and feasible (tests check it stays so)."""

CUSTOM_GPU: dict[str, Any] = {"name": "x", "peak_flops": "900 TFLOP/s",
                              "hbm_capacity": "80 GiB", "hbm_bandwidth": "3 TB/s"}

_COUNTS = ["training.global_batch", "cluster.nodes", "cluster.gpus_per_node", "plan.tp",
           "plan.pp", "plan.micro_batch"]
"""Positive integers."""
_SIZES = ["cluster.gpu.hbm_capacity"]
_RATES = ["cluster.scale_up_bandwidth", "cluster.scale_out_bandwidth",
          "cluster.gpu.hbm_bandwidth"]
_FLOPS = ["cluster.gpu.peak_flops"]
_ENUMS = {"training.precision": ["bf16", "fp16", "fp8", "fp32"],
          "plan.recompute": ["none", "selective", "full"],
          "plan.offload": ["none", "optimizer", "optimizer+weights"]}
_SECTIONS = ["training", "cluster", "plan"]

_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=2, max_size=12)
_not_numbers = st.one_of(
    _words, st.just([]), st.just({}), st.floats(0.1, 0.9).map(lambda f: round(f + 2, 2)))
"""Values no count accepts: words, an empty list, an empty mapping, fractions."""
_REQUIRED = {"training.global_batch", "cluster.gpu.hbm_capacity", "cluster.gpu.hbm_bandwidth",
             "cluster.gpu.peak_flops"}
"""Fields without a default, where null is wrong too (elsewhere null means the default)."""


def _with(path: str, value: Any) -> dict[str, Any]:
    """VALID with `path` (dotted) set to `value`; a `cluster.gpu.*` path uses CUSTOM_GPU."""
    data = copy.deepcopy(VALID)
    if path.startswith("cluster.gpu."):
        data["cluster"]["gpu"] = dict(CUSTOM_GPU)
    node = data
    *parents, leaf = path.split(".")
    for key in parents:
        node = node[key]
    node[leaf] = value
    return data


def _bad_count(path: str) -> st.SearchStrategy[tuple[dict[str, Any], str]]:
    values = st.one_of(st.integers(max_value=0), st.integers(10**13, 10**18), _not_numbers,
                       *([st.none()] if path in _REQUIRED else []))
    return values.map(lambda v: (_with(path, v), path))


def _quantity(number: st.SearchStrategy[float], units: list[str]) -> st.SearchStrategy[str]:
    return st.tuples(number, st.sampled_from(units)).map(lambda p: f"{p[0]:g} {p[1]}")


def _bad_quantity(path: str, wrong_units: list[str], right_units: list[str]
                  ) -> st.SearchStrategy[tuple[dict[str, Any], str]]:
    positive = st.floats(1, 1e4, allow_nan=False)
    values = st.one_of(
        _quantity(positive, wrong_units),                         # a unit of another kind
        _quantity(st.floats(-1e4, -1e-3), right_units),           # negative
        st.sampled_from(right_units).map(lambda u: f"0 {u}"),     # zero
        _quantity(positive, ["furlongs", "GB/fortnight", "parsec"]),  # no such unit
        positive.map(lambda f: round(f, 2)),                      # bare: too small to be meant
        _words, st.just([]), st.integers(max_value=0),
        *([st.none()] if path in _REQUIRED else []))
    return values.map(lambda v: (_with(path, v), path))


def _bad_enum(path: str, allowed: list[str]) -> st.SearchStrategy[tuple[dict[str, Any], str]]:
    values = st.one_of(_words.filter(lambda w: w not in allowed), st.integers(), st.none())
    return values.map(lambda v: (_with(path, v), path))


def _unknown_name(path: str, known: set[str]) -> st.SearchStrategy[tuple[dict[str, Any], str]]:
    names = _words.filter(lambda w: w not in known)
    return names.map(lambda v: (_with(path, v), path))


def _unknown_field() -> st.SearchStrategy[tuple[dict[str, Any], str]]:
    known = {"name", "model", "training", "cluster", "plan", "objective", "constraints",
             "search", "calibration", *(k for s in _SECTIONS for k in VALID[s])}
    names = _words.filter(lambda w: w not in known and not keyword.iskeyword(w))

    def place(section: str | None, name: str) -> tuple[dict[str, Any], str]:
        if section is None:
            return {**copy.deepcopy(VALID), name: 1}, name
        return _with(f"{section}.{name}", 1), f"{section}.{name}"

    return st.tuples(st.sampled_from([None, *_SECTIONS]), names).map(lambda p: place(*p))


def hostile_specs() -> st.SearchStrategy[tuple[dict[str, Any], str]]:
    """(spec data with one bad field, the dotted path an error must name)."""
    return st.one_of(
        *(_bad_count(p) for p in _COUNTS),
        *(_bad_quantity(p, ["GB/s", "TFLOP/s"], ["GiB", "GB", "TB"]) for p in _SIZES),
        *(_bad_quantity(p, ["GiB", "TFLOP/s"], ["GB/s", "Gbit/s", "TB/s"]) for p in _RATES),
        *(_bad_quantity(p, ["GiB", "GB/s"], ["TFLOP/s", "PFLOP/s"]) for p in _FLOPS),
        *(_bad_enum(p, allowed) for p, allowed in _ENUMS.items()),
        _unknown_name("model", set(model_catalog())),
        _unknown_name("cluster.gpu", set(gpu_catalog())),
        _unknown_field(),
    )
