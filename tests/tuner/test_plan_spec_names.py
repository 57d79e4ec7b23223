"""`tuner plan NAME --as spec` of a study whose name holds a character that ends a line in YAML
(U+2028, U+2029, U+0085: a name the command line takes) wrote the name into the comment above
the spec, which it cut: the rest of the comment was read as YAML, and the spec written could
not be read back ("malformed YAML"). The comment escapes them; the spec keeps the name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tuner.cli import main

from .specs import tiny, write


@pytest.mark.parametrize("name", ["plan\u2028line", "plan\u2029paragraph", "plan\x85next"])
def test_a_name_that_breaks_a_line_reads_back(tmp_path: Path, name: str) -> None:
    storage = f"sqlite:///{tmp_path / 's.db'}"
    runner = CliRunner()
    data = tiny("x", search={"sampler": "tpe", "trials": 2, "seed": 0})
    data["name"] = name
    searched = runner.invoke(main, ["search", str(write(tmp_path, data)), "--storage", storage])
    assert searched.exit_code == 0, searched.output
    plan = runner.invoke(main, ["plan", name, "--as", "spec", "--storage", storage])
    assert plan.exit_code == 0, plan.output
    assert yaml.safe_load(plan.stdout)["name"].startswith(f"{name}-trial-")
    evaluated = runner.invoke(main, ["evaluate", "-", "--json"], input=plan.stdout)
    assert evaluated.exit_code == 0, evaluated.output
