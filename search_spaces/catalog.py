"""The built-in GPU and model catalogs (catalog/gpus.yaml, catalog/models.yaml) as cost types.

Loaded once, with `importlib.resources` so they work from an installed wheel, and returned as
read-only mappings: the only cached data in the package (shared/STYLE.md, sec. 12). Each
entry is parsed from its file (_Entries) and converted to its cost type when first looked up:
a spec that names one GPU and one model parses and converts those two, not the whole catalog
(nor imports cost.moe for the mixtures of experts it does not use);
tests/search_spaces/test_catalog.py converts every entry.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Iterator, Mapping
from importlib import resources
from types import MappingProxyType
from typing import Any, TypeVar

import yaml

from cost import PRECISIONS, GPUSpec, ModelSpec

from .errors import SpecError
from .units import parse_quantity
from .yaml_io import FastStrictLoader

__all__ = [
    "gpu_catalog",
    "gpu_info",
    "model_catalog",
    "model_info",
    "unknown_name_message",
]

# gpus.yaml key -> (GPUSpec field, quantity kind)
_GPU_QUANTITIES = {
    "hbm_capacity": ("hbm_capacity_bytes", "bytes"),
    "hbm_bandwidth": ("hbm_bandwidth_bytes_per_s", "bytes_per_s"),
    "l2_cache": ("l2_cache_bytes", "bytes"),
    "gpus_per_node": ("gpus_per_node", "count"),
    "scale_up_domain": ("scale_up_domain_gpus", "count"),
    "scale_up_bandwidth": ("scale_up_bandwidth_bytes_per_s", "bytes_per_s"),
    "scale_out_bandwidth": ("scale_out_bandwidth_bytes_per_s", "bytes_per_s"),
    "scale_up_latency": ("scale_up_latency_s", "seconds"),
    "scale_out_latency": ("scale_out_latency_s", "seconds"),
    "price_per_hour": ("price_usd_per_hour", "usd"),
    "spot_price_per_hour": ("spot_price_usd_per_hour", "usd"),
}
_GPU_INFO_KEYS = ("description", "tdp", "year")
_GPU_REQUIRED = ("peak_flops", "hbm_capacity", "hbm_bandwidth")
_INTEGER_FIELDS = ("gpus_per_node", "scale_up_domain_gpus")
_MODEL_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len",
               "gated_mlp", "tied_embeddings", "dropout", "head_dim", "attention", "experts",
               "top_k", "expert_ffn_hidden", "shared_experts", "dense_layers",
               "moe_layer_freq", "mtp_layers", "expert_groups", "group_top_k", "expert_bias",
               "expert_clamp", "normalization", "linear_bias", "position_embedding",
               "rotary_base", "qk_norm", "norm_epsilon")


_T = TypeVar("_T")


class _Catalog(Mapping[str, _T]):
    """A catalog's names (the keys of its YAML file, in order) mapped to entries converted by
    `convert(name, raw entry)` on first lookup, then kept; read-only, like MappingProxyType
    (assigning an item raises TypeError)."""

    def __init__(self, raw: Mapping[str, Any], convert: Callable[[str, Any], _T]) -> None:
        self._raw, self._convert, self._done = raw, convert, dict[str, _T]()

    def __getitem__(self, name: str) -> _T:
        if name not in self._done:
            self._done[name] = self._convert(name, self._raw[name])  # KeyError as a dict's
        return self._done[name]

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def unknown_name_message(kind: str, name: object, known: Mapping[str, Any]) -> str:
    """'unknown GPU 'a100'; did you mean a100-40gb, a100-80gb? (choose one of ...)'."""
    import difflib  # only to word an error

    cased = [n for n in known if n.lower() == str(name).lower()]  # 'H100-80GB': only that
    prefixed = [n for n in known if n.startswith(str(name))][:3]
    close = cased or prefixed or \
        difflib.get_close_matches(str(name), list(known), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return (f"unknown {kind} {name!r}; {hint}choose one of {', '.join(known)} "
            "(`tuner catalog` lists them)")


_TOP_KEY = re.compile(r"^([^\s#'\"\-\[{!&*|>%@`.][^:#]*?):(?:\s|$)", re.MULTILINE)
"""A line that starts a key of the file's top-level (block) mapping: any other line of an
entry is indented, a comment, or blank."""


class _Entries(Mapping[str, Any]):
    """A catalog file's top-level mapping, each entry parsed when first looked up: the text
    is cut at the lines that start a top-level key and only that entry's lines are parsed
    (PyYAML's constructor runs in Python, 6 ms for the whole of both files on this project's
    machine; a spec names one GPU and one model). A file whose keys cannot be told apart by
    their lines (a key given twice, a document marker, flow style) is parsed whole, with its
    errors (tests/search_spaces/test_catalog.py parses every entry both ways)."""

    def __init__(self, text: str, filename: str) -> None:
        self._text, self._filename = text, filename
        starts = [(m.group(1).strip(), m.start()) for m in _TOP_KEY.finditer(text)]
        ends = [start for _, start in starts[1:]] + [len(text)]
        self._spans = {name: (start, end)  # no key: one end, len(text), left over
                       for (name, start), end in zip(starts, ends, strict=False)}
        self._parsed: dict[str, Any] = {}
        self._whole: dict[str, Any] | None = None
        if not starts or len(self._spans) != len(starts) or not _comments_only(
                text[:starts[0][1]]):
            self._whole = _parse_whole(text, filename)

    def _entry(self, name: str) -> Any:
        start, end = self._spans[name]
        data = yaml.load(self._text[start:end], Loader=FastStrictLoader)
        if not isinstance(data, dict) or list(data) != [name]:  # not one entry: read it all
            self._whole = _parse_whole(self._text, self._filename)
            return self._whole[name]
        return data[name]

    def __getitem__(self, name: str) -> Any:
        if self._whole is not None:
            return self._whole[name]
        if name not in self._parsed:
            self._parsed[name] = self._entry(name)  # KeyError as a dict's
        return self._parsed[name]

    def __contains__(self, name: object) -> bool:
        return name in (self._whole if self._whole is not None else self._spans)

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole if self._whole is not None else self._spans)

    def __len__(self) -> int:
        return len(self._whole if self._whole is not None else self._spans)


def _comments_only(text: str) -> bool:
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())


def _parse_whole(text: str, filename: str) -> dict[str, Any]:
    data = yaml.load(text, Loader=FastStrictLoader)
    if not isinstance(data, dict):
        raise SpecError("the catalog must be a mapping of names to entries", file=filename)
    return data


def _read(filename: str) -> Mapping[str, Any]:
    folder = resources.files("search_spaces").joinpath("catalog")
    return _Entries(folder.joinpath(filename).read_text(encoding="utf-8"), filename)


def _gpu_spec(name: str, entry: Mapping[str, Any]) -> GPUSpec:
    file = "gpus.yaml"
    missing = [key for key in _GPU_REQUIRED if key not in entry]
    if missing:
        raise SpecError(f"missing {', '.join(missing)}", file=file, field=name)
    direct = _direct_gpu_fields()
    known = {*_GPU_QUANTITIES, *_GPU_INFO_KEYS, *direct, "peak_flops", "sources"}
    extra = sorted(set(entry) - known)
    if extra:
        raise SpecError(f"unknown field {extra[0]!r}; known fields: {', '.join(sorted(known))}",
                        file=file, field=name)
    peaks = entry["peak_flops"]
    if not isinstance(peaks, dict) or not set(peaks) <= set(PRECISIONS):
        raise SpecError(f"peak_flops must map precisions ({', '.join(PRECISIONS)}) to rates",
                        file=file, field=f"{name}.peak_flops")
    values: dict[str, Any] = {
        target: parse_quantity(entry[key], kind, field=f"{name}.{key}")
        for key, (target, kind) in _GPU_QUANTITIES.items() if key in entry
    }
    values.update({key: parse_quantity(entry[key], "count", field=f"{name}.{key}")
                   for key in direct if key in entry})
    for key in _INTEGER_FIELDS:
        if key in values:
            values[key] = int(values[key])
    values.setdefault("price_usd_per_hour", math.nan)  # no list price: no price, never $0
    return GPUSpec(
        name=name,
        peak_flops_per_s={p: parse_quantity(v, "flops_per_s", field=f"{name}.peak_flops.{p}")
                          for p, v in peaks.items()},
        sources={str(k): str(v) for k, v in (entry.get("sources") or {}).items()},
        **values,
    )


def _direct_gpu_fields() -> set[str]:
    """GPUSpec fields that gpus.yaml may give under their own name (e.g. gemm_fraction)."""
    mapped = {target for target, _ in _GPU_QUANTITIES.values()}
    return {f.name for f in dataclasses.fields(GPUSpec)} - mapped - {
        "name", "peak_flops_per_s", "hbm_capacity_bytes", "sources"}


def _gpu_entry(name: str, entry: Mapping[str, Any]) -> GPUSpec:
    try:
        return _gpu_spec(name, entry)
    except SpecError as err:
        raise err.with_file("gpus.yaml") from err


@functools.cache
def gpu_catalog() -> Mapping[str, GPUSpec]:
    """Catalog name -> GPUSpec, SI units (read-only; each entry converted when first used)."""
    return _Catalog(_read("gpus.yaml"), _gpu_entry)


@functools.cache
def gpu_info() -> Mapping[str, Mapping[str, Any]]:
    """Catalog name -> descriptive keys of gpus.yaml (description, tdp, year), read-only."""
    return MappingProxyType({
        name: MappingProxyType({k: entry[k] for k in _GPU_INFO_KEYS if k in entry})
        for name, entry in _read("gpus.yaml").items()
    })


def _model_spec(name: str, entry: Mapping[str, Any]) -> ModelSpec:
    extra = sorted(set(entry) - {*_MODEL_KEYS, "source"})
    if extra:
        raise SpecError(f"unknown field {extra[0]!r}; known fields: {', '.join(_MODEL_KEYS)}",
                        file="models.yaml", field=name)
    values = {k: entry[k] for k in _MODEL_KEYS if k in entry}
    try:
        if isinstance(values.get("attention"), dict):
            from cost import MLA  # cost.mla, for a model with latent attention only

            values["attention"] = MLA(**values["attention"])
        if "experts" not in values:
            return ModelSpec(name=name, **values)
        from cost import MoEModelSpec  # with cost.moe, for the mixtures of experts only

        return MoEModelSpec(name=name, **values)
    except TypeError as err:
        raise SpecError(str(err), file="models.yaml", field=name) from err


@functools.cache
def model_catalog() -> Mapping[str, ModelSpec]:
    """Catalog name -> ModelSpec, a MoEModelSpec for a mixture of experts (read-only; each
    entry converted when first used)."""
    return _Catalog(_read("models.yaml"), _model_spec)


@functools.cache
def model_info() -> Mapping[str, Mapping[str, Any]]:
    """Catalog name -> {"source": ...} from models.yaml (read-only): the key of the file's
    header for the dense families, the config's citation itself for the mixtures of
    experts."""
    return MappingProxyType({
        name: MappingProxyType({"source": entry.get("source", "")})
        for name, entry in _read("models.yaml").items()
    })
