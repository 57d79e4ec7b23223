"""Text views of stored studies for `tuner studies` and `tuner best`; no formulas here."""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cost import ClusterSummary, PlanRecord
from search_spaces.wording import counted
from studies import TrialResult, complete_count, nearest_result, swept

if TYPE_CHECKING:
    import optuna

__all__ = ["best_cells", "best_columns", "best_text", "cluster_summary", "no_feasible_note",
           "no_feasible_text", "plan_summary", "studies_text"]

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
    optional: dict[str, Any] = {"cp": 1, "ep": 1, "etp": 1, "virtual_stages": 1, "zero": 0,
                                "shard_group": 0, "offload": "none", "sync": "auto",
                                "parameter_servers": 1, "placement": "data",
                                "batch_shares": "balanced"}
    parts += [f"{k}={p[k]}" for k, default in optional.items() if p[k] != default]
    parts.append(f"mb={p['micro_batch']}")
    parts.append(f"recompute={p['recompute']}")
    if p["sequence_parallel"]:
        parts.append("sp")
    return " ".join(parts)


def _tier(cluster: Any) -> str:
    """' +512 GiB at 32 GB/s' for a memory expansion tier (its capacity and bandwidth per GPU),
    '' without one; `cluster` a ClusterSummary's or a pool's mapping."""
    get = cluster.get if isinstance(cluster, dict) else \
        (lambda key, default=None: getattr(cluster, key, default))
    capacity = float(get("expansion_capacity_bytes", 0.0) or 0.0)
    bandwidth = float(get("expansion_bandwidth_bytes_per_s", 0.0) or 0.0)
    return f" +{capacity / 2**30:,.0f} GiB at {bandwidth / 1e9:g} GB/s" if capacity > 0 else ""


def _nic(cluster: Any) -> str:
    """' NIC 50 GB/s': the scale-out bandwidth per GPU, one direction (a ClusterSummary's or
    a pool's mapping)."""
    get = cluster.get if isinstance(cluster, dict) else \
        (lambda key, default=None: getattr(cluster, key, default))
    return f" NIC {float(get('scale_out_bandwidth_bytes_per_s', 0.0)) / 1e9:g} GB/s"


def cluster_summary(cluster: ClusterSummary, *, network: bool = False) -> str:
    """'128x8 a100-80gb' (and ' spot' on spot servers, ' +512 GiB at 32 GB/s' with a memory
    expansion tier, ' NIC 50 GB/s' with `network`: where the rows shown differ in it); pools
    joined by '+' (with `network`, and the link between them)."""
    if cluster.pools:
        return "+".join(f"{p['nodes']}x{p['gpus_per_node']} {p['gpu']}"
                        + (" spot" if p["pricing"] == "spot" else "")
                        + _tier(dict(p)) + (_nic(dict(p)) if network else "")
                        for p in cluster.pools if p["nodes"] > 0) + \
            (_link(cluster) if network else "")
    return (f"{cluster.nodes}x{cluster.gpus_per_node} {cluster.gpu}"
            + (" spot" if cluster.pricing == "spot" else "")
            + _tier(cluster) + (_nic(cluster) if network else ""))


def _link(cluster: ClusterSummary) -> str:
    """' link 50 GB/s': the bandwidth between pools per GPU, where more than one has nodes
    ('' in a result stored before it was recorded)."""
    if sum(1 for p in cluster.pools if p["nodes"] > 0) < 2 or \
            not cluster.inter_pool_bandwidth_bytes_per_s:
        return ""
    return f" link {cluster.inter_pool_bandwidth_bytes_per_s / 1e9:g} GB/s"


def _networks(cluster: ClusterSummary) -> tuple[float, ...]:
    """The scale-out bandwidth of the cluster, or of each pool with nodes and the link
    between them."""
    if cluster.pools:
        nics = [float(p["scale_out_bandwidth_bytes_per_s"]) for p in cluster.pools
                if p["nodes"] > 0]
        return (*nics, cluster.inter_pool_bandwidth_bytes_per_s)
    return (float(cluster.scale_out_bandwidth_bytes_per_s),)


def _networks_differ(results: Sequence[TrialResult]) -> bool:
    """The rows' networks differ (a network chosen by the search, or GPU types whose usual
    NICs differ): the cluster column then names each NIC's bandwidth, without which two rows
    could read the same."""
    return len({_networks(r.result.cluster) for r in results}) > 1


def _with_equivalents(result: TrialResult) -> str:
    """The plan, and what the first equivalent plan changes: '... (or recompute=selective;
    2 more equivalent)'."""
    text = plan_summary(result.result.plan)
    if not result.equivalents:
        return text
    mine = result.result.plan.as_dict()
    theirs = result.equivalents[0].as_dict()
    change = " ".join(f"{k}={v}" for k, v in theirs.items() if mine.get(k) != v)
    more = len(result.equivalents) - 1
    return f"{text} (or {change or 'the same plan'}" + (f"; {more} more equivalent)"
                                                        if more else ")")


