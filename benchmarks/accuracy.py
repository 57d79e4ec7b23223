"""Accuracy of the cost model against published training runs.

Each row of a cases CSV becomes the spec a user would write (benchmarks/cases.py): its model,
cluster and software (`stack`), and its plan with the fields the source does not publish as
choices. The prediction is the fastest plan of that space that fits in memory (the protocol
of shared/validation/README.md), searched exhaustively with the same code as `tuner search`.
"stated" fills the fields a source states in its text (benchmarks/sources.yaml) first.
Where a row publishes the measured peak memory per GPU, the predicted memory of the predicted
plan is compared with it too.

    python benchmarks/accuracy.py [--cases PATH] [--fit] [--json]
    python benchmarks/accuracy.py --cases benchmarks/external_cases.csv   # out of sample

`benchmarks/external_cases.csv` holds published runs outside shared/validation (NeMo and
Megatron-Bridge performance tables, NVIDIA's DGX Cloud recipes, MLPerf Training, torchtitan,
IBM's FSDP runs, the Llama 3 paper, BLOOM; bf16 and fp8, H100 to GB300, 8 to 16,384 GPUs),
each with its source, address and conversion in its row; nothing is fitted on them.
`--fit` prints, per GPU, the GEMM fraction minimising the squared log error of its cases with
their stated plans (a 1-D grid search): how the catalog's values were found.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.cases import case_spec, load_cases, stated  # noqa: E402
from cost import DEFAULT_EFFICIENCY, Efficiency, PlanRecord, evaluate  # noqa: E402
from search_spaces import Space, parse_spec  # noqa: E402

DEFAULT_CASES = ROOT.parent / "shared" / "validation" / "cases.csv"
_GIB = float(2**30)


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
    memory_gib: float = math.nan  # predicted peak of the predicted plan
    measured_memory_gib: float = math.nan

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1.0

    @property
    def memory_error(self) -> float:
        return self.memory_gib / self.measured_memory_gib - 1.0


def predict(row: dict[str, str], efficiency: Efficiency | None = None) -> Outcome:
    """The fastest feasible plan of the row's space (inf if none fits)."""
    spec = parse_spec(case_spec(row), name=f"case-{row['case']}")
    space = Space.from_spec(spec)
    eff = spec.stack.apply(efficiency) if efficiency is not None else space.efficiency
    cluster = space.some_cluster()
    best, plan, memory, feasible = math.inf, None, math.nan, 0
    for plans in space.plans(cluster):
        report = evaluate(space.model, cluster, space.training, plans, efficiency=eff)
        times = np.where(report.feasible, report.step_time_s, np.inf)
        feasible += int(np.count_nonzero(report.feasible))
        i = int(np.argmin(times))
        if times[i] < best:
            best, memory = float(times[i]), float(report.memory.total_bytes[i]) / _GIB
            plan = PlanRecord.of(plans, gpus=float(cluster.gpus), index=i).as_dict()
    shown = {k: plan[k] for k in ("micro_batch", "recompute", "sequence_parallel",
                                  "virtual_stages", "zero")} if plan else {}
    return Outcome(case=row["case"], model=row["model"], gpu=row["gpu"], gpus=int(row["gpus"]),
                   measured_s=float(row["measured_step_time_s"]), predicted_s=best, plan=shown,
                   feasible_plans=feasible, memory_gib=memory,
                   measured_memory_gib=float(row.get("measured_peak_memory_gib") or math.nan))


