"""What a study answers: the whole resolved problem, so that a study is continued only with the
problem it was made for.

The identity of a study is its spec (less `name` and `search`, which do not change the problem),
the catalog values the spec resolves to (the GPUs a name or a mapping's `base` stands for, of
the cluster or of each of its pools: the models are already resolved in the spec), the
calibration profile's contents (the efficiency the model runs with, not the file's name) and
the cost model's version, which changes whenever the code of `cost/` does (a digest of its
compiled code without docstrings and line numbers: a comment, a docstring or a blank line does
not move it, any change of a formula does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import dis
import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from types import CodeType
from typing import Any

import cost
from search_spaces import StudySpec, gpu_catalog, is_choice

__all__ = ["CACHE_ENV", "cache_root", "cached_code_digest", "code_digest", "cost_model_version",
           "for_gpus", "gpu_labels", "problem", "problem_differences", "problem_digest",
           "problem_leaf_differences", "shown_differences",
           "without_profile_name"]

CACHE_ENV = "TUNER_CACHE_DIR"
"""The cache folder of cluster-tuner, or `off` (tuner.cli.evaluated reads the same variable)."""

_NOT_THE_PROBLEM = {"name", "search", "calibration"}
"""Left out of the spec's part: what does not change the problem (more trials, another
sampler) and the calibration profile's file name, whose contents are the `calibration` part."""
_NOP = dis.opmap["NOP"]
_SHOWN = 3


@functools.cache
def cost_model_version() -> str:
    """`COST_MODEL_VERSION+<12 hex>`: the digest of every module of the `cost` package as
    compiled code, in file-name order (code_digest, through its cache)."""
    return f"{cost.COST_MODEL_VERSION}+{cached_code_digest(Path(cost.__file__).parent)[:12]}"


def cache_root() -> Path | None:
    """The user's cache folder of cluster-tuner: `$TUNER_CACHE_DIR`, else
    `$XDG_CACHE_HOME/cluster-tuner`, else `~/.cache/cluster-tuner`; None when TUNER_CACHE_DIR
    is `off` (the XDG Base Directory Specification's cache home)."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cluster-tuner"


def cached_code_digest(folder: Path) -> str:
    """code_digest(folder), kept in the cache folder (`code-digest/`) under a key of what it is
    a function of: the files' paths and bytes and Python's version and bytecode tag. Hashing
    the bytes takes milliseconds where compiling every module takes a tenth of a second, and
    opening a study waits for it. A cache that cannot be read or written is no cache."""
    key = hashlib.sha256(repr((sys.version, sys.implementation.cache_tag)).encode())
    for path in sorted(folder.rglob("*.py")):
        data = path.read_bytes()
        key.update(repr((str(path.relative_to(folder)), len(data))).encode() + data)
    root = cache_root()
    entry = root / "code-digest" / key.hexdigest() if root is not None else None
    with contextlib.suppress(OSError, UnicodeDecodeError):
        kept = entry.read_text(encoding="ascii").strip() if entry is not None else ""
        if len(kept) == 64 and all(c in "0123456789abcdef" for c in kept):
            return kept
    digest = code_digest(folder)
    if entry is not None:
        _write_whole(entry, digest)
    return digest


def _write_whole(path: Path, text: str) -> None:
    """`text` into `path` through a temporary file renamed into place; nothing if it fails."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="ascii") as out:
                out.write(text)
            os.replace(temporary, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)


