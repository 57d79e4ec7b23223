"""What a plan on pools of several GPU types asks of a framework beyond its degrees: which
nodes hold which part of it, the layers of each pipeline stage (uneven across pools), and
the per-replica batches of balanced shares.

Megatron-LM, NeMo and torchtitan launch one program on every node and give every
data-parallel rank the same batch; their pipelines split the layers evenly but for the first
and the last stage (Megatron-LM's --decoder-first-pipeline-num-layers and
--decoder-last-pipeline-num-layers, Megatron Core's TransformerConfig
num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage, torchtitan's
pipeline_parallel_first_stage_less_layers and pipeline_parallel_last_stage_less_layers);
Megatron Core's pipeline layout states any split (Megatron-LM and NeMo write it where the
middle stages differ, tuner.export.launch.LaunchPlan.layout). What a plan needs beyond that is
said in a note (tuner.export)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["EndSplit", "PoolPart", "end_split", "pool_notes", "pool_parts", "stage_layers"]


@dataclass(frozen=True)
class PoolPart:
    """One pool a plan uses: its name, GPU, nodes, role ("data" or "pipeline"), replicas,
    stages (and the first one's index), the layers of its fullest stage, micro-batches per
    replica and step, and the seconds one of its stages takes per layer and micro-batch."""

    name: str
    gpu: str
    nodes: int
    gpus_per_node: int
    role: str
    replicas: float
    stages: int
    first_stage: int
    layers: int
    micro_batches: float
    layer_s: float


def pool_parts(result: Any) -> tuple[PoolPart, ...]:
    """The pools a plan result uses (not the idle ones), in pipeline order: a PlanResult's
    `pools` beside its cluster's pool summaries, both in the cluster's order of pools (by
    position, not by name: pools need no name, and unnamed ones share the empty one)."""
    summaries: list[Mapping[str, Any]] = list(result.cluster.pools)
    if len(summaries) != len(result.pools):  # not one summary per use: match by name
        named = {p["name"]: p for p in summaries}
        summaries = [named.get(use["name"], {}) for use in result.pools]
    parts = []
    for use, summary in zip(result.pools, summaries, strict=True):
        if use["role"] == "idle":
            continue
        work = float(use["micro_batches"]) * max(float(use["layers"]), 1.0)
        parts.append(PoolPart(
            name=use["name"] or use["gpu"], gpu=use["gpu"], nodes=int(summary.get("nodes", 0)),
            gpus_per_node=int(summary.get("gpus_per_node", 0)), role=use["role"],
            replicas=float(use["replicas"]), stages=int(use["stages"]),
            first_stage=int(use["first_stage"]), layers=round(float(use["layers"])),
            micro_batches=float(use["micro_batches"]),
            layer_s=float(use["busy_s"]) / work if work > 0 else 0.0))
    return tuple(sorted(parts, key=lambda p: p.first_stage))


def stage_layers(parts: tuple[PoolPart, ...], layers: int) -> list[int] | None:
    """Transformer layers per pipeline stage of a pipeline across pools (None for whole
    replicas per pool): each pool's stages at the layers the model gave its fullest stage,
    then a layer taken from the stage that takes longest until the model's layers are
    placed (the slowest stage's time never grows: the model's step holds)."""
    if not parts or parts[0].role != "pipeline":
        return None
    split = [p.layers for p in parts for _ in range(p.stages)]
    per_layer = [p.layer_s for p in parts for _ in range(p.stages)]
    while sum(split) > layers:
        times = [n * t if n > 1 else -1.0 for n, t in zip(split, per_layer, strict=True)]
        longest = max(range(len(split)), key=lambda j: (times[j], j))
        split[longest] -= 1
    return split


@dataclass(frozen=True)
class EndSplit:
    """A split the frameworks can state: every stage at `middle` layers but the first and
    the last."""

    first: int
    middle: int
    last: int


def end_split(split: list[int]) -> EndSplit | None:
    """The split as first / middle / last counts, None where the middle stages differ (or
    fewer than three stages leave no middle: the first's and the last's own counts)."""
    if len(split) < 3:
        return EndSplit(first=split[0], middle=split[0], last=split[-1]) if split else None
    middle = split[1:-1]
    if len(set(middle)) != 1:
        return None
    return EndSplit(first=split[0], middle=middle[0], last=split[-1])


def pool_notes(parts: tuple[PoolPart, ...], framework: str, split: list[int] | None, *,
               batch: float | None = None) -> list[str]:
    """What the framework launches as written and what it cannot express: the nodes of each
    pool in rank order, node sizes that differ, per-replica batches that differ, an uneven
    split beyond the first and the last stage. `batch` is the step's micro-batches (global
    batch / micro_batch; default: what the pools' replicas do between them)."""
    notes = []
    start = 0
    for p in parts:
        last = p.first_stage + p.stages - 1
        what = ((f"stage {last}" if p.stages == 1 else f"stages {p.first_stage}-{last}")
                if p.role == "pipeline" else
                f"{p.replicas:g} whole replica{'' if p.replicas == 1 else 's'}")
        ranks = f"node rank {start}" if p.nodes == 1 else \
            f"node ranks {start}-{start + p.nodes - 1}"
        notes.append(f"pool {p.name}: {p.nodes} x {p.gpus_per_node} {p.gpu}, {ranks} "
                     f"({what}): list its nodes in this order")
        start += p.nodes
    if len({p.gpu for p in parts}) > 1:
        notes.append(f"GPUs of several types: {framework} runs the same program on each; "
                     "the model's numbers assume each pool's own speed")
    if parts and parts[0].role == "data" and parts[0].stages > 1:
        notes.append("a replica's pipeline stages must lie in one pool: order the ranks so "
                     "that each data-parallel replica's stages are neighbours")
    if len({p.gpus_per_node for p in parts}) > 1:
        notes.append("GPUs per node differ between pools: give each node its own "
                     "--nproc-per-node")
    done = sum(p.replicas * p.micro_batches for p in parts)
    batch = done if batch is None else batch
    dp = sum(p.replicas for p in parts)
    if parts and parts[0].role == "data" and (len({p.micro_batches for p in parts}) > 1
                                              or batch % dp != 0):
        # equal counts that do not divide the batch: `done - batch` replicas do one fewer
        shares = ", ".join(f"{p.name} {p.micro_batches:g}" for p in parts)
        fewer = (f" ({done - batch:g} of the {dp:g} replicas one fewer: {batch:g} in all)"
                 if done > batch else "")
        fix = "batch_shares: equal" if batch % dp == 0 else \
            f"batch_shares: equal and a dp that divides the batch's {batch:g} micro-batches " \
            f"(not {dp:g})"
        notes.append(f"balanced shares: micro-batches per replica and step {shares}{fewer}; "
                     f"{framework} gives every data-parallel rank the same batch (no option "
                     f"sets one per rank): plan with {fix} to launch as written")
    if split is not None and end_split(split) is None:
        notes.append(f"layers per stage {split}: {framework} splits evenly but for the first "
                     "and the last stage; set this split in the model's layer layout")
    return notes
