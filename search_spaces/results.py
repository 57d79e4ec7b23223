"""One plan's evaluation in the user's names: the `tuner evaluate --json` object of SPEC.md."""

from __future__ import annotations

from typing import Any

import numpy as np

from cost import (
    OFFLOAD,
    RECOMPUTE,
    SYNC,
    ClusterSpec,
    CostReport,
    LayersModel,
    ModelSpec,
    Plan,
    TrainingSpec,
)
from cost import plan_violations as structural_violations

__all__ = ["cluster_as_dict", "plan_as_dict", "plan_result", "violations"]

_GIB = 2.0**30
_INT_FIELDS = ("tp", "pp", "dp", "cp", "virtual_stages", "micro_batch", "zero")


def _one(value: Any) -> float:
    return float(np.ravel(np.asarray(value, dtype=np.float64))[0])


def plan_as_dict(plan: Plan, *, gpus: float) -> dict[str, Any]:
    """tp, pp, dp (resolved), cp, virtual_stages, micro_batch, zero, parameter_servers as
    ints; recompute, offload and sync ("auto": the fastest collective) as their names;
    sequence_parallel as a bool."""
    a = plan.arrays(gpus)
    out: dict[str, Any] = {}
    for name in (*_INT_FIELDS[:-1], "recompute", "sequence_parallel", "zero", "offload", "sync",
                 "parameter_servers"):
        value = _one(a[name])
        if name == "sync":
            out[name] = "auto" if value < 0 else SYNC[int(value)]
        elif name == "recompute":
            out[name] = RECOMPUTE[int(value)]
        elif name == "offload":
            out[name] = OFFLOAD[int(value)]
        elif name == "sequence_parallel":
            out[name] = bool(value)
        else:
            out[name] = round(value) if value == round(value) else value
    return out


def cluster_as_dict(cluster: ClusterSpec) -> dict[str, Any]:
    """The cluster in SI units: GPU, node shape, link bandwidths, expansion, price."""
    return {
        "gpu": cluster.gpu.name,
        "nodes": int(_one(cluster.nodes)),
        "gpus_per_node": int(_one(cluster.gpus_per_node)),
        "gpus": int(_one(cluster.gpus)),
        "hbm_capacity_bytes": float(cluster.gpu.hbm_capacity_bytes),
        "scale_up_bandwidth_bytes_per_s": _one(cluster.scale_up_bandwidth_bytes_per_s),
        "scale_out_bandwidth_bytes_per_s": _one(cluster.scale_out_bandwidth_bytes_per_s),
        "expansion_capacity_bytes": _one(cluster.expansion_capacity_bytes),
        "expansion_bandwidth_bytes_per_s": _one(cluster.expansion_bandwidth_bytes_per_s),
        "pricing": cluster.pricing,
        "price_usd_per_gpu_hour": _one(cluster.price_usd_per_gpu_hour),
    }


def violations(
    model: ModelSpec | LayersModel, cluster: ClusterSpec, training: TrainingSpec, plan: Plan,
    report: CostReport,
) -> list[str]:
    """Structural violations, then what does not fit in HBM or in the expansion tier."""
    found = structural_violations(model, cluster, training, plan)
    memory = report.memory.as_dict()
    usable = _one(report.hbm_usable_bytes)
    if memory["total"] > usable:
        fix = ("lower micro_batch or raise pp" if isinstance(model, LayersModel)
               else "raise tp/pp, recompute or zero")
        found.append(f"needs {memory['total'] / _GIB:.1f} GiB per GPU, {usable / _GIB:.1f} GiB "
                     f"usable: {fix}")
    expansion = _one(report.expansion_capacity_bytes)
    if memory["expansion"] > expansion:
        found.append(f"offload needs {memory['expansion'] / _GIB:.1f} GiB of expansion memory "
                     f"per GPU, {expansion / _GIB:.1f} GiB available: set "
                     "cluster.expansion.capacity or offload: none")
    return found


def plan_result(
    model: ModelSpec | LayersModel, cluster: ClusterSpec, training: TrainingSpec, plan: Plan,
    report: CostReport,
) -> dict[str, Any]:
    """{"plan", "cluster", "feasible", "violations", "step_time_s", ...}: one plan's report as
    builtin types, in the names of shared/SPEC.md (`tuner evaluate --json`)."""
    numbers = report.result()
    return {
        "model": model.name,
        "workload": "layers" if isinstance(model, LayersModel) else "transformer",
        "plan": plan_as_dict(plan, gpus=_one(cluster.gpus)),
        "cluster": cluster_as_dict(cluster),
        "feasible": numbers.pop("feasible"),
        "violations": violations(model, cluster, training, plan, report),
        **numbers,
    }


