"""A count printed with a noun says one trial, one plan, one worker: `counted` (search_spaces.
wording), never "1 completed trials of a target of 30"."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from tuner.cli import main

from .specs import tiny, write

ROOT = Path(__file__).resolve().parents[2]
_PLURAL_AFTER_A_COUNT = re.compile(
    r"\{[^{}]*\}\s+(?:completed |complete |more )?"
    r"(trials|plans|workers|studies|specs|grids)(?![/\w])")
"""An f-string's number followed by a plural noun: "{done} completed trials" (not a rate,
"plans/s", nor a path, "studies/studies.db")."""
_AT_LEAST_TWO = {"tuner/serve/body.py": "the body lists {len(data)} specs"}
"""Counts that cannot be 1: more specs than a maximum of at least one."""


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_one_completed_trial_is_said_in_the_singular(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 's.db'}"
    spec = str(write(tmp_path, tiny(search={"sampler": "tpe", "trials": 1, "seed": 0})))
    code, out, err = _run("search", spec, "--storage", storage)
    assert code == 0, err
    assert "study tiny: 1 completed trial with tpe" in out
    code, out, err = _run("worker", "tiny", "--storage", storage)
    assert code == 0, err
    assert out.startswith("study tiny: 1 completed trial of a target of 1 (")
    code, out, err = _run("search", spec, "--trials", "1", "--storage", storage)
    assert code == 0, err
    assert "study tiny: 1 completed trial; adding 1" in err


def test_no_message_puts_a_count_before_a_plural_noun_by_hand() -> None:
    """Where a count can be 1, the message words it with `counted` (or says both forms)."""
    found = []
    for package in ("tuner", "studies", "search_spaces", "cost"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                where = str(path.relative_to(ROOT))
                if _AT_LEAST_TWO.get(where, "\0") in line:
                    continue
                if _PLURAL_AFTER_A_COUNT.search(line) and ('f"' in line or "f'" in line):
                    found.append(f"{where}:{number}: {line.strip()}")
    assert found == []
