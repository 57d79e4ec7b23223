"""Values a spec's type took but the tool could not use: a seed the samplers refuse (a
traceback from inside `tuner search`), a limit of 0 USD (a divide-by-zero warning, and a free
plan called 1e9x over it), `max_days: true` (read as one day). Each is one line and exit 2."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tuner.cli import main

from .specs import tiny, write
from .stored import database_digest, stored_study


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return stored_study(tmp_path_factory.mktemp("bad-values"))


def _refused(args: list[str], db: Path) -> str:
    """The one line of a refusal: exit 2, nothing on stdout, the database as it was."""
    before = database_digest(db)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, (args, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert not result.stdout and database_digest(db) == before
    return lines[0]


def test_a_seed_beyond_what_the_samplers_take(stored: tuple[Path, str], tmp_path: Path
                                              ) -> None:
    db, url = stored
    spec = write(tmp_path, tiny("huge-seed", search={"sampler": "tpe", "seed": 2**40}))
    line = _refused(["search", str(spec), "--trials", "2", "--storage", url], db)
    assert line.startswith(f"error: {spec}: search.seed: ") and "4294967295" in line
    flag = _refused(["search", str(write(tmp_path, tiny("seed-flag"))), "--seed", str(2**40),
                     "--trials", "2", "--storage", url], db)
    assert "--seed" in flag and "4294967295" in flag


@pytest.mark.parametrize(("field", "value", "says"), [
    ("max_cost", 0, "above 0"), ("max_hourly_cost", 0, "above 0"),
    ("max_days", True, "expected a plain number, got True"), ("max_days", 0, "above 0")])
def test_a_limit_that_allows_nothing_or_is_no_number(stored: tuple[Path, str], tmp_path: Path,
                                                     field: str, value: Any, says: str
                                                     ) -> None:
    db, url = stored
    spec = write(tmp_path, tiny(f"limit-{field}", constraints={field: value}))
    for args in (["evaluate", str(spec)], ["search", str(spec), "--trials", "2",
                                           "--storage", url]):
        line = _refused(args, db)
        assert line.startswith(f"error: {spec}: constraints.{field}: ") and says in line


@pytest.mark.parametrize("command", ["explain", "plan"])
def test_a_trial_with_no_result_advises_a_listing_that_runs(stored: tuple[Path, str],
                                                            command: str) -> None:
    """`--trial 99` of a study with three trials: the line's advice, typed as it stands,
    lists the trials (it said `tuner export --storage URL`, which has no study name: exit 2)."""
    db, url = stored
    line = _refused([command, "kept", "--trial", "99", "--storage", url], db)
    advised = line.split("`")[1]
    assert advised.startswith("tuner export kept "), line
    listed = CliRunner().invoke(main, shlex.split(advised)[1:])
    assert listed.exit_code == 0 and listed.stdout.count("\n") >= 3, listed.output
