"""Text views of stored studies for `tuner studies` and `tuner best`; no formulas here."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cost import ClusterSummary, PlanRecord
from studies import TrialResult

__all__ = ["best_cells", "best_text", "cluster_summary", "plan_summary", "studies_text"]

_GIB = 2.0**30


def _number(value: Any, fmt: str) -> str:
    """`value` formatted, or '-' when missing or not finite."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    return format(value, fmt) if math.isfinite(value) else "-"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns left-aligned for the first two, right-aligned for the rest."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()
    return [line(header), *[line(r) for r in rows]]


def plan_summary(plan: PlanRecord) -> str:
    """'tp=8 pp=8 dp=1 ...': the plan's values that are not their defaults."""
    p = plan.as_dict()
    parts = [f"tp={p['tp']}", f"pp={p['pp']}", f"dp={p['dp']}"]
    optional: dict[str, Any] = {"cp": 1, "virtual_stages": 1, "zero": 0, "offload": "none",
                                "placement": "data", "batch_shares": "balanced"}
    parts += [f"{k}={p[k]}" for k, default in optional.items() if p[k] != default]
    parts.append(f"mb={p['micro_batch']}")
    parts.append(f"recompute={p['recompute']}")
    if p["sequence_parallel"]:
        parts.append("sp")
    return " ".join(parts)


def cluster_summary(cluster: ClusterSummary) -> str:
    """'128x8 a100-80gb' (and ' spot' on spot servers); pools joined by '+'."""
    if cluster.pools:
        return "+".join(f"{p['nodes']}x{p['gpus_per_node']} {p['gpu']}"
                        + (" spot" if p["pricing"] == "spot" else "")
                        for p in cluster.pools if p["nodes"] > 0)
    return (f"{cluster.nodes}x{cluster.gpus_per_node} {cluster.gpu}"
            + (" spot" if cluster.pricing == "spot" else ""))


_BEST_COLUMNS: list[tuple[str, Callable[[TrialResult], str]]] = [
    ("plan", lambda r: plan_summary(r.result.plan)),
    ("cluster", lambda r: cluster_summary(r.result.cluster)),
    ("trial", lambda r: str(r.trial)),
    ("step s", lambda r: _number(r.result.step_time_s, ".3f")),
    ("tokens/s", lambda r: _number(r.result.tokens_per_s, ",.0f")),
    ("MFU %", lambda r: _number(100.0 * r.result.mfu, ".1f")),
    ("mem GiB", lambda r: _number(r.result.memory_total_bytes / _GIB, ".1f")),
    ("$/hour", lambda r: _number(r.result.cost_per_hour_usd, ",.0f")),
    ("days", lambda r: _number(r.result.time_to_train_days, ",.1f")),
    ("$ to train", lambda r: _number(r.result.cost_to_train_usd, ",.0f")),
]


def best_cells(results: Sequence[TrialResult]) -> tuple[list[str], list[list[str]]]:
    """The header and one row of formatted cells per plan: plan, cluster, trial, step time,
    tokens/s, MFU, memory, price, days and USD to train (as `tuner best` shows them)."""
    header = [c for c, _ in _BEST_COLUMNS]
    return header, [[cell(r) for _, cell in _BEST_COLUMNS] for r in results]


def best_text(name: str, results: Sequence[TrialResult], *, pareto: bool) -> str:
    """One row per best plan (or per plan of the Pareto front)."""
    if not results:
        return f"{name}: no feasible plan yet; run more trials or relax the constraints"
    title = f"{name}: Pareto front, {len(results)} plans" if pareto else f"{name}: best plans"
    header, rows = best_cells(results)
    return "\n".join([title, *_table(header, rows)])


def _values_text(values: Sequence[float] | None) -> str:
    if not values:
        return "-"
    return ", ".join(_number(v, ".4g") for v in values)


def studies_text(summaries: Sequence[Mapping[str, Any]], *, storage: str) -> str:
    """One row per study: objectives, trials done of the target, states, best value(s)."""
    if not summaries:
        return f"no studies in {storage}; `tuner search SPEC` makes one"
    header = ["name", "objectives", "done/target", "complete", "pruned", "fail", "running",
              "best"]
    rows = [[str(s["name"]),
             ",".join(s.get("objectives") or s.get("directions") or []),
             f"{s['trials']}/{s['target_trials']}",
             str(s["complete"]), str(s["pruned"]), str(s["fail"]), str(s["running"]),
             _values_text(s.get("best_values"))] for s in summaries]
    return "\n".join([f"studies in {storage}", *_table(header, rows)])