def fit_gemm_fractions(rows: list[dict[str, str]]) -> dict[str, float]:
    """Per GPU, the GEMM fraction minimising the sum of squared log errors of its cases, with
    their stated plans."""
    rows = [stated(r) for r in rows]
    grid = np.arange(0.30, 0.951, 0.005)
    best: dict[str, float] = {}
    for gpu in sorted({r["gpu"] for r in rows}):
        mine = [r for r in rows if r["gpu"] == gpu]
        losses = [sum(math.log(max(predict(r, DEFAULT_EFFICIENCY.with_(gemm_fraction=float(g)))
                                   .error + 1.0, 1e-9)) ** 2 for r in mine) for g in grid]
        best[gpu] = round(float(grid[int(np.argmin(losses))]), 3)
    return best


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """Mean and largest absolute error over the feasible cases, mean signed error, the cases
    with no feasible plan, and the same for peak memory where it was measured."""
    errors = np.array([o.error for o in outcomes if math.isfinite(o.predicted_s)])
    if errors.size == 0:
        errors = np.array([math.inf])
    memory = np.array([o.memory_error for o in outcomes
                       if math.isfinite(o.measured_memory_gib) and math.isfinite(o.memory_gib)])
    out = {"cases": len(outcomes), "mean_abs_error": float(np.mean(np.abs(errors))),
           "max_abs_error": float(np.max(np.abs(errors))),
           "mean_error": float(np.mean(errors)),
           "infeasible": [o.case for o in outcomes if not math.isfinite(o.predicted_s)]}
    if memory.size:
        out["memory"] = {"cases": int(memory.size),
                         "mean_abs_error": float(np.mean(np.abs(memory))),
                         "max_abs_error": float(np.max(np.abs(memory)))}
    return out


def _summary_line(name: str, s: dict[str, Any]) -> str:
    line = (f"{name}: mean absolute error {100 * s['mean_abs_error']:.1f}%, largest "
            f"{100 * s['max_abs_error']:.1f}%, mean signed {100 * s['mean_error']:+.1f}%, "
            f"infeasible cases: {len(s['infeasible'])} of {s['cases']}")
    if "memory" in s:
        m = s["memory"]
        line += (f"; peak memory ({m['cases']} measured): mean absolute error "
                 f"{100 * m['mean_abs_error']:.1f}%, largest {100 * m['max_abs_error']:.1f}%")
    return line


def _row_line(p: Outcome, s: Outcome) -> str:
    plan = " ".join(f"{k}={v}" for k, v in p.plan.items())
    memory = (f" mem {p.memory_gib:5.1f}/{p.measured_memory_gib:5.1f} GiB"
              if math.isfinite(p.measured_memory_gib) else "")
    return (f"{p.case:>4} {p.model[:30]:<30} {p.gpu:<10} {p.gpus:>5} {p.measured_s:>9.3f} "
            f"{p.predicted_s:>9.3f} {100 * p.error:>+7.1f}% {100 * s.error:>+7.1f}%  "
            f"{plan}{memory}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--fit", action="store_true", help="also fit per-GPU GEMM fractions")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args(argv)
    rows = load_cases(args.cases)
    protocol = [predict(r) for r in rows]
    as_stated = [predict(stated(r)) for r in rows]
    result: dict[str, Any] = {"protocol": summary(protocol), "stated": summary(as_stated)}
    if args.fit:
        result["fitted_gemm_fraction"] = fit_gemm_fractions(rows)
    if args.json:
        print(json.dumps({"summary": result, "cases": [
            {**p.__dict__, "error": p.error, "stated_predicted_s": s.predicted_s,
             "stated_error": s.error} for p, s in zip(protocol, as_stated, strict=True)]},
            indent=1, default=lambda x: None if isinstance(x, float) else str(x)))
        return 0
    print(f"{'case':>4} {'model':<30} {'gpu':<10} {'gpus':>5} {'measured':>9} {'predicted':>9} "
          f"{'error':>8} {'stated':>8}  fastest feasible plan for the blank fields")
    for p, s in zip(protocol, as_stated, strict=True):
        print(_row_line(p, s))
    print()
    print(_summary_line("protocol (every blank field searched)", result["protocol"]))
    print(_summary_line("stated plans (benchmarks/sources.yaml)", result["stated"]))
    if args.fit:
        print(f"fitted GEMM fractions (stated plans): {result['fitted_gemm_fraction']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
