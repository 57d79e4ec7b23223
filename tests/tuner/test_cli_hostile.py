"""Property: the CLI answers every spec with one bad field with exit code 2 and one line on
stderr that names the file and the field, never a traceback, and leaves a study database it
was pointed at holding what it held (hypothesis generates the bad specs)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from tuner.cli import main

from ..hostile_specs import hostile_specs
from .stored import database_digest, stored_study

_count = itertools.count()


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A study database holding one small finished study 'kept': (its file, its URL)."""
    return stored_study(tmp_path_factory.mktemp("hostile"))


_digest = database_digest



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
