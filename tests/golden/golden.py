"""Evaluate one fixed spec mapping the way a user's `tuner evaluate --json` would."""

from __future__ import annotations

from typing import Any

import cost
from search_spaces import parse_spec


def evaluate_fixed(data: dict[str, Any]) -> dict[str, float]:
    """Step time, memory and their parts for a fixed spec mapping, as plain floats."""
    spec = parse_spec(data, name=str(data.get("name", "golden")))
    inputs = spec.to_cost_inputs()
    result = cost.plan_result(*inputs, cost.evaluate(*inputs, efficiency=spec.efficiency()))
    out = {"step_time_s": result.step_time_s}
    out.update({f"time.{k}": v for k, v in result.time_breakdown_s.items()})
    out.update({f"memory.{k}": v for k, v in result.memory_per_gpu_bytes.items()})
    return out
