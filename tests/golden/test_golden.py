"""The cost model's numbers stay what they were (tests/golden/make_golden.py wrote them):
every validation case (its grid of blank plan fields), every external case and a sample of
every shipped example's plans, step time and each part of time and memory to 1e-9 relative.

A change of the model's numbers on purpose regenerates the file in the same commit."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.golden.golden import evaluate_fixed

GOLDEN = json.loads(Path(__file__).with_name("cost_golden.json").read_text())
ENTRIES = GOLDEN["entries"]


def _spec(entry: dict) -> dict:
    return {**GOLDEN["bases"][entry["base"]], "plan": entry["plan"]}


@pytest.mark.parametrize("chunk", range(8))
def test_the_numbers_are_unchanged(chunk: int) -> None:
    failures = []
    for entry in ENTRIES[chunk::8]:
        got = evaluate_fixed(_spec(entry))
        for key, want in entry["expected"].items():
            value = got.get(key)
            scale = max(abs(want), abs(entry["expected"]["step_time_s"]) * 1e-6
                        if key.startswith("time.") else abs(want))
            if value is None or not math.isclose(value, want, rel_tol=1e-9,
                                                 abs_tol=1e-9 * scale + 1e-300):
                failures.append(f"{_spec(entry)['name']} {entry['plan']}: {key} {value} != {want}")
    assert not failures, "\n".join(failures[:20])


def test_the_golden_file_covers_every_source() -> None:
    names = {b["name"] for b in GOLDEN["bases"]}
    assert any(n.startswith("case-x") for n in names)  # external cases
    assert any(n.startswith("case-") and not n.startswith("case-x") for n in names)
    examples = {p.stem for p in (Path(__file__).parents[2] / "search_spaces" / "examples")
                .glob("*.yaml")}
    assert examples <= names
    assert len(ENTRIES) > 500
