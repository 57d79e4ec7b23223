"""One plan's result, typed: built once from a CostReport, read by search, storage, views and
`--json` alike. `as_dict` gives the `tuner evaluate --json` object of shared/SPEC.md."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .breakdown import CostReport, pick
from .codec import PlanRecord
from .inputs import ClusterSpec, Plan, TrainingSpec
from .memory_advice import memory_advice, memory_levers
from .validity import plan_violations
from .workload import Workload

if TYPE_CHECKING:
    # pools of several GPU types; a cluster that is not a ClusterSpec is one. Imported where
    # pools are met, so that a cluster of one type never imports cost.pools (issue 14)
    from .pools import MixedCluster

__all__ = ["ClusterSummary", "PlanResult", "capacity_violations", "plan_result", "step_share"]

_GIB = 2.0**30


def step_share(part: float, total: float) -> float:
    """A term's share of a step of `total` seconds; a step without end (inf: offload with no
    tier to offload to) is all its endless term's."""
    if math.isinf(total):
        return 1.0 if math.isinf(part) else 0.0
    return part / total if total > 0 else 0.0


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
    pools: tuple[Mapping[str, Any], ...] = ()  # GPUs of several types: each pool's summary
    inter_pool_bandwidth_bytes_per_s: float = 0.0  # pools only: the link between pools, per GPU

    @classmethod
    def of(cls, cluster: ClusterSpec | MixedCluster) -> ClusterSummary:
        if not isinstance(cluster, ClusterSpec):
            return cls._of_pools(cluster)
        return cls(
            gpu=cluster.gpu.name, nodes=int(_one(cluster.nodes)),
            gpus_per_node=int(_one(cluster.gpus_per_node)), gpus=int(_one(cluster.gpus)),
            hbm_capacity_bytes=float(cluster.gpu.hbm_capacity_bytes),
            scale_up_bandwidth_bytes_per_s=_one(cluster.scale_up_bandwidth_bytes_per_s),
            scale_out_bandwidth_bytes_per_s=_one(cluster.scale_out_bandwidth_bytes_per_s),
            expansion_capacity_bytes=_one(cluster.expansion_capacity_bytes),
            expansion_bandwidth_bytes_per_s=_one(cluster.expansion_bandwidth_bytes_per_s),
            pricing=cluster.pricing, price_usd_per_gpu_hour=_one(cluster.price_usd_per_gpu_hour))

    @classmethod
    def _of_pools(cls, cluster: MixedCluster) -> ClusterSummary:
        """The pools together (GPUs, nodes, the mean price per GPU-hour, the least HBM and
        bandwidths, pricing 'mixed' where pools differ), and each pool's own summary."""
        from .pools import price_cluster

        active = [i for i in cluster.active()] or [0]
        each = [cls.of(cluster.pools[i]) for i in range(len(cluster.pools))]
        pricing = {each[i].pricing for i in active}
        summary = price_cluster(cluster)
        pools = tuple({"name": cluster.names[i], **each[i].as_dict()}
                      for i in range(len(cluster.pools)))
        return cls(
            gpu="+".join(each[i].gpu for i in active), nodes=sum(each[i].nodes for i in active),
            gpus_per_node=min(each[i].gpus_per_node for i in active),
            gpus=int(cluster.all_gpus),
            hbm_capacity_bytes=min(each[i].hbm_capacity_bytes for i in active),
            scale_up_bandwidth_bytes_per_s=min(each[i].scale_up_bandwidth_bytes_per_s
                                               for i in active),
            scale_out_bandwidth_bytes_per_s=min(each[i].scale_out_bandwidth_bytes_per_s
                                                for i in active),
            expansion_capacity_bytes=min(each[i].expansion_capacity_bytes for i in active),
            expansion_bandwidth_bytes_per_s=min(each[i].expansion_bandwidth_bytes_per_s
                                                for i in active),
            pricing=pricing.pop() if len(pricing) == 1 else "mixed",
            price_usd_per_gpu_hour=_one(summary.price_usd_per_gpu_hour), pools=pools,
            inter_pool_bandwidth_bytes_per_s=_one(cluster.inter_pool_bandwidth_bytes_per_s))

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["pools"] = [dict(p) for p in self.pools]
        if not self.pools:
            del out["pools"], out["inter_pool_bandwidth_bytes_per_s"]
        return out


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
    pools: tuple[Mapping[str, Any], ...] = ()  # GPUs of several types: what each pool does
    bottleneck: str = ""  # the pool (or "parameter servers") that bounds the step
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
        if self.pools:
            out["pools"] = [dict(p) for p in self.pools]
            out["bottleneck"] = self.bottleneck
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanResult:
        """A stored `as_dict` object back (earlier studies' too: keys it lacks take neutral
        values, keys it does not know are kept in `extra`)."""
        known = {f.name for f in fields(cls)} | {"dominant"}
        values: dict[str, Any] = {f.name: data[f.name] for f in fields(cls)
                                  if f.name in data and f.name not in ("plan", "cluster")}
        values["plan"] = PlanRecord.from_dict(data.get("plan", {}))
        values["violations"] = tuple(data.get("violations", ()))
        values["pools"] = tuple(data.get("pools", ()))
        cluster = dict(data.get("cluster", {}))
        cluster["pools"] = tuple(cluster.get("pools", ()))
        values["cluster"] = ClusterSummary(**{**_EMPTY_CLUSTER, **cluster})
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


