"""Accuracy of the mixture-of-experts model against published MoE training runs, out of sample.

`benchmarks/moe_cases.csv` holds 106 measured runs of DeepSeek-V3, Qwen3-235B-A22B,
Qwen3-30B-A3B, GPT-OSS 120B and 20B and Mixtral 8x7B and 8x22B on H100, H800, H200, B200,
GB200 and GB300 (Megatron-Bridge performance summaries 25.09-26.08 and model cards, the
Megatron-LM DeepSeek-V3 GB200 guide and MoE recipes, Megatron-MoE-ModelZoo, NeMo Automodel,
NeMo, torchtitan, the DeepSeek-V3 report, user reports), each with its source, URL, conversion
(`measured_as`) and caveats (`notes`). Nothing of the model was fitted on them.

Each row is modelled on its catalog model (with the row's sequence length), its GPU's catalog
node, and the software its source states (benchmarks/moe_sources.yaml `stack`: the dispatcher,
all-to-all overlap, routing). Blank plan fields are searched, as the validation README says,
for the fastest plan that fits: micro-batch 1, 2, 4, 8 (dividing the batch), recompute
none/selective/full, sequence parallelism on/off (tp > 1), virtual stages (pp > 1), ZeRO 0/1,
etp among the divisors of the stage's ranks, ep among the experts' divisors where not given;
a blank precision is bf16 (Megatron's default: no fp8 flag is stated).

Rows are grouped by `kind`: "benchmark" (force-balanced, dropless performance runs: the
headline), and rows whose work the model does not describe as run: "natural routing" (load
imbalance not published: expert_imbalance 1.0 understates them), "token dropping"
(capacity-factor runs drop tokens the model still computes), "SFT report" (approximate
user reports of fine-tuning) and "regression" (a run its publisher's own tracker records as a
software regression of that release). Prints each row and the error by group.

    python benchmarks/moe_accuracy.py [--cases PATH] [--limit N] [--json]
"""

from __future__ import annotations

import argparse
import csv
import functools
import itertools
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cost import ClusterSpec, Plan, TrainingSpec, evaluate  # noqa: E402
from cost.codec import Recompute  # noqa: E402
from search_spaces import StackSection  # noqa: E402
from search_spaces.catalog import gpu_catalog, model_catalog  # noqa: E402

CASES = Path(__file__).with_name("moe_cases.csv")
SOURCES = Path(__file__).with_name("moe_sources.yaml")
RECOMPUTE = [r.value for r in Recompute]
KNOBS = ("tp", "pp", "dp", "cp", "ep", "etp", "virtual_stages", "micro_batch", "recompute",
         "sequence_parallel", "zero")


@functools.cache
def _sources() -> tuple[dict[str, Any], ...]:
    return tuple(yaml.safe_load(SOURCES.read_text()))


def source_entries(row: dict[str, str]) -> list[dict[str, Any]]:
    """Every moe_sources.yaml entry whose `source_starts_with` begins the row's source, the
    longest (most specific) last."""
    found = [e for e in _sources() if row["source"].startswith(e["source_starts_with"])]
    return sorted(found, key=lambda e: len(e["source_starts_with"]))


def stack(row: dict[str, str]) -> StackSection:
    """The software the row's run used: its entries' `stack`, the most specific winning, then
    the row's own `fp8_recipe` column where the run is fp8 (as benchmarks/cases.py applies the
    dense tables' columns; "current (inferred)" is the current recipe)."""
    merged: dict[str, Any] = {}
    for entry in source_entries(row):
        merged.update(entry.get("stack") or {})
    recipe = row.get("fp8_recipe", "").split(" ")[0]
    if row.get("precision") == "fp8" and recipe:
        merged["fp8_recipe"] = recipe
    return StackSection(**merged)


def model_changes(row: dict[str, str]) -> dict[str, Any]:
    """Fields of the catalog model the run changed (its entries' `model`)."""
    merged: dict[str, Any] = {}
    for entry in source_entries(row):
        merged.update(entry.get("model") or {})
    return merged


def kind(row: dict[str, str]) -> str:
    """The row's group: its entries' `kind`, else "benchmark"."""
    kinds = [e["kind"] for e in source_entries(row) if "kind" in e]
    return kinds[-1] if kinds else "benchmark"


@dataclass(frozen=True)
class Outcome:
    case: str
    kind: str
    model: str
    gpu: str
    gpus: int
    measured_s: float
    predicted_s: float
    plan: dict[str, Any]
    memory_gib: float

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1.0


