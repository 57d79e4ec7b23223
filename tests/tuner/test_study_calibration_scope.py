"""A study's identity holds the calibration its GPUs run with: a profile refitted with a GPU
the study does not use continues it (the study's numbers are the same), a change for one of
its GPUs (or for every GPU) refuses it; tuner resume and worker, which have no spec to
rename, say to restore what changed or start a new study."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from click.testing import CliRunner

from .specs import tiny, write

tuner_main: Any = __import__("tuner.cli", fromlist=["main"]).main


def _run(*args: str) -> Any:
    return CliRunner().invoke(tuner_main, list(args))


@pytest.fixture
def study(tmp_path: Path) -> tuple[Path, Path, str]:
    """A 3-trial study of the tiny model on A100s with a profile for the A100 alone."""
    profile = tmp_path / "profile.yaml"
    profile.write_text("gemm_fraction_by_gpu: {a100-80gb: 0.7}\n", encoding="utf-8")
    data = tiny("scoped", search={"sampler": "random", "trials": 3, "seed": 0})
    path = write(tmp_path, {**data, "calibration": "profile.yaml"})
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert _run("search", str(path), "--storage", url).exit_code == 0
    return path, profile, url


def _complete(url: str) -> int:
    trials = optuna.load_study(study_name="scoped", storage=url).get_trials()
    return sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials)


def test_another_gpu_s_fraction_does_not_change_the_study(study: tuple[Path, Path, str]
                                                          ) -> None:
    path, profile, url = study
    profile.write_text("gemm_fraction_by_gpu: {a100-80gb: 0.7, h100-80gb: 0.59}\n",
                       encoding="utf-8")
    result = _run("search", str(path), "--trials", "2", "--storage", url)
    assert result.exit_code == 0, result.output
    assert _complete(url) == 5
    assert _run("resume", "scoped", "--storage", url).exit_code == 0


@pytest.mark.parametrize("changed", ["gemm_fraction_by_gpu: {a100-80gb: 0.5}\n",
                                     "gemm_fraction_by_gpu: {a100-80gb: 0.7}\n"
                                     "efficiency: {hbm_fraction: 0.7}\n"])
def test_a_change_for_the_study_s_gpus_is_refused(study: tuple[Path, Path, str],
                                                  changed: str) -> None:
    path, profile, url = study
    profile.write_text(changed, encoding="utf-8")
    result = _run("search", str(path), "--storage", url)
    assert result.exit_code == 2 and "calibration profile's" in result.stderr
    for command in ("resume", "worker"):
        result = _run(command, "scoped", "--storage", url)
        assert result.exit_code == 2
        (line,) = result.stderr.strip().splitlines()
        assert "calibration profile's" in line and "restore what changed" in line
        assert "`tuner search SPEC` with another `name:`" in line
    assert _complete(url) == 3


def test_a_profile_of_other_gpus_only_is_refused(tmp_path: Path) -> None:
    """A profile fitted on H100 runs named by an A100 spec changed none of its numbers: the
    study ran on the catalog's figures, as if calibrated, without a word. Now one line names
    the profile's GPUs and the spec's, exit 2, no study made; a profile that also calibrates
    every GPU (its `efficiency`) or names one of the spec's GPUs is taken."""
    profile = tmp_path / "h100.yaml"
    profile.write_text("gemm_fraction_by_gpu: {h100-80gb: 0.55}\n", encoding="utf-8")
    data = tiny("elsewhere", search={"sampler": "random", "trials": 2, "seed": 0})
    path = write(tmp_path, {**data, "calibration": "h100.yaml"})
    url = f"sqlite:///{tmp_path / 's.db'}"
    fixed = write(tmp_path, {**tiny("fixed", plan={"tp": 2}), "calibration": "h100.yaml"})
    for command in (["evaluate", str(fixed)], ["search", str(path), "--storage", url]):
        result = _run(*command)
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert f"calibration: {profile} calibrates h100-80gb, not this spec's a100-80gb" in line
    assert optuna.get_all_study_names(url) == []
    for text in ("gemm_fraction_by_gpu: {h100-80gb: 0.55, a100-80gb: 0.6}\n",
                 "gemm_fraction_by_gpu: {h100-80gb: 0.55}\nefficiency: {hbm_fraction: 0.7}\n"):
        profile.write_text(text, encoding="utf-8")
        assert _run("evaluate", str(fixed)).exit_code == 0