def code_digest(folder: Path) -> str:
    """SHA-256 (hex) of the `*.py` files under `folder`, each compiled without docstrings
    (optimize=2, which drops asserts too) and hashed without its line numbers or file name:
    what the code computes, not how it is laid out or commented. Compiling is some five
    times faster than dumping syntax trees, and opening a study waits for it. Bytecode is
    Python's own: another minor version of Python gives another digest."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.py")):
        code = compile(path.read_bytes(), path.name, "exec", dont_inherit=True, optimize=2)
        digest.update(path.name.encode())
        _hash_code(code, digest)
    return digest.hexdigest()


def _hash_code(code: CodeType, digest: Any) -> None:
    """Feed one code object (and those nested in it) to `digest`: its bytecode less NOPs (a
    docstring leaves one, to keep its line), names and constants; not its line table, first
    line or file name."""
    units = code.co_code
    digest.update(b"".join(units[i:i + 2] for i in range(0, len(units), 2)
                           if units[i] != _NOP))
    digest.update(repr((code.co_name, code.co_names, code.co_varnames, code.co_freevars,
                        code.co_cellvars, code.co_argcount, code.co_posonlyargcount,
                        code.co_kwonlyargcount, code.co_flags)).encode())
    for const in code.co_consts:
        if isinstance(const, CodeType):
            _hash_code(const, digest)
        else:
            digest.update(_constant(const).encode())


def _constant(value: object) -> str:
    """A constant's text, the same in every process: a frozenset (`x in {...}`) in sorted
    order, as its iteration order follows string hashing, which changes per process."""
    if isinstance(value, frozenset):
        return "frozenset(" + ",".join(sorted(_constant(v) for v in value)) + ")"
    if isinstance(value, tuple):
        return "(" + ",".join(_constant(v) for v in value) + ")"
    return repr(value)


def _gpu_names(spec: StudySpec) -> list[str]:
    """The catalog GPUs the spec resolves to, the cluster's or each pool's: those it names and
    the bases of its GPU mappings (a GPU of one's own is in the spec itself)."""
    found: set[str] = set()
    for value in [spec.cluster.gpu, *(p.gpu for p in spec.cluster.pools or ())]:
        values = value.values() if is_choice(value) else (value,)  # type: ignore[union-attr]
        for v in values:
            name = v if isinstance(v, str) else getattr(v, "base", None)
            if name is not None:
                found.add(name)
    return sorted(found)


def _catalog(spec: StudySpec) -> dict[str, Any]:
    gpus = {}
    for name in _gpu_names(spec):
        entry = dataclasses.asdict(gpu_catalog()[name])
        entry.pop("sources", None)  # citations do not change a number
        gpus[name] = entry
    return {"gpus": gpus}


def problem(spec: StudySpec) -> dict[str, Any]:
    """The resolved problem as builtin types: spec, catalog, calibration, cost model."""
    return json.loads(json.dumps({
        "spec": spec.model_dump(mode="json", exclude=_NOT_THE_PROBLEM),
        "catalog": _catalog(spec),
        "calibration": spec.efficiency().as_dict(),
        "cost_model": cost_model_version(),
    }, sort_keys=True, default=str))


def gpu_labels(spec: StudySpec) -> list[str]:
    """The names the spec's GPUs go by in a calibration profile (cost.Efficiency looks a
    per-GPU fraction up by the GPU's name): a catalog name, or a GPU mapping's `name`."""
    found: set[str] = set()
    for value in [spec.cluster.gpu, *(p.gpu for p in spec.cluster.pools or ())]:
        values = value.values() if is_choice(value) else (value,)  # type: ignore[union-attr]
        found.update(v if isinstance(v, str) else str(getattr(v, "name", "")) for v in values
                     if v is not None)
    return sorted(found)


def without_profile_name(resolved: dict[str, Any]) -> dict[str, Any]:
    """A resolved problem as stored before the spec's part left out the profile's file name
    (`spec.calibration`), compared as it is made now."""
    spec = resolved.get("spec")
    if not isinstance(spec, dict) or "calibration" not in spec:
        return resolved
    return {**resolved, "spec": {k: v for k, v in spec.items() if k != "calibration"}}


def for_gpus(resolved: dict[str, Any], gpus: list[str]) -> dict[str, Any]:
    """The resolved problem with the calibration's per-GPU values kept for `gpus` only (a
    profile's fraction for a GPU the spec does not use changes none of its numbers)."""
    calibration = resolved.get("calibration")
    if not isinstance(calibration, dict):
        return resolved
    kept = {k: ({g: f for g, f in v.items() if g in gpus}
                if k.endswith("_by_gpu") and isinstance(v, dict) else v)
            for k, v in calibration.items()}
    return {**resolved, "calibration": kept}


def problem_digest(resolved: dict[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON of a resolved problem."""
    return hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()


def _as_written(value: Any) -> Any:
    """A list choice as the user writes it: [1, 2], not {"options": [1, 2]}."""
    if isinstance(value, dict) and set(value) == {"options"}:
        return value["options"]
    return value


def leaf_differences(stored: Any, now: Any, path: str = "") -> list[str]:
    """'plan.tp differs: stored [1, 2], now [1]' for each leaf that differs; a list of
    mappings (pools, a network's layers) item by item ('cluster.pools[0].nodes differs'),
    a change of its length as the two lengths."""
    stored, now = _as_written(stored), _as_written(now)
    found: list[str] = []
    if isinstance(stored, dict) and isinstance(now, dict):
        for key in sorted(set(stored) | set(now)):
            where = f"{path}.{key}" if path else str(key)
            found += leaf_differences(stored.get(key), now.get(key), where)
        return found
    if isinstance(stored, list) and isinstance(now, list) and \
            any(isinstance(x, dict) for x in (*stored, *now)):
        if len(stored) != len(now):
            items = "item" if len(stored) == 1 else "items"
            found.append(f"{path} differs: stored {len(stored)} {items}, now {len(now)}")
        for i, (old, new) in enumerate(zip(stored, now, strict=False)):
            found += leaf_differences(old, new, f"{path}[{i}]")
        return found
    if stored == now:
        return []
    return [f"{path} differs: stored {json.dumps(stored)}, now {json.dumps(now)}"]


_WHAT = {"spec": "", "catalog": "the catalog's ", "calibration": "the calibration profile's ",
         "cost_model": "the cost model's code changed: version "}


def _shared_gpus(stored: Any, now: Any) -> tuple[Any, Any]:
    """The catalog parts with the GPUs both hold: an entry one side alone holds follows from
    the spec's GPUs, which differ already (the spec's difference says so), so it is not
    repeated as 'the catalog's gpus.NAME differs: stored null, now {...every figure...}'."""
    if not all(isinstance(c, dict) and isinstance(c.get("gpus"), dict) for c in (stored, now)):
        return stored, now
    both = stored["gpus"].keys() & now["gpus"].keys()
    return ({**stored, "gpus": {k: stored["gpus"][k] for k in both}},
            {**now, "gpus": {k: now["gpus"][k] for k in both}})


def problem_differences(stored: dict[str, Any], now: dict[str, Any]) -> str:
    """What differs between two resolved problems, in a few words: the first differing
    fields of the spec, the catalog entries, the calibration and the cost-model version."""
    return shown_differences(problem_leaf_differences(stored, now),
                             otherwise="the stored problem differs")


def shown_differences(found: list[str], *, otherwise: str) -> str:
    """The first few of `found` differences in one line, with how many more there are;
    `otherwise` where there are none."""
    shown = "; ".join(found[:_SHOWN]) or otherwise
    if len(found) > _SHOWN:
        shown += f" (and {len(found) - _SHOWN} more)"
    return shown


def problem_leaf_differences(stored: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Each difference between two resolved problems ('plan.tp differs: ...'); none where
    they differ only by fields a later version added, left out (null) in both, whose digests
    differ all the same."""
    found = []
    for part, prefix in _WHAT.items():
        if part == "cost_model":
            if stored.get(part) != now.get(part):
                found.append(f"{prefix}{stored.get(part)} -> {now.get(part)}")
            continue
        old, new = stored.get(part), now.get(part)
        if part == "catalog":
            old, new = _shared_gpus(old, new)
        found += [prefix + line for line in leaf_differences(old, new)]
    return found