def _recompute(text: str) -> list[int]:
    """The stated recompute; Megatron's `moe` module (the whole MoE block redone) lies between
    the model's selective (activation function, norms, MLA up projections) and full: both are
    tried. Blank (or "none stated (blank)"): all three."""
    word = text.split(" ")[0] if text and "(blank)" not in text else ""
    modules = text.partition("(")[2].rstrip(")").split(",")
    if word == "selective" and "moe" in (m.strip() for m in modules):
        return [1, 2]
    return [RECOMPUTE.index(word)] if word in RECOMPUTE else [0, 1, 2]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(row: dict[str, str], layers: int, experts: int) -> dict[str, list[Any]]:
    """Each plan knob's values: the row's where given, else its sensible values."""
    gpus = int(row["gpus"])
    given = {k: row.get(k, "").strip() for k in KNOBS}
    out: dict[str, list[Any]] = {}
    for name in ("tp", "cp"):
        out[name] = [int(given[name])] if given[name] else [1]
    out["pp"] = [int(given["pp"])] if given["pp"] else [p for p in _divisors(gpus)
                                                        if p <= layers and p <= 16]
    out["dp"] = [int(given["dp"])] if given["dp"] else [0]
    out["ep"] = [int(given["ep"])] if given["ep"] else _divisors(experts)
    out["etp"] = [int(given["etp"])] if given["etp"] else [1, 2, 4, 8]
    out["micro_batch"] = ([int(given["micro_batch"])] if given["micro_batch"]
                          else [1, 2, 4, 8])
    out["recompute"] = _recompute(given["recompute"])
    sp = given["sequence_parallel"].lower()
    out["sequence_parallel"] = [sp == "true"] if sp else [False, True]
    out["zero"] = [int(given["zero"])] if given["zero"] else [0, 1]
    most = max(out["pp"])
    out["virtual_stages"] = ([int(given["virtual_stages"])] if given["virtual_stages"]
                             else list(range(1, layers // max(1, min(out["pp"])) + 1))
                             if most > 1 else [1])
    return out


def predict(row: dict[str, str]) -> Outcome:
    """The fastest feasible plan over the row's blank fields, and its step time."""
    base = model_catalog()[row["model"]]
    model = replace(base, seq_len=int(row["seq_len"]), **model_changes(row))
    gpu = gpu_catalog()[row["gpu"]]
    gpus, per_node = int(row["gpus"]), int(row["gpus_per_node"])
    cluster = ClusterSpec.of(gpu, nodes=max(1, gpus // per_node),
                             gpus_per_node=min(per_node, gpus))
    training = TrainingSpec(global_batch=int(row["global_batch"]),
                            precision=row["precision"] or "bf16")
    values = candidates(row, model.layers, model.experts)
    names = list(values)
    grid = np.array(list(itertools.product(*(values[n] for n in names))), dtype=np.float64)
    plan = Plan(**{n: grid[:, i] for i, n in enumerate(names)})
    report = evaluate(model, cluster, training, plan, efficiency=stack(row).apply(
        _efficiency()))
    times = np.where(report.feasible, report.step_time_s, np.inf)
    best = int(np.argmin(times))
    chosen = {n: (RECOMPUTE[int(grid[best, i])] if n == "recompute" else
                  bool(grid[best, i]) if n == "sequence_parallel" else int(grid[best, i]))
              for i, n in enumerate(names) if len(values[n]) > 1}
    memory = float(np.ravel(report.memory.total_bytes)[best]) / 2**30
    return Outcome(case=row["case"], kind=kind(row), model=row["model"], gpu=row["gpu"],
                   gpus=gpus, measured_s=float(row["measured_step_time_s"]),
                   predicted_s=float(times[best]), plan=chosen, memory_gib=memory)


@functools.cache
def _efficiency() -> Any:
    from cost import DEFAULT_EFFICIENCY
    return DEFAULT_EFFICIENCY


def load_cases(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """Mean absolute, largest and mean signed error over the feasible rows; infeasible rows."""
    errors = np.array([o.error for o in outcomes if np.isfinite(o.predicted_s)])
    if errors.size == 0:
        errors = np.array([np.inf])
    return {"rows": len(outcomes), "mean_abs_error": float(np.mean(np.abs(errors))),
            "max_abs_error": float(np.max(np.abs(errors))),
            "mean_error": float(np.mean(errors)),
            "within_15": int(np.sum(np.abs(errors) <= 0.15)),
            "infeasible": [o.case for o in outcomes if not np.isfinite(o.predicted_s)]}


def _line(name: str, s: dict[str, Any]) -> str:
    return (f"{name:<34} {s['rows']:>4} rows: mean absolute error "
            f"{100 * s['mean_abs_error']:5.1f}%, largest {100 * s['max_abs_error']:5.1f}%, "
            f"mean signed {100 * s['mean_error']:+5.1f}%, within 15%: {s['within_15']}, "
            f"infeasible: {len(s['infeasible'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=Path, default=CASES)
    parser.add_argument("--limit", type=int, default=0, help="only the first N rows")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args(argv)
    rows = load_cases(args.cases)
    rows = rows[:args.limit] if args.limit else rows
    outcomes = [predict(r) for r in rows]
    groups = {"all rows": outcomes}
    for name in sorted({o.kind for o in outcomes}):
        groups[name] = [o for o in outcomes if o.kind == name]
    result = {name: summary(group) for name, group in groups.items()}
    if args.json:
        print(json.dumps({"summary": result, "cases": [
            {**o.__dict__, "error": o.error} for o in outcomes]}, indent=1))
        return 0
    print(f"{'case':>4} {'kind':<15} {'model':<16} {'gpu':<9} {'gpus':>5} {'measured s':>10} "
          f"{'model s':>9} {'error':>7} {'GiB':>6}  fastest feasible plan for the blank fields")
    for o in outcomes:
        plan = " ".join(f"{k}={v}" for k, v in o.plan.items())
        print(f"{o.case:>4} {o.kind:<15} {o.model:<16} {o.gpu:<9} {o.gpus:>5} "
              f"{o.measured_s:>10.3f} {o.predicted_s:>9.3f} {100 * o.error:>+6.1f}% "
              f"{o.memory_gib:>6.1f}  {plan}")
    print()
    for name, s in result.items():
        print(_line(name, s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
