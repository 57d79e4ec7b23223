"""A study whose expansion tier's capacity is a choice of 0 (no tier) or a size, with one
bandwidth: a trial that chose 0 could not be shown or exported, as the fixed spec written for it
kept the bandwidth alone, which a spec refuses ("a tier with a bandwidth and no capacity holds
nothing to offload"): `tuner plan NAME --as spec` and `tuner explain NAME` said so of the
study's own spec file, exit code 2. The trial's spec has no tier, as the trial had none."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tuner.cli import main

from .specs import tiny, write


def test_a_trial_without_a_tier_is_written_and_explained(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 's.db'}"
    runner = CliRunner()
    data = tiny("tier", plan={"tp": [1, 2], "pp": 1, "micro_batch": 1, "recompute": "none"},
                search={"sampler": "exhaustive"})
    data["cluster"]["expansion"] = {"capacity": [0, "64 GiB"], "bandwidth": "32 GB/s"}
    searched = runner.invoke(main, ["search", str(write(tmp_path, data)), "--storage", storage])
    assert searched.exit_code == 0, searched.output
    rows = json.loads(runner.invoke(main, ["export", "tier", "--json", "--storage",
                                           storage]).stdout)
    untiered = [r for r in rows if r["cluster.expansion_capacity_bytes"] == 0]
    assert untiered
    for row in untiered:
        trial = str(row["number"])
        plan = runner.invoke(main, ["plan", "tier", "--trial", trial, "--as", "spec",
                                    "--storage", storage])
        assert plan.exit_code == 0, plan.output
        evaluated = runner.invoke(main, ["evaluate", "-", "--json"], input=plan.stdout)
        assert evaluated.exit_code == 0, evaluated.output
        assert json.loads(evaluated.stdout)["step_time_s"] == row["step_time_s"]
        explained = runner.invoke(main, ["explain", "tier", "--trial", trial, "--json",
                                         "--storage", storage])
        assert explained.exit_code == 0, explained.output
        assert json.loads(explained.stdout)["step_time_s"] == row["step_time_s"]
