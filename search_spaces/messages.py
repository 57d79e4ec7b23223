"""Foreign errors (pydantic, PyYAML) translated into one-line SpecErrors naming file and field."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .choices import Choice, IntRange
from .errors import SpecError, one_or_many

__all__ = ["dotted", "from_validation_error", "from_yaml_error", "mark_place"]

_TAGGED_MODELS: dict[str, type[BaseModel]] = {"<range>": IntRange, "<choice>": Choice}


def _clean(loc: Sequence[Any]) -> list[Any]:
    """The user's path: union tags ("<fixed>", ...) and a choice's inner "values" dropped."""
    out: list[Any] = []
    previous = ""
    for part in loc:
        if isinstance(part, str) and part.startswith("<"):
            previous = part
            continue
        if not (previous == "<choice>" and part == "values"):
            out.append(part)
        previous = str(part)
    return out


def dotted(parts: Sequence[Any]) -> str:
    """['plan', 'tp', 1] -> 'plan.tp[1]'."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _known_fields(loc: Sequence[Any], sections: Mapping[str, type[BaseModel]]) -> list[str]:
    parent = loc[:-1]
    tag = next((p for p in reversed(parent) if isinstance(p, str) and p.startswith("<")), None)
    if tag in _TAGGED_MODELS and parent and parent[-1] == tag:
        return ["values"] if tag == "<choice>" else list(IntRange.model_fields)
    path = dotted([p for p in _clean(parent) if not isinstance(p, int)])
    kinds = [p for p in parent if isinstance(p, str) and p.startswith("<")
             and p not in (*_TAGGED_MODELS, "<fixed>")]
    model = sections.get(f"{path}{kinds[-1]}" if kinds else path) or sections.get(path)
    return list(model.model_fields) if model is not None else []


def _close_field(loc: Sequence[Any], sections: Mapping[str, type[BaseModel]]) -> str | None:
    """The known field an unknown key is probably a misspelling of (difflib, ratio >= 0.6)."""
    import difflib  # imported by the messages of bad specs only

    close = difflib.get_close_matches(str(loc[-1]), _known_fields(loc, sections), n=1)
    return close[0] if close else None


def _unknown_field(loc: Sequence[Any], sections: Mapping[str, type[BaseModel]],
                   *, missing: bool = False) -> str:
    key, parent = str(loc[-1]), dotted(_clean(loc[:-1]))
    known = _known_fields(loc, sections)
    close = _close_field(loc, sections)
    hint = f"did you mean {close!r}{' (required, and missing)' if missing else ''}? " \
        if close else ""
    where = f"under {parent}" if parent else "at the top level"
    return f"unknown field {key!r} {where}; {hint}known fields: {', '.join(known)}"


def _pair_misspellings(errors: list[dict[str, Any]], sections: Mapping[str, type[BaseModel]]
                       ) -> list[dict[str, Any]]:
    """A misspelt required field gives two errors, "unknown field 'clustr'" and "missing
    'cluster'": keep the first, saying that 'cluster' is what is missing."""
    missing = {tuple(_clean(e["loc"])): i for i, e in enumerate(errors) if e["type"] == "missing"}
    dropped: set[int] = set()
    out = []
    for error in errors:
        if error["type"] == "extra_forbidden":
            close = _close_field(error["loc"], sections)
            twin = (*_clean(error["loc"][:-1]), close)
            if close is not None and twin in missing:
                dropped.add(missing[twin])
                error = {**error, "missing_twin": True}
        out.append(error)
    return [e for i, e in enumerate(out) if i not in dropped]


def _message(error: Mapping[str, Any], sections: Mapping[str, type[BaseModel]]) -> str:
    kind, loc = error["type"], error["loc"]
    if kind == "extra_forbidden":
        return _unknown_field(loc, sections, missing=bool(error.get("missing_twin")))
    if kind == "missing":
        parent = dotted(_clean(loc[:-1]))
        return f"missing required field {loc[-1]!r}{' under ' + parent if parent else ''}; add it"
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, BaseException):
        return cause.message if isinstance(cause, SpecError) else str(cause)
    message = str(error["msg"])
    if kind in ("spec", "repeated"):
        return message
    if kind == "too_short" and error.get("input") == []:
        return _empty_list(loc, int((error.get("ctx") or {}).get("min_length", 1)))
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        message = "must be a mapping of fields"  # not pydantic's "... instance of SomeClass"
    if kind in ("tuple_type", "list_type"):  # not pydantic's "a valid tuple", Python's word
        message = "must be a list: [A, B], or one '- ITEM' line per item"
    shown = error.get("input")
    got = "" if isinstance(shown, (dict, BaseModel)) else f" (got {shown!r})"
    if kind == "string_type" and isinstance(shown, bool):  # `name: off`, `gpu: no`
        got += ("; YAML reads an unquoted yes, no, on, off, true or false as a truth value: "
                "quote it")
    return f"{message[:1].lower()}{message[1:]}{got}{_close_word(error)}"


