"""`-` names the spec on standard input, as Unix tools read it: a program pipes the fixed spec
`tuner plan NAME --as spec` writes into `tuner evaluate -` (or explain, or search) without a
temporary file. `tuner evaluate -` said "-: no such file; check the path"."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from tuner.cli import main

from .specs import EXAMPLES, searched_tiny, tiny

FIXED = EXAMPLES / "gpt3-175b-a100-fixed.yaml"


def test_evaluate_reads_the_spec_on_stdin_as_the_file_gives_it() -> None:
    runner = CliRunner()
    piped = runner.invoke(main, ["evaluate", "-", "--json"], input=FIXED.read_bytes())
    assert piped.exit_code == 0, piped.output
    named = runner.invoke(main, ["evaluate", str(FIXED), "--json"])
    assert json.loads(piped.stdout) == json.loads(named.stdout)


def test_a_plan_written_as_a_spec_reads_back_through_stdin(tmp_path: Path) -> None:
    storage, searched = searched_tiny(tmp_path, "piped", 4)
    best = searched["best"][0]
    runner = CliRunner()
    plan = runner.invoke(main, ["plan", "piped", "--as", "spec", "--storage", storage])
    assert plan.exit_code == 0, plan.output
    evaluated = runner.invoke(main, ["evaluate", "-", "--json"], input=plan.stdout)
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.stdout)["step_time_s"] == best["step_time_s"]
    explained = runner.invoke(main, ["explain", "-", "--json"], input=plan.stdout)
    assert explained.exit_code == 0, explained.output


def test_a_json_spec_on_stdin_is_searched_under_its_name(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 's.db'}"
    data = tiny("ünïcode-π", search={"sampler": "tpe", "trials": 2, "seed": 0})
    result = CliRunner().invoke(main, ["search", "-", "--storage", storage, "--json"],
                                input=json.dumps(data, ensure_ascii=False).encode())
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["study"] == "ünïcode-π"


def test_a_bad_spec_on_stdin_is_named_stdin_in_one_line() -> None:
    data = yaml.safe_load(FIXED.read_text(encoding="utf-8"))
    data["plan"]["tp"] = [1, 2]
    result = CliRunner().invoke(main, ["evaluate", "-", "--json"], input=yaml.safe_dump(data))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: <stdin>: plan.tp:")
    assert len(result.stderr.splitlines()) == 1


def test_stdin_given_twice_is_refused() -> None:
    result = CliRunner().invoke(main, ["evaluate", "-", "-"], input=FIXED.read_bytes())
    assert result.exit_code == 2
    assert "more than once" in result.stderr
