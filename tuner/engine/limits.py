"""A spec's `constraints` on one plan's result: what each broken limit adds to its violations,
and the result of a fixed spec (`tuner evaluate`, `tuner explain`) under its limits.
`tuner evaluate` imports this module, not tuner.engine.evaluation (the sweeps' chunks)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cost import CostReport, PlanResult, evaluate, plan_result
from search_spaces import Constraints, StudySpec, required_free_bytes

from .scoring import score

__all__ = ["fixed_result", "limit_messages", "with_spec_limits"]

_GIB = 2.0**30
_LIMITS = {"max_cost": "cost to train", "max_days": "days to train", "max_gpus": "GPUs",
           "max_hourly_cost": "cost per hour"}
_FORMATS = {"max_cost": "${:,.0f}", "max_days": "{:,.1f}", "max_gpus": "{:,.0f}",
            "max_hourly_cost": "${:,.2f}"}
"""How each limited quantity is written (USD, days, GPUs, USD per hour)."""


def _over(name: str, what: str, limit: float, excess: float) -> str:
    """'cost to train is $4,854,040, 4,855x constraints.max_cost = 1000' (a factor from
    twice the limit on, a percentage below)."""
    value = _FORMATS[name].format(limit * (1.0 + excess))
    by = f"{1.0 + excess:,.0f}x" if excess >= 1.0 else f"{100 * excess:.0f}% over"
    return f"{what} is {value}, {by} constraints.{name} = {limit:g}"


def _headroom_message(limits: Constraints, result: PlanResult) -> str:
    usable = result.hbm_usable_bytes
    free = usable - result.memory_total_bytes
    required = float(required_free_bytes(limits.memory_headroom or 0.0, usable))
    return (f"leaves {free / _GIB:.1f} GiB of HBM free, constraints.memory_headroom = "
            f"{limits.memory_headroom!r} asks {required / _GIB:.1f} GiB: save memory "
            "(micro_batch, recompute, zero, more tp or pp) or lower the headroom")


def limit_messages(limits: Constraints, values: Mapping[str, float],
                   result: PlanResult) -> list[str]:
    """One line per limit of `limits` that the plan breaks (its constraint value > 0)."""
    messages = []
    for name, what in _LIMITS.items():
        excess = values.get(name, 0.0)
        if excess > 0:
            messages.append(_over(name, what, getattr(limits, name), excess))
    if values.get("memory_headroom", 0.0) > 0 and \
            values.get("hbm", 0.0) <= 0:  # over HBM: capacity_violations says so already
        messages.append(_headroom_message(limits, result))
    return messages


def with_spec_limits(spec: StudySpec, report: CostReport, result: PlanResult) -> PlanResult:
    """The result of a fixed spec's one plan under the spec's `constraints`: their values
    (<= 0 met), feasibility and violations."""
    scores = score(report, spec.objective, spec.constraints)
    values = {k: float(np.ravel(v)[0]) for k, v in scores.constraints.items()}
    return result.with_limits(values, limit_messages(spec.constraints, values, result))


def fixed_result(spec: StudySpec) -> PlanResult:
    """The one plan of a fixed spec, evaluated (`tuner evaluate`, POST /v1/evaluate); a
    SpecError names the first choice of a spec that is not fixed."""
    inputs = spec.to_cost_inputs()
    report = evaluate(*inputs, efficiency=spec.efficiency())
    return with_spec_limits(spec, report, plan_result(*inputs, report))
