"""benchmarks/gpu_validation.py --pairs: the differences between paired one-GPU runs, measured
and predicted, on hand-made runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import gpu_validation  # noqa: E402


def _run(mb: int, compiled: bool, step_s: float | None) -> dict:
    return {"model": "m", "micro_batch": mb, "recompute": "none", "compiled": compiled,
            "step_s": step_s}


def test_pairs_subtract_the_paired_runs() -> None:
    runs = [_run(4, False, 0.60), _run(4, True, 0.50), _run(8, False, 0.56),
            _run(2, False, 0.70), _run(8, True, None)]
    rows = [{"predicted_s": t} for t in (0.62, 0.55, 0.60, 0.71, 0.40)]
    found = {p["pair"]: p for p in gpu_validation.pairs(runs, rows)}
    assert set(found) == {"eager - compiled, mb4", "(mb4 - mb8) / 2, none"}
    compiled = found["eager - compiled, mb4"]
    assert compiled["measured_s"] == pytest.approx(0.10)
    assert compiled["predicted_s"] == pytest.approx(0.07)
    per_mb = found["(mb4 - mb8) / 2, none"]  # two more micro-batches at mb4 than at mb8
    assert per_mb["measured_s"] == pytest.approx(0.02)
    assert per_mb["predicted_s"] == pytest.approx(0.01)
