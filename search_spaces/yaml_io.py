"""Reading the YAML a user gives (specs, calibration profiles) and the catalogs: UTF-8 text
only, plain values only (yaml.safe_load's types), and no key given twice in one mapping.

PyYAML keeps the last of two equal keys silently (YAML 1.2, sec. 3.2.1.1, says mapping keys
are unique, and leaves the check to the application): `cluster:` written twice would search the
second cluster without a word. Here the second one is an error naming both lines.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from .errors import SpecError
from .messages import from_yaml_error, mark_place

__all__ = ["TOO_DEEP", "DuplicateKeyError", "NumberTooLongError", "StrictLoader", "decode_text",
           "load_yaml", "read_text", "too_long_number"]


TOO_DEEP = ("nested too deeply: lists and mappings hundreds of levels one inside another, "
            "where a spec needs a few; check the brackets and the indentation")
"""A document past Python's recursion limit: PyYAML builds it recursively (a traceback)."""


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping that gives one key twice."""


class NumberTooLongError(yaml.constructor.ConstructorError):
    """An integer of more digits than Python reads (sys.get_int_max_str_digits: 4300)."""


def too_long_number(text: str) -> str:
    """What to write instead of the integer `text`, too long for Python to read."""
    digits = sum(c.isdigit() for c in text)
    return (f"the number {text[:12]}... has {digits:,} digits, more than Python reads "
            f"({sys.get_int_max_str_digits():,}); write it with an exponent, e.g. 1e30")


class _NoDuplicateKeys(yaml.constructor.SafeConstructor):
    """Refuses a mapping holding the same key twice (mixed into PyYAML's safe loaders)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: SafeLoader reports it
                break
            if first is not None:
                raise DuplicateKeyError(
                    None, None, f"key {key!r} is given twice (lines "
                    f"{first.start_mark.line + 1} and {key_node.start_mark.line + 1}); keep "
                    "one", key_node.start_mark)
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # the digits limit: int() refuses, where YAML has no limit
            raise NumberTooLongError(None, None, too_long_number(str(node.value)),
                                     node.start_mark) from None


_NoDuplicateKeys.add_constructor(  # type: ignore[type-var]  # the stubs want a loader class
    "tag:yaml.org,2002:int", _NoDuplicateKeys.construct_yaml_int)


class StrictLoader(_NoDuplicateKeys, yaml.SafeLoader):
    """yaml.SafeLoader that refuses a mapping holding the same key twice."""


class FastStrictLoader(_NoDuplicateKeys, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """StrictLoader on libyaml's parser where PyYAML was built with it (the same values, about
    ten times faster: the catalogs are read by every command)."""


def read_text(path: str | Path) -> str:
    """The text of a UTF-8 file; SpecError (one line naming the file) for a binary file or
    another encoding, FileNotFoundError and the other OSErrors as they are."""
    return decode_text(Path(path).read_bytes(), path)


def decode_text(data: bytes, path: str | Path) -> str:
    """The text of the bytes read from file `path`; SpecError (one line naming the file) for a
    binary file or another encoding."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        kind = "a binary file" if b"\x00" in data[:8192] else "not UTF-8 text"
        raise SpecError(f"{kind} (byte 0x{data[err.start]:02x} at offset {err.start} is not "
                        "UTF-8); give a YAML text file saved as UTF-8", file=str(path)) from None


def load_yaml(text: str, *, file: str) -> Any:
    """The plain data of a YAML document; SpecError naming the file, the line and what to
    change for malformed YAML, a tag such as !!python/object, or a key given twice. Read on
    libyaml's parser (FastStrictLoader); a text it refuses is read again on PyYAML's, so
    that the message is the same whichever PyYAML build is installed."""
    try:
        return yaml.load(text, Loader=FastStrictLoader)
    except yaml.YAMLError:
        pass  # refused: read again by PyYAML's own parser, whose message the user gets
    except RecursionError:
        raise SpecError(TOO_DEEP, file=file) from None
    try:
        return yaml.load(text, Loader=StrictLoader)
    except RecursionError:  # PyYAML composes and constructs nodes recursively
        raise SpecError(TOO_DEEP, file=file) from None
    except (DuplicateKeyError, NumberTooLongError) as err:
        mark = err.problem_mark
        where = mark_place(mark)
        raise SpecError(str(err.problem), file=file, field=where) from err
    except yaml.YAMLError as err:
        raise from_yaml_error(err, file=file) from err
