"""Text and JSON views of one result and of the catalog; no formulas here."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from cost import GPUSpec, ModelSpec, PlanRecord, PlanResult, parameter_count

__all__ = ["catalog_json", "catalog_text", "cluster_line", "evaluation_text", "plan_line",
           "pool_rows", "to_json", "unit_label"]

_GIB = 2.0**30


def _finite(value: Any) -> Any:
    """inf/NaN -> None, recursively (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def to_json(value: Any) -> str:
    """Strict JSON (no Infinity/NaN), indented."""
    return json.dumps(_finite(value), indent=2, allow_nan=False)


def plan_line(plan: PlanRecord, *, pools: bool = False) -> str:
    """Every knob of a plan: 'tp=8 pp=8 dp=16 cp=1 ... sync=auto' (and placement and batch
    shares on pools)."""
    p = plan.as_dict()
    servers = f" parameter_servers={p['parameter_servers']}" \
        if p["sync"] == "parameter_server" else ""
    if pools:
        servers += f" placement={p['placement']} batch_shares={p['batch_shares']}"
    return (f"tp={p['tp']} pp={p['pp']} dp={p['dp']} cp={p['cp']} "
            f"virtual_stages={p['virtual_stages']} micro_batch={p['micro_batch']} "
            f"recompute={p['recompute']} "
            f"sequence_parallel={str(p['sequence_parallel']).lower()} "
            f"zero={p['zero']} offload={p['offload']} sync={p['sync']}{servers}")


def cluster_line(cluster: Mapping[str, Any]) -> str:
    """'128 x 8 a100-80gb (1024 GPUs, on_demand)', or each pool's nodes joined by '+'."""
    pools = cluster.get("pools") or ()
    if not pools:
        return (f"{cluster['nodes']} x {cluster['gpus_per_node']} {cluster['gpu']} "
                f"({cluster['gpus']} GPUs, {cluster['pricing']})")
    parts = [f"{p['nodes']} x {p['gpus_per_node']} {p['gpu']}"
             + (f" ({p['name']}, {p['pricing']}, ${p['price_usd_per_gpu_hour']:.2f}/GPU-h)"
                if p.get("name") else f" ({p['pricing']})")
             for p in pools if p["nodes"] > 0]
    return " + ".join(parts) + f" ({cluster['gpus']} GPUs)"


def _role(pool: Mapping[str, Any]) -> str:
    if pool["role"] == "data":
        plural = "s" if pool["replicas"] != 1 else ""
        return (f"data: {pool['replicas']:g} replica{plural} x {pool['micro_batches']:g} "
                f"micro-batches, {100 * pool['share']:.0f} % of the samples")
    if pool["role"] == "pipeline":
        first, stages = int(pool["first_stage"]), int(pool["stages"])
        which = f"stage {first}" if stages == 1 else f"stages {first}-{first + stages - 1}"
        return (f"pipeline: {which} (dp {pool['replicas']:g}), "
                f"up to {pool['layers']:g} layers a stage, {100 * pool['share']:.0f} % of the "
                "layers")
    return "idle"


def pool_rows(pools: Any, bottleneck: str) -> list[str]:
    """What each pool does: its role, the seconds its busiest GPU computes per step and its
    memory; and which one bounds the step."""
    if not pools:
        return []
    rows = [f"  pools             bottleneck: {bottleneck}"]
    width = max(len(_pool_name(p)) for p in pools)
    for p in pools:
        memory = (f"  {p['memory_bytes'] / _GIB:.1f} of {p['usable_bytes'] / _GIB:.1f} GiB"
                  if p["role"] != "idle" else "")
        busy = f"  busy {p['busy_s']:.3f} s" if p["role"] != "idle" else ""
        rows.append(f"    {_pool_name(p):<{width}} {p['gpus']:>6} GPUs  {_role(p)}{busy}{memory}")
    return rows


def _pool_name(pool: Mapping[str, Any]) -> str:
    return pool["gpu"] if pool["name"] in ("", pool["gpu"]) else f"{pool['name']} ({pool['gpu']})"


def _time_rows(result: PlanResult) -> list[str]:
    total = result.step_time_s
    rows = []
    for name, seconds in result.time_breakdown_s.items():
        share = 100.0 * seconds / total if total > 0 else 0.0
        mark = "  <- dominant" if name == result.dominant else ""
        rows.append(f"    {name:<12} {seconds:10.3f} s  {share:5.1f} %{mark}")
    return rows


def _memory_rows(result: PlanResult) -> list[str]:
    memory = result.memory_per_gpu_bytes
    rows = [f"    {name:<12} {value / _GIB:8.1f} GiB" for name, value in memory.items()
            if name not in ("total", "expansion")]
    usable = result.hbm_usable_bytes
    rows.append(f"    {'total':<12} {memory['total'] / _GIB:8.1f} GiB of {usable / _GIB:.1f} GiB "
                "usable HBM")
    if memory.get("expansion", 0.0) > 0:
        rows.append(f"    {'expansion':<12} {memory['expansion'] / _GIB:8.1f} GiB")
    return rows


def unit_label(result: PlanResult) -> str:
    """'samples/s' for a layers model, else 'tokens/s'."""
    return "samples/s" if result.workload == "layers" else "tokens/s"


def _headline_rows(result: PlanResult) -> list[str]:
    return [
        f"  step time         {result.step_time_s:.3f} s",
        f"  {unit_label(result):<18}{result.tokens_per_s:,.0f}",
        f"  MFU               {100.0 * result.mfu:.1f} %",
        f"  model TFLOP/s/GPU {result.model_flops_per_gpu / 1e12:.1f}",
    ]


def _price_rows(result: PlanResult, tokens: float) -> list[str]:
    rows = [f"  cost per hour     ${result.cost_per_hour_usd:,.2f}"]
    if tokens > 0:
        rows.append(f"  time to train     {result.time_to_train_days:,.1f} days "
                    f"({tokens:.3g} tokens)")
        rows.append(f"  cost to train     ${result.cost_to_train_usd:,.0f}")
    return rows


def evaluation_text(name: str, result: PlanResult, *, tokens: float) -> str:
    """A readable report of one evaluated plan (`tuner evaluate`)."""
    c = result.cluster
    status = "feasible" if result.feasible else "NOT feasible"
    lines = [
        f"{name}",
        f"  model             {result.model}",
        f"  cluster           {cluster_line(c.as_dict())}",
        f"  plan              {plan_line(result.plan, pools=bool(result.pools))}",
        *_headline_rows(result),
        *pool_rows(result.pools, result.bottleneck),
        "  time per step",
        *_time_rows(result),
        "  memory per GPU",
        *_memory_rows(result),
        f"  {status}",
        *[f"    - {v}" for v in result.violations],
        *_price_rows(result, tokens),
    ]
    return "\n".join(lines)


def _gpu_figures(gpu: GPUSpec) -> dict[str, Any]:
    return {
        "peak_flops_per_s": dict(gpu.peak_flops_per_s),
        "hbm_capacity_bytes": gpu.hbm_capacity_bytes,
        "hbm_bandwidth_bytes_per_s": gpu.hbm_bandwidth_bytes_per_s,
        "gpus_per_node": gpu.gpus_per_node,
        "scale_up_domain_gpus": gpu.scale_up_domain_gpus,
        "scale_up_bandwidth_bytes_per_s": gpu.scale_up_bandwidth_bytes_per_s,
        "scale_out_bandwidth_bytes_per_s": gpu.scale_out_bandwidth_bytes_per_s,
        "price_usd_per_hour": gpu.price_usd_per_hour,
        "spot_price_usd_per_hour": gpu.spot_price_usd_per_hour,
    }


def _model_figures(model: ModelSpec, source: str) -> dict[str, Any]:
    return {
        "parameters": parameter_count(model), "layers": model.layers, "hidden": model.hidden,
        "heads": model.heads, "kv_heads": model.kv_heads, "ffn_hidden": model.ffn_hidden,
        "vocab": model.vocab, "seq_len": model.seq_len, "gated_mlp": model.gated_mlp,
        "tied_embeddings": model.tied_embeddings, "source": source,
    }


def catalog_json(
    models: Mapping[str, ModelSpec], gpus: Mapping[str, GPUSpec],
    *, sources: Mapping[str, str], descriptions: Mapping[str, str],
) -> dict[str, Any]:
    """{"models": {name: figures}, "gpus": {name: figures}} in SI units."""
    return {
        "models": {n: _model_figures(m, sources.get(n, "")) for n, m in models.items()},
        "gpus": {n: {"description": descriptions.get(n, ""), **_gpu_figures(g)}
                 for n, g in gpus.items()},
    }


def catalog_text(models: Mapping[str, ModelSpec], gpus: Mapping[str, GPUSpec]) -> str:
    """Two tables: the models and the GPUs with their key figures."""
    lines = ["MODELS", f"  {'name':<15} {'params':>8} {'layers':>6} {'hidden':>6} {'heads':>5} "
             f"{'kv':>4} {'ffn':>6} {'vocab':>7} {'seq':>5}"]
    for name, m in models.items():
        lines.append(f"  {name:<15} {parameter_count(m) / 1e9:7.1f}B {m.layers:>6} "
                     f"{m.hidden:>6} {m.heads:>5} {m.kv_heads:>4} {m.ffn_hidden:>6} "
                     f"{m.vocab:>7} {m.seq_len:>5}")
    lines += ["", "GPUS", f"  {'name':<10} {'bf16 TF/s':>9} {'fp16 TF/s':>9} {'HBM GiB':>8} "
              f"{'HBM TB/s':>8} {'up GB/s':>8} {'out GB/s':>8} {'$/h':>6} {'spot $/h':>8}"]
    for name, g in gpus.items():
        lines.append(
            f"  {name:<10} {_or_dash(g.peak_for('bf16') / 1e12, 9, 1)} "
            f"{_or_dash(g.peak_for('fp16') / 1e12, 9, 1)} "
            f"{g.hbm_capacity_bytes / _GIB:8.1f} {g.hbm_bandwidth_bytes_per_s / 1e12:8.2f} "
            f"{g.scale_up_bandwidth_bytes_per_s / 1e9:8.1f} "
            f"{g.scale_out_bandwidth_bytes_per_s / 1e9:8.1f} {g.price_usd_per_hour:6.2f} "
            f"{_or_dash(g.spot_price_usd_per_hour or 0.0, 8, 2)}")
    return "\n".join(lines)


def _or_dash(value: float, width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if value > 0 else f"{'-':>{width}}"


