"""A cache of `tuner evaluate`'s answers, so that evaluating an unchanged spec again imports
neither pydantic, PyYAML, numpy nor the cost model, and validates and evaluates nothing
(Python's bytecode cache does the same for modules): an entry holds the spec's table and its
JSON as the command shows them, which are a function of the spec and the code alone.

A spec's entry is found by a digest of the spec file (its bytes and its absolute path, which
gives the study's default name and the folder a relative `calibration` path is read from) and
of everything that computes the result: every module and catalog file of the `cost`,
`search_spaces` and `tuner` packages (by modification time and size, as Python's bytecode cache
tells a changed module), the Python version, and the installed numpy,
pydantic, pydantic-core, PyYAML and click (each package's `__init__` file, by modification
time and size: reinstalling a package rewrites it, as the bytecode cache assumes). The entry
lists the other files the spec read (its calibration profile) with their digests; a change to
any of them, or its removal, is a miss. Only results are kept, never errors: a spec that does
not load or evaluate is read and reported afresh each time.

Entries are JSON files in the folder `evaluate` of the cache folder: `$TUNER_CACHE_DIR`, else
`$XDG_CACHE_HOME/cluster-tuner`, else `~/.cache/cluster-tuner`; written whole (a temporary
file of this host and process renamed into place); `TUNER_CACHE_DIR=off` turns the cache off.
A cache that cannot be read or written is no cache: the spec is evaluated as without one."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CACHE_ENV", "Evaluated", "cache_dir", "code_digest", "code_digest_of",
           "file_digest", "load", "read_or_none", "store", "to_json"]

CACHE_ENV = "TUNER_CACHE_DIR"
_PACKAGES = ("cost", "search_spaces", "tuner")
_THIRD_PARTY = ("numpy", "pydantic", "pydantic_core", "yaml", "click")
_FORMAT = b"tuner-evaluate-2"
_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Evaluated:
    """What `tuner evaluate` shows of one spec: its table (`text`) and its SPEC.md JSON as
    builtin values (`value`, inf and NaN already null), with the files it read besides the
    spec and their sha256."""

    text: str
    value: Any
    reads: tuple[tuple[str, str], ...] = ()


def to_json(value: Any) -> str:
    """tuner.views.text.to_json of values already finite (which it leaves as they are), without
    importing the views (and through them the cost model and numpy)."""
    return json.dumps(value, indent=2, allow_nan=False)


def cache_dir() -> Path | None:
    """The folder of the entries, or None when TUNER_CACHE_DIR is `off`: `evaluate` in the
    folder studies.identity.cache_root names (the same rule, written here again because
    importing `studies` imports SQLAlchemy, which this cache is there to spare)."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen) / "evaluate"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cluster-tuner" / "evaluate"


def _package_files(root: Path) -> list[Path]:
    """Every module and catalog file of the packages under `root` that compute a result (not
    the example specs); os.walk skips the bytecode folders, which Path.rglob would list: 2 ms
    in place of 7 ms."""
    found: list[Path] = []
    for package in _PACKAGES:
        for folder, subfolders, names in os.walk(root / package):
            subfolders[:] = [s for s in subfolders if s not in ("__pycache__", "examples")]
            found += [Path(folder, n) for n in names
                      if os.path.splitext(n)[1] in (".py", ".yaml")]
    return sorted(found)


def code_digest_of(root: Path) -> str:
    """sha256 (hex) of the packages' files under `root` (each file's path, modification time
    and size: what Python's bytecode cache compares to tell a module changed; reading and
    hashing the 125 files took 4-5 ms of each start), Python's version and the installed
    packages the result depends on."""
    digest = hashlib.sha256(_FORMAT + sys.version.encode())
    prefix = len(os.path.join(root, ""))  # each file's path relative to root, as relative_to
    for path in map(str, _package_files(root)):
        found = os.stat(path)
        digest.update(repr((path[prefix:], found.st_mtime_ns, found.st_size)).encode())
    for name in _THIRD_PARTY:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        stat = os.stat(origin) if origin else None
        digest.update(repr((name, origin, stat and (stat.st_mtime_ns, stat.st_size))).encode())
    return digest.hexdigest()


@functools.cache
def code_digest() -> str:
    """code_digest_of this checkout (computed once per process)."""
    return code_digest_of(_ROOT)


def read_or_none(path: str) -> bytes | None:
    """The file's bytes, or None where it cannot be read (its loading reports why)."""
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


def file_digest(path: str) -> tuple[str, str] | None:
    """(path, sha256 hex of its bytes), or None where the file cannot be read."""
    data = read_or_none(path)
    return None if data is None else (path, hashlib.sha256(data).hexdigest())


def _entry(spec_path: str, spec_bytes: bytes) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    key = hashlib.sha256(code_digest().encode() + b"\0" + os.path.abspath(spec_path).encode()
                         + b"\0" + spec_bytes).hexdigest()
    return folder / f"{key}.json"


def load(spec_path: str, spec_bytes: bytes) -> Evaluated | None:
    """The cached evaluation of the spec file at `spec_path` (whose bytes are `spec_bytes`),
    or None: no entry, an unreadable one, or one of the files it read changed."""
    try:
        entry = _entry(spec_path, spec_bytes)
        if entry is None or not entry.is_file():
            return None
        data = json.loads(entry.read_bytes())
        found = Evaluated(text=data["text"], value=data["value"],
                          reads=tuple((str(path), str(digest)) for path, digest in data["reads"]))
        if not isinstance(found.text, str):
            return None
        if any(file_digest(path) != (path, digest) for path, digest in found.reads):
            return None
        return found
    except Exception:  # a damaged or foreign entry, a read file gone: evaluate afresh
        return None


def store(spec_path: str, spec_bytes: bytes, evaluated: Evaluated) -> None:
    """Keep `evaluated` (with the digests of the files it read) for the spec."""
    with contextlib.suppress(Exception):  # no cache where none can be written
        entry = _entry(spec_path, spec_bytes)
        if entry is None:
            return
        entry.parent.mkdir(parents=True, exist_ok=True)
        temporary = entry.with_name(f".{entry.name}.{platform.node()}.{os.getpid()}.tmp")
        try:
            temporary.write_text(json.dumps({"text": evaluated.text, "value": evaluated.value,
                                             "reads": evaluated.reads}), encoding="utf-8")
            os.replace(temporary, entry)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
