"""Accuracy of the cost model against published training runs (shared/validation/cases.csv).

Each row's blank plan fields are searched, as the validation README says: the prediction is the
fastest plan that fits in memory over micro-batch 1, 2, 4, 8 (where it divides the batch),
recompute none/selective/full, sequence parallelism on/off (tp > 1), virtual stages (pp > 1)
and ZeRO 0/1. Prints measured vs predicted per case, the mean absolute and the largest error.

    python benchmarks/accuracy.py [--cases PATH] [--fit] [--json]

`--fit` also prints, per GPU, the GEMM fraction that minimises the squared log error of its
cases (a 1-D grid search with everything else fixed): how the catalog's values were found.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cost import (  # noqa: E402
    DEFAULT_EFFICIENCY,
    RECOMPUTE,
    ClusterSpec,
    CostReport,
    Efficiency,
    ModelSpec,
    Plan,
    TrainingSpec,
    evaluate,
)
from search_spaces.catalog import gpu_catalog  # noqa: E402

DEFAULT_CASES = ROOT.parent / "shared" / "validation" / "cases.csv"


@dataclass(frozen=True)
class Outcome:
    case: str
    model: str
    gpu: str
    gpus: int
    measured_s: float
    predicted_s: float
    plan: dict[str, Any]
    feasible_plans: int

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1.0


def _int(row: dict[str, str], key: str, default: int) -> int:
    return int(row[key]) if row.get(key, "").strip() else default


def _candidates(row: dict[str, str], model: ModelSpec, dp: int, batch: int) -> np.ndarray:
    """Every combination of the row's blank fields' sensible values (README of the cases)."""
    tp, pp = int(row["tp"]), int(row["pp"])
    mbs = ([int(row["micro_batch"])] if row["micro_batch"]
           else [b for b in (1, 2, 4, 8) if batch % (dp * b) == 0])
    rcs = [RECOMPUTE.index(row["recompute"])] if row["recompute"] else [0, 1, 2]
    sps = ([row["sequence_parallel"].lower() == "true"] if row["sequence_parallel"]
           else ([False, True] if tp > 1 else [False]))
    per_stage = model.layers // pp
    vss = ([int(row["virtual_stages"])] if row["virtual_stages"]
           else [v for v in range(1, per_stage + 1) if per_stage % v == 0] if pp > 1 else [1])
    zeros = [int(row["zero"])] if row.get("zero") else [0, 1]
    return np.array(list(itertools.product(mbs, rcs, sps, vss, zeros)), dtype=np.float64)


def predict(row: dict[str, str], efficiency: Efficiency = DEFAULT_EFFICIENCY) -> Outcome:
    model = ModelSpec(
        name=row["model"], layers=int(row["layers"]), hidden=int(row["hidden"]),
        heads=int(row["heads"]), kv_heads=_int(row, "kv_heads", 0),
        ffn_hidden=_int(row, "ffn_hidden", 0), vocab=int(row["vocab"]),
        seq_len=int(row["seq_len"]), gated_mlp=row.get("gated_mlp", "0") in ("1", "true"),
    )
    gpu = gpu_catalog()[row["gpu"]]
    gpus, per_node = int(row["gpus"]), int(row["gpus_per_node"])
    cluster = ClusterSpec.of(gpu, nodes=max(1, gpus // per_node),
                             gpus_per_node=min(per_node, gpus))
    training = TrainingSpec(global_batch=int(row["global_batch"]), precision=row["precision"])
    dp = int(row["dp"])
    c = _candidates(row, model, dp, training.global_batch)
    plan = Plan(tp=int(row["tp"]), pp=int(row["pp"]), dp=dp, cp=_int(row, "cp", 1),
                micro_batch=c[:, 0], recompute=c[:, 1], sequence_parallel=c[:, 2],
                virtual_stages=c[:, 3], zero=c[:, 4])
    report: CostReport = evaluate(model, cluster, training, plan, efficiency=efficiency)
    times = np.where(report.feasible, report.step_time_s, np.inf)
    best = int(np.argmin(times))
    chosen = {"micro_batch": int(c[best, 0]), "recompute": RECOMPUTE[int(c[best, 1])],
              "sequence_parallel": bool(c[best, 2]), "virtual_stages": int(c[best, 3]),
              "zero": int(c[best, 4])}
    return Outcome(case=row["case"], model=row["model"], gpu=row["gpu"], gpus=gpus,
                   measured_s=float(row["measured_step_time_s"]),
                   predicted_s=float(times[best]), plan=chosen,
                   feasible_plans=int(np.count_nonzero(report.feasible)))


def load_cases(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def fit_gemm_fractions(rows: list[dict[str, str]]) -> dict[str, float]:
    """Per GPU, the GEMM fraction minimising the sum of squared log errors of its cases."""
    grid = np.arange(0.30, 0.951, 0.005)
    best: dict[str, float] = {}
    for gpu in sorted({r["gpu"] for r in rows}):
        mine = [r for r in rows if r["gpu"] == gpu]
        losses = [sum(np.log(predict(r, DEFAULT_EFFICIENCY.with_(gemm_fraction=float(g)))
                             .error + 1.0) ** 2 for r in mine) for g in grid]
        best[gpu] = round(float(grid[int(np.argmin(losses))]), 3)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--fit", action="store_true", help="also fit per-GPU GEMM fractions")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args(argv)
    rows = load_cases(args.cases)
    outcomes = [predict(r) for r in rows]
    errors = np.array([o.error for o in outcomes])
    summary = {"cases": len(outcomes), "mean_abs_error": float(np.mean(np.abs(errors))),
               "max_abs_error": float(np.max(np.abs(errors))),
               "mean_error": float(np.mean(errors)),
               "infeasible": [o.case for o in outcomes if not np.isfinite(o.predicted_s)]}
    if args.fit:
        summary["fitted_gemm_fraction"] = fit_gemm_fractions(rows)
    if args.json:
        print(json.dumps({"summary": summary, "cases": [
            {**o.__dict__, "error": o.error} for o in outcomes]}, indent=1))
        return 0
    print(f"{'case':>4} {'model':<38} {'gpu':<10} {'gpus':>5} {'measured s':>11} "
          f"{'predicted s':>11} {'error':>7}  fastest feasible plan for the blank fields")
    for o in outcomes:
        plan = " ".join(f"{k}={v}" for k, v in o.plan.items())
        print(f"{o.case:>4} {o.model[:38]:<38} {o.gpu:<10} {o.gpus:>5} {o.measured_s:>11.3f} "
              f"{o.predicted_s:>11.3f} {100 * o.error:>+6.1f}%  {plan}")
    print(f"\nmean absolute error {100 * summary['mean_abs_error']:.1f}%, "
          f"largest {100 * summary['max_abs_error']:.1f}%, mean signed "
          f"{100 * summary['mean_error']:+.1f}%, infeasible cases: {summary['infeasible'] or 0}")
    if args.fit:
        print(f"fitted GEMM fractions: {summary['fitted_gemm_fraction']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