def capacity_violations(workload: Workload, cluster: ClusterSpec | MixedCluster,
                        training: TrainingSpec, plan: Plan, report: CostReport, index: Any = ()
                        ) -> list[str]:
    """What of one plan (`plan`, scalar: plan `index` of the evaluated `report`) does not fit
    in HBM or in the expansion tier, and what to change (for HBM: what of this plan can still
    move on this cluster, cost.memory_advice)."""
    memory = report.memory.as_dict(index)
    usable = pick(report.hbm_usable_bytes, index)
    expansion = pick(report.expansion_capacity_bytes, index)
    found = []
    if memory["total"] > usable:
        levers = memory_levers(workload, cluster, training, plan, expansion_bytes=expansion)
        found.append(f"needs {memory['total'] / _GIB:.1f} GiB per GPU, {usable / _GIB:.1f} GiB "
                     f"usable: {memory_advice(levers)}")
    if memory["expansion"] > expansion:
        found.append(f"offload needs {memory['expansion'] / _GIB:.1f} GiB of expansion memory "
                     f"per GPU, {expansion / _GIB:.1f} GiB available: set "
                     "cluster.expansion.capacity or offload: none")
    return found


def _used_dp(pools: tuple[dict[str, Any], ...], dp: int) -> int:
    """The data-parallel degree of the way a plan runs on pools: the replicas of the pools
    holding whole replicas, or each stage's replicas of a pipeline across pools."""
    data = [p["replicas"] for p in pools if p["role"] == "data"]
    piped = [p["replicas"] for p in pools if p["role"] == "pipeline"]
    if data:
        return round(sum(data))
    return round(piped[0]) if piped else dp


def pool_uses(cluster: MixedCluster, report: CostReport, index: Any = ()
              ) -> tuple[tuple[dict[str, Any], ...], str]:
    """What each pool does in plan `index` of an evaluated array, and which one bounds its
    step ('parameter servers' where the servers do)."""
    from .pools import ROLES, SERVERS

    out = []
    for i, use in enumerate(report.pools):
        one = {f.name: pick(getattr(use, f.name), index) for f in fields(use)}
        role = ROLES[int(one.pop("role"))]
        out.append({"name": cluster.names[i], "gpu": cluster.pools[i].gpu.name,
                    "gpus": int(_one(cluster.pools[i].gpus)), "role": role, **one})
    b = int(pick(report.bottleneck, index)) if report.bottleneck is not None else 0
    return tuple(out), "parameter servers" if b == SERVERS else cluster.label(b)


def plan_result(workload: Workload, cluster: ClusterSpec | MixedCluster,
                training: TrainingSpec, plan: Plan, report: CostReport, index: Any = ()
                ) -> PlanResult:
    """The PlanResult of plan `index` of an evaluated array (a scalar plan: index ())."""
    one = plan if index == () else Plan(**{
        f.name: float(np.broadcast_to(getattr(plan, f.name), np.shape(report.valid))[index])
        for f in fields(plan)})
    price = report.price.as_dict(index)
    record = PlanRecord.of(one, gpus=_one(cluster.gpus))
    pools: tuple[dict[str, Any], ...] = ()
    bottleneck = ""
    if not isinstance(cluster, ClusterSpec):
        pools, bottleneck = pool_uses(cluster, report, index)
        record = replace(record, dp=_used_dp(pools, record.dp))
    return PlanResult(
        model=workload.name, workload=workload.kind,
        plan=record, cluster=ClusterSummary.of(cluster),
        feasible=bool(np.broadcast_to(report.feasible, np.shape(report.valid))[index]),
        violations=(*plan_violations(workload, cluster, training, one),
                    *capacity_violations(workload, cluster, training, one, report, index)),
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
        checkpoint_interval_s=price["checkpoint_interval_s"], pools=pools,
        bottleneck=bottleneck)