def _empty_list(loc: Sequence[Any], least: int) -> str:
    """An empty list, where pydantic says 'tuple should have at least 1 item after
    validation': a choice's (tp: [], gpu: []) offers nothing to search."""
    if "<choice>" in loc:
        name = next(str(p) for p in reversed(_clean(loc)) if isinstance(p, str))
        return (f"an empty list offers nothing to choose; give one value ({name}: VALUE) or "
                f"the values to search ({name}: [A, B])")
    return f"an empty list; give at least {least} item{'s' if least != 1 else ''}"


def _close_word(error: Mapping[str, Any]) -> str:
    """'; did you mean 'selective'?' for a misspelt word of a fixed vocabulary."""
    expected = str((error.get("ctx") or {}).get("expected", ""))
    shown = error.get("input")
    if error["type"] not in ("enum", "literal_error") or not isinstance(shown, str):
        return ""
    import difflib

    close = difflib.get_close_matches(shown, re.findall(r"'([^']*)'", expected), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _spec_error(error: Mapping[str, Any], sections: Mapping[str, type[BaseModel]],
                file: str) -> SpecError:
    parts = _clean(error["loc"])
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, SpecError) and cause.field:
        parts += cause.field.split(".")
    return SpecError(_message(error, sections), file=file, field=dotted(parts))


def from_validation_error(
    err: ValidationError, *, file: str, sections: Mapping[str, type[BaseModel]]
) -> SpecError:
    """Every error of `err` at once, one per dotted field (the first found for it: the members
    of a union may each complain about one value), as a SpecError or, for several, a
    SpecErrors with one line each."""
    found: dict[str, SpecError] = {}
    errors = _drop_missing_under_wrong_kind(
        _drop_emptied_lists([dict(e) for e in err.errors()]))
    for error in _pair_misspellings(errors, sections):
        one = _spec_error(error, sections, file)
        found.setdefault(one.field, one)
    return one_or_many(list(found.values()))


def _drop_missing_under_wrong_kind(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without the 'missing required field' lines of a section whose `kind` is not one it
    takes (`attention: {kind: mha}`): the fields it asks for belong to the kind the spec
    did not name, so only the line naming the kind (and the kinds it takes) stays."""
    wrong = {tuple(e["loc"][:-1]) for e in errors if e["loc"] and e["loc"][-1] == "kind"
             and e["type"] in ("literal_error", "enum", "value_error")}
    return [e for e in errors if not (e["type"] == "missing" and tuple(e["loc"][:-1]) in wrong)]


def _drop_emptied_lists(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without pydantic's 'tuple should have at least 1 item after validation, not 0' for a
    list that was not empty: a tuple field adds it when every item it was given failed
    (`tp: [0]`, a pool with an unknown GPU), a second line that contradicted the spec's
    text beside the line naming the bad item."""
    failed_items = {tuple(e["loc"][:i]) for e in errors for i, part in enumerate(e["loc"])
                    if isinstance(part, int)}
    return [e for e in errors if not (e["type"] == "too_short" and e.get("input")
                                      and tuple(e["loc"]) in failed_items)]


def from_yaml_error(err: yaml.YAMLError, *, file: str) -> SpecError:
    """A YAML syntax error, or a tag such as !!python/object that safe_load refuses."""
    mark = getattr(err, "problem_mark", None)
    where = mark_place(mark)
    problem = str(getattr(err, "problem", None) or err)
    tag = re.search(r"tag '([^']+)'", problem)
    if isinstance(err, yaml.constructor.ConstructorError) and "tag" in problem:
        name = tag.group(1).replace("tag:yaml.org,2002:", "!!") if tag else "this tag"
        return SpecError(f"YAML tag {name} is not allowed: a spec holds plain values only; "
                         "remove the tag", file=file, field=where)
    return SpecError(f"malformed YAML: {problem}; fix the syntax (indentation, quotes, colons)",
                     file=file, field=where)


def mark_place(mark: Any) -> str:
    """'line 3, column 26' of a PyYAML mark (0-based there), '' without one."""
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
