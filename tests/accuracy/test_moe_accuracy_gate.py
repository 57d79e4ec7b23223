"""The mixture-of-experts model's error on the published MoE runs of benchmarks/moe_cases.csv
(out of sample, never fitted on) may not grow past the figures the README reports ("Mixtures
of experts, out of sample"), plus a margin for rounding."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import moe_accuracy  # noqa: E402


def test_the_moe_cases_do_not_get_worse() -> None:
    rows = moe_accuracy.load_cases(moe_accuracy.CASES)
    outcomes = [moe_accuracy.predict(r) for r in rows]
    every = moe_accuracy.summary(outcomes)
    bench = moe_accuracy.summary([o for o in outcomes if o.kind == "benchmark"])
    assert every["rows"] == 106
    assert every["mean_abs_error"] <= 0.169 and every["max_abs_error"] <= 1.15, every
    assert not every["infeasible"], every["infeasible"]
    assert bench["mean_abs_error"] <= 0.142 and bench["max_abs_error"] <= 0.56, bench
    assert not bench["infeasible"], bench["infeasible"]


def test_each_fp8_row_runs_the_recipe_its_table_states() -> None:
    rows = {r["case"]: r for r in moe_accuracy.load_cases(moe_accuracy.CASES)}
    assert moe_accuracy.stack(rows["w24"]).fp8_recipe == "mxfp8"
    assert moe_accuracy.stack(rows["w21"]).fp8_recipe == "blockwise"
    assert moe_accuracy.stack(rows["w4"]).fp8_recipe == "current"  # "current (inferred)"
    assert moe_accuracy.stack(rows["w15"]).fp8_recipe is None  # bf16: no recipe


def test_a_release_its_publisher_tracks_as_a_regression_is_not_a_benchmark_row() -> None:
    """w5 (Qwen3-30B dropless on 16 H100, Megatron-Bridge 25.11) is the run that
    Megatron-Bridge issue #1998 records as 2x slower than the 25.09 release; the same
    layout's 25.09 run (w6) drops tokens. Both keep their kinds from the sources file."""
    rows = {r["case"]: r for r in moe_accuracy.load_cases(moe_accuracy.CASES)}
    assert moe_accuracy.kind(rows["w5"]) == "regression"
    assert moe_accuracy.kind(rows["w6"]) == "token dropping"
    assert moe_accuracy.kind(rows["w4"]) == "benchmark"  # the same model on H100 in 26.06