_BEST_COLUMNS: list[tuple[str, Callable[[TrialResult], str]]] = [
    ("plan", _with_equivalents),
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


def _on_spot(r: TrialResult) -> bool:
    """The plan runs on spot servers (all of them, or those of some of its pools)."""
    cluster = r.result.cluster
    return cluster.pricing == "spot" or any(p.get("pricing") == "spot" and p.get("nodes")
                                            for p in cluster.pools)


def _spot_cell(r: TrialResult) -> str:
    if not _on_spot(r):
        return "-"
    return "+" + _number(100.0 * r.result.revocation_overhead, ".1f")


def best_columns(results: Sequence[TrialResult]
                 ) -> list[tuple[str, Callable[[TrialResult], str]]]:
    """The columns of `tuner best`; with spot servers among the plans, "spot +%" (the
    expected overhead of revocations, restarts and checkpoints, in time and money alike)
    beside tokens/s; where the plans' networks differ, each cluster's NIC bandwidth."""
    columns = list(_BEST_COLUMNS)
    if _networks_differ(results):
        columns[1] = ("cluster", lambda r: cluster_summary(r.result.cluster, network=True))
    if any(_on_spot(r) for r in results):
        at = [name for name, _ in columns].index("tokens/s") + 1
        columns.insert(at, ("spot +%", _spot_cell))
    return columns


def best_cells(results: Sequence[TrialResult]) -> tuple[list[str], list[list[str]]]:
    """The header and one row of formatted cells per plan: plan, cluster, trial, step time,
    tokens/s (and the spot overhead), MFU, memory, price, days and USD to train (as
    `tuner best` shows them)."""
    columns = best_columns(results)
    return [c for c, _ in columns], [[cell(r) for _, cell in columns] for r in results]


def best_text(name: str, results: Sequence[TrialResult], *, pareto: bool,
              nearest: TrialResult | None = None, swept: bool = False,
              completed: int | None = None) -> str:
    """One row per best plan (or per plan of the Pareto front); with none, no_feasible_text
    of the `nearest` miss."""
    if not results:
        return no_feasible_text(name, nearest, swept=swept, completed=completed)
    title = (f"{name}: Pareto front, {counted(len(results), 'plan')}" if pareto
             else f"{name}: best plans")
    header, rows = best_cells(results)
    return "\n".join([title, *_table(header, rows)])


def no_feasible_text(name: str, nearest: TrialResult | None, *, swept: bool,
                     completed: int | None = None) -> str:
    """What to say when no stored plan of study `name` is feasible: the plan nearest to
    feasible (studies.nearest_result), what it lacks and how to see its costs. `swept`: an
    exhaustive sweep saw every plan, so more trials would not help. `completed` 0: no trial
    has run to its end, so nothing is known of the constraints yet."""
    if completed == 0 and nearest is None and not swept:
        return (f"{name}: no trial has completed yet; run them: `tuner resume "
                f"{shlex.quote(name)}` (or `tuner worker {shlex.quote(name)}` beside others)")
    verdict = f"{name}: no feasible plan" + ("" if swept else " yet")
    if nearest is None:
        return f"{verdict}; {'' if swept else 'run more trials or '}relax the constraints"
    lacks = "; ".join(nearest.result.violations) or "a constraint is exceeded"
    return (f"{verdict}; the nearest, trial {nearest.trial} "
            f"({plan_summary(nearest.result.plan)}): {lacks}. "
            f"`tuner explain {shlex.quote(name)} --trial {nearest.trial}` shows its costs")


def no_feasible_note(study: optuna.Study) -> str:
    """no_feasible_text of a study read from its storage: its nearest miss and whether an
    exhaustive sweep saw every plan (the HTML report's notes)."""
    return no_feasible_text(study.study_name, nearest_result(study),
                            swept=swept(study) is not None, completed=complete_count(study))


def _values_text(values: Sequence[float] | None) -> str:
    if not values:
        return "-"
    return " / ".join(_number(v, ",.0f" if abs(v or 0) >= 1000 else ".4g") for v in values)


def studies_text(summaries: Sequence[Mapping[str, Any]], *, storage: str) -> str:
    """One row per study: objectives, trials done (complete: pruned and failed trials do not
    count towards the target) of the target, states, best value(s)."""
    if not summaries:
        return f"no studies in {storage}; `tuner search SPEC` makes one"
    header = ["name", "objectives", "done/target", "complete", "pruned", "fail", "running",
              "best"]
    rows = [[str(s["name"]),
             ",".join(s.get("objectives") or s.get("directions") or []),
             f"{s['complete']:,}/{s['target_trials']:,}",
             *(f"{s[k]:,}" for k in ("complete", "pruned", "fail", "running")),
             _values_text(s.get("best_values"))] for s in summaries]
    return "\n".join([f"studies in {storage}", *_table(header, rows)])
