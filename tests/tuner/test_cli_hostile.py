"""Property: the CLI answers every spec with one bad field with exit code 2 and one line on
stderr that names the file and the field, never a traceback, and leaves a study database it
was pointed at holding what it held (hypothesis generates the bad specs)."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from tuner.cli import main

from ..hostile_specs import hostile_specs
from .specs import tiny, write

_count = itertools.count()


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A study database holding one small finished study: (its file, its URL)."""
    folder = tmp_path_factory.mktemp("hostile")
    url = f"sqlite:///{folder / 'studies.db'}"
    data = tiny("kept", search={"sampler": "random", "trials": 3, "seed": 0})
    result = CliRunner().invoke(main, ["search", str(write(folder, data)), "--storage", url,
                                       "--json"])
    assert result.exit_code == 0, result.stderr
    return folder / "studies.db", url


def _digest(path: Path) -> str:
    """What the database stores (its SQL dump), not its bytes: SQLite may checkpoint its
    write-ahead log into the file whenever a connection closes, which moves bytes and no data."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return hashlib.sha256("\n".join(db.iterdump()).encode()).hexdigest()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hostile_specs())
def test_a_bad_spec_exits_2_naming_the_field_and_stores_nothing(
        stored: tuple[Path, str], tmp_path: Path, case: tuple[dict[str, Any], str]) -> None:
    data, field = case
    db, url = stored
    before = _digest(db)
    spec = tmp_path / f"bad{next(_count)}.yaml"
    spec.write_text(yaml.safe_dump({"name": "kept", **data}, sort_keys=False), "utf-8")
    for args in (["evaluate", str(spec), "--json"], ["search", str(spec), "--storage", url]):
        result = CliRunner().invoke(main, args)
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2, (args, result.output, result.exception)
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        assert lines[0].startswith(f"error: {spec}: {field}"), (lines[0], field)
        assert not result.stdout
    assert _digest(db) == before
