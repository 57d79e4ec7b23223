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
    assert every["mean_abs_error"] <= 0.173 and every["max_abs_error"] <= 1.15, every
    assert not every["infeasible"], every["infeasible"]
    assert bench["mean_abs_error"] <= 0.150 and bench["max_abs_error"] <= 0.58, bench
    assert not bench["infeasible"], bench["infeasible"]


def test_each_fp8_row_runs_the_recipe_its_table_states() -> None:
    rows = {r["case"]: r for r in moe_accuracy.load_cases(moe_accuracy.CASES)}
    assert moe_accuracy.stack(rows["w24"]).fp8_recipe == "mxfp8"
    assert moe_accuracy.stack(rows["w21"]).fp8_recipe == "blockwise"
    assert moe_accuracy.stack(rows["w4"]).fp8_recipe == "current"  # "current (inferred)"
    assert moe_accuracy.stack(rows["w15"]).fp8_recipe is None  # bf16: no recipe
