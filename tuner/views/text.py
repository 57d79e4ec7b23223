"""Text and JSON views of one result and of the catalog; no formulas here."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from cost import GPUSpec, ModelSpec, PlanRecord, PlanResult, step_share
from search_spaces.wording import counted

__all__ = ["catalog_json", "catalog_text", "cluster_line", "evaluation_text", "plan_line",
           "pool_rows", "price_rows", "seconds_text", "spot_text", "to_json", "unit_label",
           "usd"]

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
    experts = f" ep={p['ep']} etp={p['etp']}" if (p["ep"], p["etp"]) != (1, 1) else ""
    return (f"tp={p['tp']} pp={p['pp']} dp={p['dp']} cp={p['cp']}{experts} "
            f"virtual_stages={p['virtual_stages']} micro_batch={p['micro_batch']} "
            f"recompute={p['recompute']} "
            f"sequence_parallel={str(p['sequence_parallel']).lower()} "
            f"zero={p['zero']} offload={p['offload']} sync={p['sync']}{servers}")


def _tier(cluster: Mapping[str, Any]) -> str:
    """', 512 GiB expansion at 32 GB/s per GPU' for a memory expansion tier, '' without."""
    capacity = float(cluster.get("expansion_capacity_bytes") or 0.0)
    if capacity <= 0:
        return ""
    bandwidth = float(cluster.get("expansion_bandwidth_bytes_per_s") or 0.0)
    return f", {capacity / 2**30:,.0f} GiB expansion at {bandwidth / 1e9:g} GB/s per GPU"


def _nic(cluster: Mapping[str, Any]) -> str:
    """', NIC 50 GB/s per GPU': the scale-out bandwidth the plan was priced and timed with
    (co-design plans that differ only in their network read apart); '' where not given."""
    bandwidth = float(cluster.get("scale_out_bandwidth_bytes_per_s") or 0.0)
    return f", NIC {bandwidth / 1e9:g} GB/s per GPU" if bandwidth > 0 else ""


def _pool_terms(pool: Mapping[str, Any]) -> str:
    """'owned, on_demand, $1.20/GPU-h, NIC 25 GB/s per GPU' (the name and price where the pool
    is named)."""
    named = (f"{pool['name']}, {pool['pricing']}, ${pool['price_usd_per_gpu_hour']:.2f}/GPU-h"
             if pool.get("name") else pool["pricing"])
    return f"{named}{_nic(pool)}{_tier(pool)}"


def cluster_line(cluster: Mapping[str, Any]) -> str:
    """'128 x 8 a100-80gb (1024 GPUs, on_demand, NIC 25 GB/s per GPU)' (with a memory
    expansion tier's capacity and bandwidth), or each pool's nodes joined by '+' and the
    link between the pools where more than one has nodes."""
    pools = cluster.get("pools") or ()
    if not pools:
        return (f"{cluster['nodes']} x {cluster['gpus_per_node']} {cluster['gpu']} "
                f"({counted(cluster['gpus'], 'GPU')}, {cluster['pricing']}{_nic(cluster)}"
                f"{_tier(cluster)})")
    parts = [f"{p['nodes']} x {p['gpus_per_node']} {p['gpu']} ({_pool_terms(p)})"
             for p in pools if p["nodes"] > 0]
    link = float(cluster.get("inter_pool_bandwidth_bytes_per_s") or 0.0)
    between = f", {link / 1e9:g} GB/s per GPU between pools" if link > 0 and len(parts) > 1 \
        else ""
    return " + ".join(parts) + f" ({counted(cluster['gpus'], 'GPU')}{between})"


def _replicas(pool: Mapping[str, Any]) -> str:
    """'13 replicas x 20 micro-batches', or where some do one fewer (balanced shares that do
    not divide the batch) '9 replicas x 20 + 4 x 19 micro-batches'."""
    count = pool["micro_batches"]
    fewer = pool.get("fewer", 0.0)  # results stored before it was kept have none
    whole = pool["replicas"] - fewer
    text = f"{whole:g} replica{'s' if whole != 1 else ''} x {count:g}"
    return text + (f" + {fewer:g} x {count - 1:g}" if fewer > 0 else "") + " micro-batches"


def _role(pool: Mapping[str, Any]) -> str:
    if pool["role"] == "data":
        return f"data: {_replicas(pool)}, {100 * pool['share']:.0f} % of the samples"
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


_NEVER = "never"
"""A time without end: a plan that offloads with no expansion tier to offload to (inf)."""


def seconds_text(value: float, width: int = 0) -> str:
    """'12.345 s', or 'never' where the time has no end (inf)."""
    if math.isfinite(value):
        return f"{value:{width}.3f} s"
    return f"{_NEVER:>{width + 2}}" if width else _NEVER


def _time_rows(result: PlanResult) -> list[str]:
    total = result.step_time_s
    rows = []
    for name, seconds in result.time_breakdown_s.items():
        if name == "ep_comm" and result.workload != "moe":
            continue  # expert all-to-alls: a mixture of experts only
        share = 100.0 * step_share(seconds, total)
        mark = "  <- dominant" if name == result.dominant else ""
        rows.append(f"    {name:<12} {seconds_text(seconds, 10)}  {share:5.1f} %{mark}")
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
        f"  step time         {seconds_text(result.step_time_s)}",
        f"  {unit_label(result):<18}{result.tokens_per_s:,.0f}",
        f"  MFU               {100.0 * result.mfu:.1f} %",
        f"  model TFLOP/s/GPU {result.model_flops_per_gpu / 1e12:.1f}",
    ]


def usd(value: float, digits: int = 0) -> str:
    """'$1,234' (with `digits` decimals), or 'no price' for a GPU without one (NaN)."""
    return f"${value:,.{digits}f}" if math.isfinite(value) else "no price"


def spot_text(result: PlanResult) -> str:
    """What spot servers add to the run (wall time and money alike) and the rate the run
    then keeps up: '+4.1 % (revocations, restarts, checkpoints every 1.2 h): 168,400 tokens/s
    over the run'; '' on demand."""
    if result.cluster.pricing != "spot":
        return ""
    overhead = result.revocation_overhead
    if not overhead > 0:
        return "+0.0 % (revocations_per_node_hour is 0: spot servers priced as never revoked)"
    rate = result.tokens_per_s / (1.0 + overhead)
    return (f"+{100.0 * overhead:.1f} % (revocations, restarts, checkpoints every "
            f"{duration(result.checkpoint_interval_s)}): {rate:,.0f} {unit_label(result)} over "
            "the run")


def duration(seconds: float) -> str:
    """'45 s', '12 min', '3.5 h' or '2.1 days'."""
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:.2g} {unit}" if seconds < 10 * size \
                else f"{seconds / size:,.0f} {unit}"
    return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"


