"""One plan's result, typed: built once from a CostReport, read by search, storage, views and
`--json` alike. `as_dict` gives the `tuner evaluate --json` object of shared/SPEC.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from .breakdown import CostReport, pick
from .codec import PlanRecord
from .inputs import ClusterSpec, Plan, TrainingSpec
from .validity import plan_violations
from .workload import Workload

__all__ = ["ClusterSummary", "PlanResult", "capacity_violations", "plan_result"]

_GIB = 2.0**30


def _one(value: Any) -> float:
    return float(np.ravel(np.asarray(value, dtype=np.float64))[0])


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSummary:
    """The cluster of a result, in SI units."""

    gpu: str
    nodes: int
    gpus_per_node: int
    gpus: int
    hbm_capacity_bytes: float
    scale_up_bandwidth_bytes_per_s: float
    scale_out_bandwidth_bytes_per_s: float
    expansion_capacity_bytes: float
    expansion_bandwidth_bytes_per_s: float
    pricing: str
    price_usd_per_gpu_hour: float

    @classmethod
    def of(cls, cluster: ClusterSpec) -> ClusterSummary:
        return cls(
            gpu=cluster.gpu.name, nodes=int(_one(cluster.nodes)),
            gpus_per_node=int(_one(cluster.gpus_per_node)), gpus=int(_one(cluster.gpus)),
            hbm_capacity_bytes=float(cluster.gpu.hbm_capacity_bytes),
            scale_up_bandwidth_bytes_per_s=_one(cluster.scale_up_bandwidth_bytes_per_s),
            scale_out_bandwidth_bytes_per_s=_one(cluster.scale_out_bandwidth_bytes_per_s),
            expansion_capacity_bytes=_one(cluster.expansion_capacity_bytes),
            expansion_bandwidth_bytes_per_s=_one(cluster.expansion_bandwidth_bytes_per_s),
            pricing=cluster.pricing, price_usd_per_gpu_hour=_one(cluster.price_usd_per_gpu_hour))

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanResult:
    """One plan's answer: what it is, whether it runs, and its time, memory and price."""

    model: str
    workload: str
    plan: PlanRecord
    cluster: ClusterSummary
    feasible: bool
    violations: tuple[str, ...]
    step_time_s: float
    tokens_per_s: float
    model_flops_per_gpu: float
    mfu: float
    mfu_palm: float
    memory_per_gpu_bytes: Mapping[str, float]  # weights, gradients, ..., expansion, total
    hbm_usable_bytes: float
    time_breakdown_s: Mapping[str, float]  # compute, recompute, tp_comm, ...
    cost_per_hour_usd: float
    time_to_train_days: float
    cost_to_train_usd: float
    revocation_overhead: float
    checkpoint_interval_s: float
    constraints: Mapping[str, float] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)  # stored keys this record lacks

    @property
    def dominant(self) -> str:
        """The largest term of the step time."""
        parts = self.time_breakdown_s
        return max(parts, key=lambda k: parts[k])

    @property
    def memory_total_bytes(self) -> float:
        return float(self.memory_per_gpu_bytes["total"])

    def with_limits(self, constraints: Mapping[str, float], messages: list[str]) -> PlanResult:
        """The result under a spec's limits: their values (<= 0 met) and what each broken one
        adds to the violations."""
        met = all(v <= 0 for v in constraints.values())
        return replace(self, constraints=dict(constraints), feasible=self.feasible and met,
                       violations=(*self.violations, *messages))

    def as_dict(self) -> dict[str, Any]:
        """The `tuner evaluate --json` object (shared/SPEC.md), builtin types only."""
        out: dict[str, Any] = {
            "model": self.model, "workload": self.workload, "plan": self.plan.as_dict(),
            "cluster": self.cluster.as_dict(), "feasible": self.feasible,
            "violations": list(self.violations), "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s, "model_flops_per_gpu": self.model_flops_per_gpu,
            "mfu": self.mfu, "mfu_palm": self.mfu_palm,
            "memory_per_gpu_bytes": dict(self.memory_per_gpu_bytes),
            "hbm_usable_bytes": self.hbm_usable_bytes,
            "time_breakdown_s": dict(self.time_breakdown_s), "dominant": self.dominant,
            "cost_per_hour_usd": self.cost_per_hour_usd,
            "time_to_train_days": self.time_to_train_days,
            "cost_to_train_usd": self.cost_to_train_usd,
            "revocation_overhead": self.revocation_overhead,
            "checkpoint_interval_s": self.checkpoint_interval_s,
        }
        if self.constraints:
            out["constraints"] = dict(self.constraints)
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanResult:
        """A stored `as_dict` object back (earlier studies' too: keys it lacks take neutral
        values, keys it does not know are kept in `extra`)."""
        known = {f.name for f in fields(cls)} | {"dominant"}
        values: dict[str, Any] = {f.name: data[f.name] for f in fields(cls)
                                  if f.name in data and f.name not in ("plan", "cluster")}
        values["plan"] = PlanRecord.from_dict(data.get("plan", {}))
        values["cluster"] = ClusterSummary(**{**_EMPTY_CLUSTER, **data.get("cluster", {})})
        values["violations"] = tuple(data.get("violations", ()))
        for name, default in _DEFAULTS.items():
            values.setdefault(name, default)
        values["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**values)


_EMPTY_CLUSTER: dict[str, Any] = {
    "gpu": "", "nodes": 0, "gpus_per_node": 0, "gpus": 0, "hbm_capacity_bytes": 0.0,
    "scale_up_bandwidth_bytes_per_s": 0.0, "scale_out_bandwidth_bytes_per_s": 0.0,
    "expansion_capacity_bytes": 0.0, "expansion_bandwidth_bytes_per_s": 0.0,
    "pricing": "on_demand", "price_usd_per_gpu_hour": 0.0}
_DEFAULTS: dict[str, Any] = {
    "model": "", "workload": "transformer", "feasible": False, "step_time_s": float("nan"),
    "tokens_per_s": float("nan"), "model_flops_per_gpu": float("nan"), "mfu": float("nan"),
    "mfu_palm": float("nan"),
    "memory_per_gpu_bytes": {"total": float("nan")}, "hbm_usable_bytes": float("nan"),
    "time_breakdown_s": {"compute": float("nan")}, "cost_per_hour_usd": float("nan"),
    "time_to_train_days": float("nan"), "cost_to_train_usd": float("nan"),
    "revocation_overhead": 0.0, "checkpoint_interval_s": float("nan")}


def capacity_violations(workload: Workload, report: CostReport, index: Any = ()) -> list[str]:
    """What of one plan does not fit in HBM or in the expansion tier, and what to change."""
    memory = report.memory.as_dict(index)
    usable = pick(report.hbm_usable_bytes, index)
    found = []
    if memory["total"] > usable:
        found.append(f"needs {memory['total'] / _GIB:.1f} GiB per GPU, {usable / _GIB:.1f} GiB "
                     f"usable: {workload.memory_fix()}")
    expansion = pick(report.expansion_capacity_bytes, index)
    if memory["expansion"] > expansion:
        found.append(f"offload needs {memory['expansion'] / _GIB:.1f} GiB of expansion memory "
                     f"per GPU, {expansion / _GIB:.1f} GiB available: set "
                     "cluster.expansion.capacity or offload: none")
    return found


def plan_result(workload: Workload, cluster: ClusterSpec, training: TrainingSpec, plan: Plan,
                report: CostReport, index: Any = ()) -> PlanResult:
    """The PlanResult of plan `index` of an evaluated array (a scalar plan: index ())."""
    one = plan if index == () else Plan(**{
        f.name: float(np.broadcast_to(getattr(plan, f.name), np.shape(report.valid))[index])
        for f in fields(plan)})
    price = report.price.as_dict(index)
    return PlanResult(
        model=workload.name, workload=workload.kind,
        plan=PlanRecord.of(one, gpus=_one(cluster.gpus)), cluster=ClusterSummary.of(cluster),
        feasible=bool(np.broadcast_to(report.feasible, np.shape(report.valid))[index]),
        violations=(*plan_violations(workload, cluster, training, one),
                    *capacity_violations(workload, report, index)),
        step_time_s=pick(report.step_time_s, index), tokens_per_s=pick(report.tokens_per_s, index),
        model_flops_per_gpu=pick(report.model_flops_per_gpu, index),
        mfu=pick(report.mfu, index), mfu_palm=pick(report.mfu_palm, index),
        memory_per_gpu_bytes=report.memory.as_dict(index),
        hbm_usable_bytes=pick(report.hbm_usable_bytes, index),
        time_breakdown_s=report.step.as_dict(index),
        cost_per_hour_usd=price["cost_per_hour_usd"],
        time_to_train_days=price["time_to_train_days"],
        cost_to_train_usd=price["cost_to_train_usd"],
        revocation_overhead=price["revocation_overhead"],
        checkpoint_interval_s=price["checkpoint_interval_s"])
