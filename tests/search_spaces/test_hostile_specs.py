"""Property: every spec with one bad field is refused by the loader with one SpecError line
that names the file and that field (hypothesis generates the bad specs)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings

from search_spaces import SpecError, parse_spec

from ..hostile_specs import VALID, hostile_specs


def names(field: str, path: str) -> bool:
    """True when the error's `field` is `path` or a part of it (`plan.pp.min`, `plan.tp[1]`)."""
    return field == path or field.startswith((f"{path}.", f"{path}["))


def test_the_unmutated_spec_is_valid_and_feasible() -> None:
    inputs = parse_spec(VALID, file="ok.yaml").to_cost_inputs()
    assert inputs


@settings(max_examples=300, deadline=None)
@given(hostile_specs())
def test_every_bad_field_is_named(case: tuple[dict[str, Any], str]) -> None:
    data, path = case
    try:
        parse_spec(data, file="bad.yaml").to_cost_inputs()
    except SpecError as err:
        assert err.file == "bad.yaml" and names(err.field, path), (str(err), path)
        assert str(err).startswith("bad.yaml: ") and "\n" not in str(err)
        return
    raise AssertionError(f"accepted a bad {path}: {data}")