def price_rows(result: PlanResult, tokens: float, *, indent: str = "  ") -> list[str]:
    """Cost per hour, time and cost to train `tokens`, and the spot overhead in them."""
    rows = [f"{indent}cost per hour     {usd(result.cost_per_hour_usd, 2)}"]
    if tokens > 0:
        days = result.time_to_train_days
        took = f"{days:,.1f} days" if math.isfinite(days) else _NEVER  # a step without end
        cost = "without bound" if math.isinf(result.cost_to_train_usd) else usd(
            result.cost_to_train_usd)
        rows.append(f"{indent}time to train     {took} "
                    f"({tokens:.3g} {'samples' if result.workload == 'layers' else 'tokens'})")
        rows.append(f"{indent}cost to train     {cost}")
    if spot_text(result):
        rows.append(f"{indent}spot overhead     {spot_text(result)}")
    if not math.isfinite(result.cost_per_hour_usd):
        rows.append(f"{indent}                  (GPU {result.cluster.gpu} has no price: give "
                    "cluster.gpu.price_per_hour or cluster.price_per_node_hour)")
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
        *price_rows(result, tokens),
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
    experts = {k: getattr(model, k) for k in ("experts", "top_k", "expert_ffn_hidden",
                                              "shared_experts", "dense_layers")
               if hasattr(model, k)}
    return {
        "parameters": model.parameters(), "active_parameters": model.active_parameters(),
        **experts, "layers": model.layers, "hidden": model.hidden,
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
             f"{'kv':>4} {'ffn':>6} {'vocab':>7} {'seq':>5}  {'experts':>7} {'active':>8}"]
    for name, m in models.items():
        lines.append(f"  {name:<15} {m.parameters() / 1e9:7.1f}B {m.layers:>6} "
                     f"{m.hidden:>6} {m.heads:>5} {m.kv_heads:>4} {m.ffn_hidden:>6} "
                     f"{m.vocab:>7} {m.seq_len:>5}  {_experts(m):>7} "
                     f"{m.active_parameters() / 1e9:7.1f}B")
    width = max([10, *map(len, gpus)])
    lines += ["", "GPUS", f"  {'name':<{width}} {'bf16 TF/s':>9} {'fp16 TF/s':>9} "
              f"{'HBM GiB':>8} {'HBM TB/s':>8} {'up GB/s':>8} {'out GB/s':>8} {'$/h':>6} "
              f"{'spot $/h':>8}"]
    for name, g in gpus.items():
        lines.append(
            f"  {name:<{width}} {_or_dash(g.peak_for('bf16') / 1e12, 9, 1)} "
            f"{_or_dash(g.peak_for('fp16') / 1e12, 9, 1)} "
            f"{g.hbm_capacity_bytes / _GIB:8.1f} {g.hbm_bandwidth_bytes_per_s / 1e12:8.2f} "
            f"{g.scale_up_bandwidth_bytes_per_s / 1e9:8.1f} "
            f"{g.scale_out_bandwidth_bytes_per_s / 1e9:8.1f} "
            f"{_or_dash(g.price_usd_per_hour, 6, 2)} "
            f"{_or_dash(g.spot_price_usd_per_hour or 0.0, 8, 2)}")
    return "\n".join(lines)


def _experts(model: ModelSpec) -> str:
    """'256/8' (routed experts / per token) for a mixture of experts, '-' for a dense model."""
    figures = _model_figures(model, "")
    return f"{figures['experts']}/{figures['top_k']}" if "experts" in figures else "-"


def _or_dash(value: float, width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if value > 0 else f"{'-':>{width}}"


