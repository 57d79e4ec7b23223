"""Accuracy as a regression gate: the model's error on the published runs may not grow past
its bound. shared/validation/cases.csv must meet the targets of issue 12 (mean <= 8%, largest
<= 20%, every run feasible); benchmarks/external_cases.csv (out of sample, never fitted on) and
the one-GPU runs of shared/validation/gpu may not get worse than the figures the README
reports (the bounds are those figures plus a margin for rounding)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import accuracy, gpu_validation  # noqa: E402
from benchmarks.cases import load_cases  # noqa: E402

VALIDATION = ROOT.parent / "shared" / "validation"
EXTERNAL = ROOT / "benchmarks" / "external_cases.csv"


def _summary(path: Path) -> dict:
    return accuracy.summary([accuracy.predict(r) for r in load_cases(path)])


@pytest.mark.skipif(not (VALIDATION / "cases.csv").is_file(), reason="no ../shared/validation")
def test_the_validation_cases_meet_their_targets() -> None:
    s = _summary(VALIDATION / "cases.csv")
    assert s["infeasible"] == []
    assert s["mean_abs_error"] <= 0.08 and s["max_abs_error"] <= 0.20, s


def test_the_external_cases_do_not_get_worse() -> None:
    s = _summary(EXTERNAL)
    assert s["cases"] >= 136
    assert s["infeasible"] == [], s["infeasible"]
    # 8.3 %, largest 51.2 %: MLPerf's Llama 3.1 8B on GB200 (d71, README "Where the model is
    # still wrong"), with its 768M-parameter gradient buckets and bf16 gradients as its files
    # state them (benchmarks/sources.yaml)
    assert s["mean_abs_error"] <= 0.084 and s["max_abs_error"] <= 0.513, s
    # 10.2 %, largest 19.0 % (d42): torchtitan publishes reserved memory, above the live
    # tensors the model counts
    assert s["memory"]["mean_abs_error"] <= 0.102, s["memory"]
    assert s["memory"]["max_abs_error"] <= 0.191, s["memory"]


@pytest.mark.skipif(not (VALIDATION / "gpu").is_dir(), reason="no ../shared/validation/gpu")
def test_the_one_gpu_runs_do_not_get_worse() -> None:
    s = gpu_validation.summary([gpu_validation.predict(r)
                                for r in gpu_validation.load(VALIDATION / "gpu")])
    assert s["feasibility_disagreements"] == []
    assert s["mean_abs_error"] <= 0.05 and s["max_abs_error"] <= 0.19, s
    assert s["max_abs_error_mb4"] <= 0.12, s
    assert s["memory_mean_abs_error"] <= 0.017 and s["memory_max_abs_error"] <= 0.05, s
