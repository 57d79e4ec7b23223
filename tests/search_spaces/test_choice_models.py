"""A choosable field makes its `Choice[...]` model when a spec first lists values there
(search_spaces.choices, issue 14): loading a fixed spec makes none, and a list validates as its
field's `Choice[...]` model, with that model's errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from search_spaces import Choice, SpecError, parse_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "search_spaces" / "examples"


def _models_made(spec: Path) -> int:
    """How many Choice[...] models a new process has made once it loaded `spec`."""
    probe = ("from search_spaces import Choice, load_spec\n"
             f"load_spec({str(spec)!r})\nprint(len(Choice.__subclasses__()))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return int(done.stdout.split()[-1])


def test_a_fixed_spec_makes_no_choice_model() -> None:
    assert _models_made(EXAMPLES / "gpt3-175b-a100-fixed.yaml") == 0
    assert _models_made(EXAMPLES / "llama3-70b-256-h100.yaml") > 0


def _fixed(**plan: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / "gpt3-175b-a100-fixed.yaml").read_text())
    data["plan"].update(plan)
    return data


def test_a_list_is_its_fields_choice_model() -> None:
    tp = parse_spec(_fixed(tp=[2, 4])).plan.tp
    assert isinstance(tp, Choice) and type(tp).__name__.startswith("Choice[")
    assert tp.values() == (2, 4)


@pytest.mark.parametrize(("tp", "message"), [
    ([1, "x"], "plan.tp[1]: input should be a valid integer (got 'x')"),
    ([2, 2], "plan.tp: the list repeats a value; list each once"),
    ({"values": [1, 2], "extra": 1}, "plan.tp.extra: unknown field 'extra'"),
])
def test_a_bad_list_is_reported_under_its_field(tp: Any, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_spec(_fixed(tp=tp), file="f.yaml")


def test_a_spec_with_lists_and_ranges_dumps_in_a_new_process() -> None:
    """A study's identity is its spec's dump (studies.identity): a list and a range in a new
    process, where IntRange and each Choice[...] are built on first use (pydantic before 2.10
    left a deferred model's serializer a placeholder the section's dump could not call)."""
    probe = ("from search_spaces import parse_spec\nimport yaml\n"
             f"data = yaml.safe_load(open({str(EXAMPLES / 'gpt3-175b-a100-fixed.yaml')!r}))\n"
             "data['plan'].update(tp=[4, 8], pp={'min': 1, 'max': 16, 'powers_of_two': True})\n"
             "dumped = parse_spec(data).model_dump(mode='json')\n"
             "print(dumped['plan']['tp'], dumped['plan']['pp'])")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert "[4, 8]" in done.stdout and "'max': 16" in done.stdout
