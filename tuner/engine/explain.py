"""`tuner explain SPEC`: why one fixed plan takes the time it does, and what would change it.

The step time is split into the terms of the cost model, with the compute of the layers split
further into the part bounded by FLOP/s and the part spent streaming HBM (what the same plan
saves on a GPU with unlimited HBM bandwidth). What-ifs re-run the cost model on a changed
cluster: twice the scale-out (NIC) bandwidth, twice the HBM bandwidth, and 50% more HBM, where
the best plan of the plan's neighbourhood (every micro-batch, recompute, sequence parallelism,
ZeRO stage, interleaving and tp x pp layout that fills the same cluster) is compared with the
best of the same neighbourhood on today's HBM, so that the difference is due to memory alone.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from cost import (
    DEFAULT_EFFICIENCY,
    ClusterSpec,
    Efficiency,
    MixedCluster,
    Plan,
    PlanRecord,
    PlanResult,
    evaluate,
    plan_result,
    step_share,
)
from search_spaces import Space, StudySpec

from .evaluation import best_plan
from .limits import with_spec_limits

__all__ = ["TERM_LABELS", "explain", "neighbourhood", "time_terms"]

_UNLIMITED = 1e30
_HBM_GROWTH = 1.5
_MAX_TP = 64
_MAX_MICRO_BATCH = 256
_VIRTUAL_STAGES = (1, 2, 3, 4, 6, 8)

TERM_LABELS = {
    "compute": "compute (FLOP-bound, recompute included)",
    "memory_bound": "memory-bound work (HBM streaming)",
    "tp_comm": "tensor-parallel traffic",
    "cp_comm": "context-parallel traffic",
    "pp_comm": "pipeline sends",
    "pp_bubble": "pipeline bubble",
    "dp_comm": "data-parallel traffic (exposed)",
    "optimizer": "optimizer step",
    "offload": "offload traffic",
    "ep_comm": "expert-parallel all-to-alls (exposed)",
}
"""The terms of an explained step time, largest first in the output."""


AnyCluster = ClusterSpec | MixedCluster


def _with_gpu(cluster: AnyCluster, **changes: Any) -> Any:
    """The cluster with every GPU changed (each pool's on a cluster of several types)."""
    if isinstance(cluster, MixedCluster):
        return replace(cluster, pools=tuple(_with_gpu(c, **changes) for c in cluster.pools))
    return cluster.with_(gpu=replace(cluster.gpu, **changes))


def _with_links(cluster: AnyCluster, factor: float) -> Any:
    """The cluster with `factor` x the scale-out bandwidth (of every pool, and between
    pools)."""
    if isinstance(cluster, MixedCluster):
        return replace(cluster, pools=tuple(_with_links(c, factor) for c in cluster.pools),
                       inter_pool_bandwidth_bytes_per_s=factor
                       * cluster.inter_pool_bandwidth_bytes_per_s)
    out = float(np.ravel(np.asarray(cluster.scale_out_bandwidth_bytes_per_s))[0])
    return cluster.with_(scale_out_bandwidth_bytes_per_s=factor * out)


def _first(cluster: AnyCluster) -> ClusterSpec:
    return cluster.pools[cluster.used[0]] if isinstance(cluster, MixedCluster) else cluster


def _step_s(inputs: tuple[Any, AnyCluster, Any, Plan], efficiency: Efficiency) -> float:
    model, cluster, training, plan = inputs
    return float(evaluate(model, cluster, training, plan, efficiency=efficiency).step_time_s)


def time_terms(model: Any, cluster: AnyCluster, training: Any, plan: Plan,
               *, efficiency: Efficiency = DEFAULT_EFFICIENCY) -> list[dict[str, Any]]:
    """The step time's terms, largest first: {"term", "label", "seconds", "share"}. Compute and
    recompute are split into the FLOP-bound part (their time with unlimited HBM bandwidth) and
    the memory-bound rest; every other term is the cost model's own."""
    step = evaluate(model, cluster, training, plan, efficiency=efficiency).step.as_dict()
    fast = _with_gpu(cluster, hbm_bandwidth_bytes_per_s=_UNLIMITED)
    unbound = evaluate(model, fast, training, plan, efficiency=efficiency).step.as_dict()
    busy = step.pop("compute") + step.pop("recompute")
    flop_bound = min(unbound["compute"] + unbound["recompute"], busy)
    seconds = {"compute": flop_bound, "memory_bound": busy - flop_bound, **step}
    total = sum(seconds.values())
    terms = [{"term": k, "label": TERM_LABELS.get(k, k), "seconds": v,
              "share": step_share(v, total)} for k, v in seconds.items()]
    return sorted(terms, key=lambda t: -t["seconds"])


def _memory(result: PlanResult) -> dict[str, Any]:
    """How much of the usable HBM the plan fills, and the headroom (negative: over)."""
    total = result.memory_total_bytes
    usable = result.hbm_usable_bytes
    return {"total_bytes": total, "usable_bytes": usable, "fits": total <= usable,
            "used_share": total / usable if usable > 0 else float("inf"),
            "headroom_bytes": usable - total, "breakdown": dict(result.memory_per_gpu_bytes)}


def _price(result: PlanResult, tokens: float) -> dict[str, Any]:
    """What the plan costs: per hour, and the time and money to train `tokens` with the
    expected spot overhead (revocations, restarts, checkpoints) in both."""
    keys = ("workload", "cost_per_hour_usd", "time_to_train_days", "cost_to_train_usd",
            "revocation_overhead", "checkpoint_interval_s")
    return {"tokens": tokens, **{k: getattr(result, k) for k in keys}}


def _powers_of_two(limit: int) -> list[int]:
    return [2**i for i in range(limit.bit_length()) if 2**i <= limit]


def neighbourhood(spec: StudySpec, plan: PlanRecord, *, gpus: int, global_batch: int
                  ) -> Space:
    """The plan's neighbourhood as a search space: every micro-batch (powers of two),
    recompute, sequence parallelism, ZeRO stage, interleaving and tp x pp (x ep, for a
    mixture of experts) layout, with dp filling the same cluster; cp, etp, offload and sync
    stay the plan's. Objective: throughput."""
    choices = {
        "ep": sorted({*_powers_of_two(gpus), plan.ep}),
        "tp": sorted({*_powers_of_two(min(gpus, _MAX_TP)), plan.tp}),
        "pp": sorted({*range(1, min(gpus, 128) + 1), plan.pp}),
        "dp": None,
        "virtual_stages": sorted({*_VIRTUAL_STAGES, plan.virtual_stages}),
        "micro_batch": sorted({*_powers_of_two(min(global_batch, _MAX_MICRO_BATCH)),
                               plan.micro_batch}),
        "recompute": ["none", "selective", "full"],
        "sequence_parallel": [False, True],
        "zero": [0, 1, 2, 3],
    }
    section = type(spec.plan).model_validate({**spec.plan.model_dump(), **choices})
    wide = spec.model_copy(update={"plan": section, "objective": ("throughput",)})
    return Space.from_spec(wide)


def _best_neighbour(space: Space, cluster: ClusterSpec) -> dict[str, Any] | None:
    """The fastest plan of the space on `cluster` that fits: plan, step time, memory."""
    candidate = best_plan(space, cluster, {})
    if candidate is None or not candidate.feasible:
        return None
    report = evaluate(space.model, cluster, space.training, candidate.plan,
                      efficiency=space.efficiency)
    return {"plan": PlanRecord.of(candidate.plan, gpus=float(cluster.gpus)).as_dict(),
            "step_time_s": float(report.step_time_s),
            "memory_total_bytes": float(report.memory.total_bytes),
            "hbm_usable_bytes": float(report.hbm_usable_bytes),
            "plans_evaluated": candidate.evaluated,
            "plans_feasible": candidate.feasible_plans,
            # as `tuner search --json` names them (shared/SPEC.md); the two above kept
            "evaluated": candidate.evaluated,
            "feasible_plans": candidate.feasible_plans}


def _change(before: float, after: float) -> float:
    """Relative change of a step time (negative: faster); none between two steps without end."""
    if math.isinf(before) and math.isinf(after):
        return 0.0
    return after / before - 1.0 if before > 0 else 0.0


def _pool_figures(cluster: AnyCluster) -> dict[str, Any]:
    """On a cluster of several GPU types, what each what-if doubles, per pool in use (SI):
    {"pools": [{"name", "scale_out_bytes_per_s", "hbm_bandwidth_bytes_per_s"}, ...],
    "inter_pool_bytes_per_s"}; {} on one GPU type."""
    if not isinstance(cluster, MixedCluster):
        return {}
    pools = [{"name": cluster.names[i] or cluster.pools[i].gpu.name,
              "scale_out_bytes_per_s": float(np.ravel(np.asarray(
                  cluster.pools[i].scale_out_bandwidth_bytes_per_s))[0]),
              "hbm_bandwidth_bytes_per_s": float(cluster.pools[i].gpu.hbm_bandwidth_bytes_per_s)}
             for i in cluster.used]
    return {"pools": pools,
            "inter_pool_bytes_per_s": float(cluster.inter_pool_bandwidth_bytes_per_s)}


def _bandwidth_what_ifs(inputs: tuple[Any, AnyCluster, Any, Plan], step_s: float,
                        efficiency: Efficiency) -> dict[str, Any]:
    """2x the scale-out bandwidth (of every pool and between pools), 2x the HBM bandwidth
    (of every GPU). `from_bytes_per_s`/`to_bytes_per_s` are the first used pool's; on a
    cluster of several GPU types, `pools` (and `inter_pool_from_bytes_per_s` for the
    scale-out) give each used pool's, which is what the text shows."""
    model, cluster, training, plan = inputs
    first = _first(cluster)
    out_bw = float(np.ravel(np.asarray(first.scale_out_bandwidth_bytes_per_s))[0])
    hbm_bw = first.gpu.hbm_bandwidth_bytes_per_s
    wider = _with_links(cluster, 2.0)
    faster = (replace(cluster, pools=tuple(
        _with_gpu(c, hbm_bandwidth_bytes_per_s=2.0 * c.gpu.hbm_bandwidth_bytes_per_s)
        for c in cluster.pools)) if isinstance(cluster, MixedCluster)
        else _with_gpu(cluster, hbm_bandwidth_bytes_per_s=2.0 * hbm_bw))
    out_s = _step_s((model, wider, training, plan), efficiency)
    hbm_s = _step_s((model, faster, training, plan), efficiency)
    return {
        "scale_out_bandwidth_x2": {"from_bytes_per_s": out_bw, "to_bytes_per_s": 2 * out_bw,
                                   "step_time_s": out_s, "change": _change(step_s, out_s),
                                   **_doubled(cluster, "scale_out_bytes_per_s")},
        "hbm_bandwidth_x2": {"from_bytes_per_s": hbm_bw, "to_bytes_per_s": 2 * hbm_bw,
                             "step_time_s": hbm_s, "change": _change(step_s, hbm_s),
                             **_doubled(cluster, "hbm_bandwidth_bytes_per_s")},
    }


def _doubled(cluster: AnyCluster, key: str) -> dict[str, Any]:
    """On a cluster of several GPU types, `pools`: each used pool's figure `key` before and
    after doubling (and, for the scale-out, the link between pools); {} on one GPU type."""
    each = _pool_figures(cluster)
    if not each:
        return {}
    pools = [{"name": p["name"], "from_bytes_per_s": p[key], "to_bytes_per_s": 2 * p[key]}
             for p in each["pools"]]
    between = ({"inter_pool_from_bytes_per_s": each["inter_pool_bytes_per_s"],
                "inter_pool_to_bytes_per_s": 2 * each["inter_pool_bytes_per_s"]}
               if key == "scale_out_bytes_per_s" else {})
    return {"pools": pools, **between}


def _capacity_what_if(space: Space, cluster: ClusterSpec) -> dict[str, Any]:
    """The best neighbour with today's HBM and with 50% more (same bandwidth, same price)."""
    capacity = cluster.gpu.hbm_capacity_bytes
    today = _best_neighbour(space, cluster)
    larger = _best_neighbour(space, _with_gpu(cluster, hbm_capacity_bytes=_HBM_GROWTH * capacity))
    change = None
    if today is not None and larger is not None:
        change = _change(today["step_time_s"], larger["step_time_s"])
    return {"from_bytes": capacity, "to_bytes": _HBM_GROWTH * capacity,
            "best_today": today, "best_larger": larger, "change": change}


def _calibration(spec: StudySpec, efficiency: Efficiency) -> dict[str, Any] | None:
    """The spec's calibration profile and what it sets that the defaults do not (with the
    spec's stack over both): {"profile": PATH, "sets": {FIELD: {"value", "default"}}}, the
    per-GPU fields (`gemm_fraction_by_gpu`) as their GPUs' entries; None without a profile."""
    path = spec.calibration_path()
    if path is None:
        return None
    default = spec.stack.apply(DEFAULT_EFFICIENCY).as_dict()
    sets: dict[str, Any] = {}
    for key, value in efficiency.as_dict().items():
        if value != default[key]:
            sets[key] = {"value": value, "default": default[key]}
    return {"profile": str(path), "sets": sets}


def explain(spec: StudySpec) -> dict[str, Any]:
    """Everything `tuner explain` shows, as builtin types (SI units, shares as fractions)."""
    inputs = spec.to_cost_inputs()
    _, cluster, training, _ = inputs
    efficiency = spec.efficiency()  # the spec's calibration profile, else the defaults
    report = evaluate(*inputs, efficiency=efficiency)
    result = with_spec_limits(spec, report, plan_result(*inputs, report))
    terms = time_terms(*inputs, efficiency=efficiency)
    capacity = None
    if not isinstance(cluster, MixedCluster):
        space = neighbourhood(spec, result.plan, gpus=result.cluster.gpus,
                              global_batch=training.global_batch)
        capacity = _capacity_what_if(space, cluster)
    return {  # evaluate's fields (cost.PlanResult.as_dict, same names), then explain's own
        "spec": spec.name, **result.as_dict(),
        "dominant": terms[0]["term"], "terms": terms, "memory": _memory(result),
        "calibration": _calibration(spec, efficiency),
        **_price(result, training.tokens),
        "what_if": {**_bandwidth_what_ifs(inputs, result.step_time_s, efficiency),
                    "hbm_capacity_x1_5": capacity},
        **({"pools": [dict(p) for p in result.pools], "bottleneck": result.bottleneck}
           if result.pools else {}),
    }
