"""A request body as spec data: JSON (Content-Type */json) or YAML (anything else), one spec
(a mapping) or a list of them. YAML aliases are refused (a few hundred bytes of nested aliases
expand to billions of values), and so is a body that is not UTF-8, empty or nested too deeply
(YAML past MAX_DEPTH levels is refused while it is read: PyYAML's scanner takes time quadratic
in the depth of flow collections, so 100 kB of `[` held a core for hours); each refusal is a
SpecError naming `request` where the command line names the file."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from search_spaces import SpecError
from search_spaces.messages import from_yaml_error, mark_place
from search_spaces.yaml_io import FastStrictLoader, StrictLoader, load_yaml, too_long_number

__all__ = ["REQUEST", "documents", "label"]

REQUEST = "request"
"""What an error names in place of a spec file."""
MAX_DEPTH = 32
"""The most lists and mappings one inside another a body may hold: a spec needs 6 (a list of
specs, the spec, cluster, pools, a pool, its GPU choices)."""


_LOADER = StrictLoader
"""The loader of spec files (search_spaces.yaml_io): a key given twice is refused, and a
malformed body gets the very message the command line gives for the same text."""
_FAST = FastStrictLoader
"""The same on libyaml's parser, which scans a body first (as search_spaces.yaml_io.load_yaml
reads it): pure-Python PyYAML took 15 s of the server's CPU for a 900 kB list of numbers
(libyaml: 2 s); a body it refuses is scanned again by _LOADER for the command line's
message."""


def _refuse_aliases(text: str, loader: Any = _LOADER) -> None:
    """A SpecError at the first alias (`*name`) of the YAML text, or where it nests deeper
    than MAX_DEPTH (read no further: the events come as the text is scanned)."""
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            raise SpecError("YAML aliases (*name) are not accepted over HTTP; write the "
                            "values out", file=REQUEST, field=mark_place(event.start_mark))
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError(_too_deep(), file=REQUEST, field=mark_place(event.start_mark))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _too_deep() -> str:
    return (f"the body is nested too deeply to be a spec (more than {MAX_DEPTH} lists and "
            "mappings one inside another); send a spec, or a list of specs")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once (json.loads keeps the last of two equal
    keys without a word, as PyYAML does; a spec file refuses it: search_spaces.yaml_io)."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise SpecError(f"key {key!r} is given twice in one object; keep one", file=REQUEST)
        found[key] = value
    return found


def _parse(text: str, content_type: str) -> Any:
    if "json" in content_type.lower():
        try:
            return json.loads(text, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as err:
            raise SpecError(f"malformed JSON: {err.msg}; fix the syntax, or send YAML with "
                            "Content-Type: application/yaml", file=REQUEST,
                            field=f"line {err.lineno}, column {err.colno}") from None
        except SpecError:  # a key given twice (_unique_keys)
            raise
        except ValueError as err:  # an integer longer than Python reads
            number = re.search(r"\d{100,}", text)
            raise SpecError(too_long_number(number.group() if number else str(err)),
                            file=REQUEST) from None
    try:
        _refuse_aliases(text, _FAST)
    except yaml.YAMLError:  # refused: read again for the command line's message
        try:
            _refuse_aliases(text)
        except yaml.YAMLError as err:
            raise from_yaml_error(err, file=REQUEST) from None
    return load_yaml(text, file=REQUEST)  # a spec file's loader: plain values, keys once


def documents(body: bytes, content_type: str, *, max_specs: int) -> tuple[list[Any], bool]:
    """The specs' data in the body, and whether the body was a list."""
    try:
        text = body.decode("utf-8-sig")  # a byte order mark ignored (RFC 8259, sec. 8.1)
    except UnicodeDecodeError:
        raise SpecError("the body is not UTF-8 text; send the spec as JSON or YAML",
                        file=REQUEST) from None
    try:
        data = _parse(text, content_type)
    except RecursionError:
        raise SpecError(_too_deep(), file=REQUEST) from None
    if data is None or data == []:
        raise SpecError("the body is empty; send a spec (JSON or YAML), or a list of specs",
                        file=REQUEST)
    if not isinstance(data, list):
        return [data], False
    if len(data) > max_specs:
        raise SpecError(f"the body lists {len(data)} specs; send at most {max_specs} per "
                        "request", file=REQUEST)
    return data, True


def label(index: int, many: bool) -> str:
    """What errors name the spec at `index`: `request`, or `request[2]` in a list."""
    return f"{REQUEST}[{index}]" if many else REQUEST
