"""`tuner plan NAME --as spec` of a calibrated study writes a spec that evaluates wherever it
is written: the profile, named relative to the study's spec, is named by its absolute path."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tuner.cli import main

from .specs import tiny, write


def test_the_fixed_spec_keeps_its_calibration_in_another_folder(tmp_path: Path) -> None:
    (tmp_path / "profile.yaml").write_text(
        "efficiency: {}\ngemm_fraction_by_gpu:\n  a100-80gb: 0.5\n", encoding="utf-8")
    data = {**tiny("calibrated", search={"sampler": "exhaustive"}),
            "calibration": "profile.yaml"}
    url = f"sqlite:///{tmp_path / 'c.db'}"
    runner = CliRunner()
    searched = runner.invoke(main, ["search", str(write(tmp_path, data)), "--storage", url,
                                    "--json"])
    assert searched.exit_code == 0, searched.stderr
    best = json.loads(searched.stdout)["best"][0]["step_time_s"]
    planned = runner.invoke(main, ["plan", "calibrated", "--as", "spec", "--storage", url])
    assert planned.exit_code == 0, planned.stderr
    elsewhere = tmp_path / "plans"
    elsewhere.mkdir()
    (elsewhere / "best.yaml").write_text(planned.stdout, encoding="utf-8")
    evaluated = runner.invoke(main, ["evaluate", str(elsewhere / "best.yaml"), "--json"])
    assert evaluated.exit_code == 0, evaluated.stderr
    assert json.loads(evaluated.stdout)["step_time_s"] == best
