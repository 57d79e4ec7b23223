"""Text rendering of `tuner explain`: where one plan's step time goes and the what-ifs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cost import PlanRecord, PlanResult

from .studies import plan_summary
from .text import cluster_line, pool_rows, price_rows, seconds_text

__all__ = ["explain_text"]

_GIB = 2.0**30


def _percent(change: float) -> str:
    return f"{100.0 * change:+.1f} %"


def _terms(out: Mapping[str, Any]) -> list[str]:
    rows = ["  where the step time goes"]
    shown = [t for t in out["terms"] if t["seconds"] > 0]
    width = max((len(t["label"]) for t in shown), default=0)
    for t in shown:
        mark = "  <- dominant" if t["term"] == out["dominant"] else ""
        rows.append(f"    {t['label']:<{width}} {seconds_text(t['seconds'], 8)} "
                    f"{100 * t['share']:5.1f} %{mark}")
    return rows


def _memory(memory: Mapping[str, Any]) -> str:
    used, usable = memory["total_bytes"] / _GIB, memory["usable_bytes"] / _GIB
    share = 100.0 * memory["used_share"]
    if memory["fits"]:
        return (f"  memory            {used:.1f} of {usable:.1f} GiB usable HBM per GPU "
                f"({share:.0f} %): fits, {memory['headroom_bytes'] / _GIB:.1f} GiB to spare")
    return (f"  memory            {used:.1f} of {usable:.1f} GiB usable HBM per GPU "
            f"({share:.0f} %): does NOT fit, {-memory['headroom_bytes'] / _GIB:.1f} GiB over")


def _figures(change: Mapping[str, Any], scale: float, fmt: str, unit: str) -> str:
    """'25 -> 50 GB/s per GPU', or on a cluster of several GPU types each used pool's
    'owned 25 -> 50, rented 50 -> 100, between pools 25 -> 50 GB/s per GPU'."""
    def pair(before: float, after: float) -> str:
        return f"{before / scale:{fmt}} -> {after / scale:{fmt}}"

    if not change.get("pools"):
        return f"{pair(change['from_bytes_per_s'], change['to_bytes_per_s'])} {unit}"
    parts = [f"{p['name']} {pair(p['from_bytes_per_s'], p['to_bytes_per_s'])}"
             for p in change["pools"]]
    if "inter_pool_from_bytes_per_s" in change:
        parts.append("between pools " + pair(change["inter_pool_from_bytes_per_s"],
                                             change["inter_pool_to_bytes_per_s"]))
    return f"{', '.join(parts)} {unit}"


def _bandwidth_rows(what_if: Mapping[str, Any]) -> list[str]:
    out, hbm = what_if["scale_out_bandwidth_x2"], what_if["hbm_bandwidth_x2"]
    return [
        f"    2x scale-out bandwidth ({_figures(out, 1e9, 'g', 'GB/s per GPU')}): {_step(out)}",
        f"    2x HBM bandwidth ({_figures(hbm, 1e12, '.2f', 'TB/s')}): {_step(hbm)}",
    ]


def _step(change: Mapping[str, Any]) -> str:
    """'step 12.345 s (-3.0 %)', or 'step never' for a step without end."""
    seconds = change["step_time_s"]
    if not math.isfinite(seconds):
        return f"step {seconds_text(seconds)}"
    return f"step {seconds_text(seconds)} ({_percent(change['change'])})"


def _neighbour(best: Mapping[str, Any] | None) -> str:
    if best is None:
        return "no plan of the neighbourhood fits"
    return (f"{best['step_time_s']:.3f} s with {plan_summary(PlanRecord.from_dict(best['plan']))} "
            f"({best['memory_total_bytes'] / _GIB:.1f} GiB)")


def _capacity_rows(capacity: Mapping[str, Any] | None) -> list[str]:
    if capacity is None:
        return []
    today, larger = capacity["best_today"], capacity["best_larger"]
    evaluated = (today or larger or {}).get("plans_evaluated", 0)
    rows = [f"    1.5x HBM capacity ({capacity['from_bytes'] / _GIB:.0f} -> "
            f"{capacity['to_bytes'] / _GIB:.0f} GiB), best of {evaluated:,} neighbouring plans:",
            f"      today's HBM   {_neighbour(today)}",
            f"      1.5x HBM      {_neighbour(larger)}"]
    if capacity["change"] is not None:
        rows.append(f"      memory alone: {_percent(capacity['change'])} step time")
    return rows


def _price_rows(out: Mapping[str, Any]) -> list[str]:
    """Price, time and cost to train, with the spot overhead (older objects lack them)."""
    if "cost_per_hour_usd" not in out:
        return []
    return price_rows(PlanResult.from_dict(out), float(out.get("tokens") or 0.0))


def _calibration_rows(calibration: Mapping[str, Any] | None) -> list[str]:
    """'calibrated by PATH: gemm_fraction 0.612 (default 0.65), ...'; nothing without one."""
    if not calibration:
        return []
    sets = calibration["sets"]
    if not sets:
        return [f"  calibrated by     {calibration['profile']}: the defaults' values"]
    parts = [f"{key} {_setting(v['value'])} (default {_setting(v['default'])})"
             for key, v in sets.items()]
    return [f"  calibrated by     {calibration['profile']}: {', '.join(parts)}"]


def _setting(value: Any) -> str:
    if isinstance(value, dict):  # per GPU
        return ", ".join(f"{gpu} {f:.4g}" for gpu, f in value.items()) or "none"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def explain_text(out: Mapping[str, Any]) -> str:
    """The report of `tuner explain`, from the object `tuner explain --json` prints."""
    c = out["cluster"]
    status = "feasible" if out["feasible"] else "NOT feasible"
    lines = [
        f"{out['spec']}",
        f"  model             {out['model']}",
        f"  cluster           {cluster_line(c)}",
        f"  plan              {plan_summary(PlanRecord.from_dict(out['plan']))} ({status})",
        f"  step time         {seconds_text(out['step_time_s'])}, MFU {100.0 * out['mfu']:.1f} %",
        *_calibration_rows(out.get("calibration")),
        *_terms(out),
        *pool_rows(out.get("pools"), out.get("bottleneck", "")),
        _memory(out["memory"]),
        *[f"    - {v}" for v in out["violations"]],
        *_price_rows(out),
        "  what if",
        *_bandwidth_rows(out["what_if"]),
        *_capacity_rows(out["what_if"]["hbm_capacity_x1_5"]),
    ]
    return "\n".join(lines)
