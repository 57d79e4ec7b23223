"""Accuracy of the cost model against published training runs (shared/validation/cases.csv).

Two predictions per case, both with the blank plan fields searched: the prediction is the
fastest plan that fits in memory over micro-batch 1, 2, 4, 8 (where it divides the batch),
recompute none/selective/full, sequence parallelism on/off (tp > 1), virtual stages (pp > 1)
and ZeRO 0/1.
- "protocol": the validation README's rule, every blank field searched.
- "stated": the fields a source states in its text (benchmarks/sources.yaml: the 2020-21
  Megatron-LM runs used full recompute) taken as stated, the rest searched.
Both model each run on its own software (sources.yaml `stack`: runs before 2022 had no fused
flash attention), as a spec's `stack` section does.
Prints measured vs predicted per case, the mean absolute and the largest error of each.

    python benchmarks/accuracy.py [--cases PATH] [--fit] [--json]
    python benchmarks/accuracy.py --cases benchmarks/external_cases.csv   # out of sample

`benchmarks/external_cases.csv` holds 32 published runs outside shared/validation (NeMo and
Megatron-Bridge performance tables, NVIDIA's DGX Cloud recipes, BLOOM, IBM's FSDP runs: bf16
and fp8, context parallelism, ZeRO-3, H100/B200/GB200/A100, 8 to 2048 GPUs), each with its
source and conversion in its row; no parameter is fitted on them.

`--fit` also prints, per GPU, the GEMM fraction that minimises the squared log error of its
cases with their stated plans (a 1-D grid search with everything else fixed): how the
catalog's values were found.
"""

from __future__ import annotations

import argparse
import csv
import functools
import itertools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cost import (  # noqa: E402
    DEFAULT_EFFICIENCY,
    ClusterSpec,
    CostReport,
    Efficiency,
    ModelSpec,
    Plan,
    TrainingSpec,
    evaluate,
)
from cost.codec import Recompute  # noqa: E402
from search_spaces import StackSection  # noqa: E402

RECOMPUTE = [r.value for r in Recompute]
from search_spaces.catalog import gpu_catalog  # noqa: E402

DEFAULT_CASES = ROOT.parent / "shared" / "validation" / "cases.csv"
SOURCES = Path(__file__).with_name("sources.yaml")
PLAN_FIELDS = ("recompute", "sequence_parallel", "zero", "micro_batch", "virtual_stages")


@functools.cache
def _sources() -> tuple[dict[str, Any], ...]:
    return tuple(yaml.safe_load(SOURCES.read_text()))


def _source(row: dict[str, str]) -> dict[str, Any]:
    for entry in _sources():
        if row["source"].startswith(entry["source_starts_with"]):
            return dict(entry)
    return {}


def stated(row: dict[str, str]) -> dict[str, str]:
    """The row with the plan fields its source states filled in (sources.yaml)."""
    fields = {k: str(v).lower() for k, v in _source(row).items() if k in PLAN_FIELDS}
    return {**row, **{k: v for k, v in fields.items() if not row.get(k)}}


def stack(row: dict[str, str]) -> StackSection:
    """The software the row's run used (sources.yaml `stack`; a current stack if not given)."""
    return StackSection(**(_source(row).get("stack") or {}))


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
    report: CostReport = evaluate(model, cluster, training, plan,
                                  efficiency=stack(row).apply(efficiency))
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
    """Per GPU, the GEMM fraction minimising the sum of squared log errors of its cases, with
    their stated plans."""
    rows = [stated(r) for r in rows]
    grid = np.arange(0.30, 0.951, 0.005)
    best: dict[str, float] = {}
    for gpu in sorted({r["gpu"] for r in rows}):
        mine = [r for r in rows if r["gpu"] == gpu]
        losses = [sum(np.log(predict(r, DEFAULT_EFFICIENCY.with_(gemm_fraction=float(g)))
                             .error + 1.0) ** 2 for r in mine) for g in grid]
        best[gpu] = round(float(grid[int(np.argmin(losses))]), 3)
    return best


def _summary(outcomes: list[Outcome]) -> dict[str, Any]:
    errors = np.array([o.error for o in outcomes if np.isfinite(o.predicted_s)])
    if errors.size == 0:
        errors = np.array([np.inf])
    return {"mean_abs_error": float(np.mean(np.abs(errors))),
            "max_abs_error": float(np.max(np.abs(errors))),
            "mean_error": float(np.mean(errors)),
            "infeasible": [o.case for o in outcomes if not np.isfinite(o.predicted_s)]}


def _summary_line(name: str, s: dict[str, Any]) -> str:
    return (f"{name}: mean absolute error {100 * s['mean_abs_error']:.1f}%, largest "
            f"{100 * s['max_abs_error']:.1f}%, mean signed {100 * s['mean_error']:+.1f}%, "
            f"infeasible cases: {len(s['infeasible'])} (errors over the feasible ones)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--fit", action="store_true", help="also fit per-GPU GEMM fractions")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args(argv)
    rows = load_cases(args.cases)
    protocol = [predict(r) for r in rows]
    as_stated = [predict(stated(r)) for r in rows]
    summary: dict[str, Any] = {"cases": len(rows), "protocol": _summary(protocol),
                               "stated": _summary(as_stated)}
    if args.fit:
        summary["fitted_gemm_fraction"] = fit_gemm_fractions(rows)
    if args.json:
        print(json.dumps({"summary": summary, "cases": [
            {**p.__dict__, "error": p.error, "stated_predicted_s": s.predicted_s,
             "stated_error": s.error, "stated_plan": s.plan}
            for p, s in zip(protocol, as_stated, strict=True)]}, indent=1))
        return 0
    print(f"{'case':>4} {'model':<38} {'gpu':<10} {'gpus':>5} {'measured s':>10} "
          f"{'protocol s':>10} {'error':>7} {'stated s':>10} {'error':>7}  "
          "fastest feasible plan for the blank fields (protocol)")
    for p, s in zip(protocol, as_stated, strict=True):
        plan = " ".join(f"{k}={v}" for k, v in p.plan.items())
        print(f"{p.case:>4} {p.model[:38]:<38} {p.gpu:<10} {p.gpus:>5} {p.measured_s:>10.3f} "
              f"{p.predicted_s:>10.3f} {100 * p.error:>+6.1f}% {s.predicted_s:>10.3f} "
              f"{100 * s.error:>+6.1f}%  {plan}")
    print()
    print(_summary_line("protocol (every blank field searched)", summary["protocol"]))
    print(_summary_line("stated plans (benchmarks/sources.yaml)", summary["stated"]))
    if args.fit:
        print(f"fitted GEMM fractions (stated plans): {summary['fitted_gemm_fraction']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
