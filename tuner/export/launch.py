"""What every framework format needs of a chosen plan: the model's shape, the plan's degrees
(any degree field a plan record has: tp, pp, cp, and ep, etp where present), the cluster's
size, the batch, the precision and the software features the model assumed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cost import PlanRecord, PlanResult, Recompute
from cost.collectives import members_in_domain
from cost.deepep import deepep_refusal
from cost.moe_time import overlap_refusal
from cost.transformer import ModelSpec, embedding_and_loss_split

from ..engine.trial_spec import ChosenPlan
from ..errors import TunerError
from .pools import PoolPart, end_split, pool_parts, stage_layers

__all__ = ["DEGREES", "LaunchPlan", "deepep_notes", "ep_overlap_notes", "launch_plan",
           "layout_of", "pipeline_layout"]

DEGREES = ("tp", "pp", "cp", "ep", "etp")
"""Parallel degrees a framework sets explicitly, in this order (dp follows from the GPUs);
a degree the plan record lacks is left out (tuner.export.launch.LaunchPlan.degrees)."""


_CORE_FP8_RECIPES = {"delayed": "delayed", "current": "tensorwise", "mxfp8": "mxfp8",
                     "blockwise": "blockwise"}


@dataclass(frozen=True)
class LaunchPlan:
    """A transformer plan (dense or a mixture of experts) ready to be written as a
    framework's settings."""

    title: str  # "study NAME, trial N: <plan> on <cluster>, step X s predicted"
    model: ModelSpec
    plan: PlanRecord
    result: PlanResult
    nodes: int
    gpus_per_node: int
    global_batch: int
    precision: str
    tp_overlap: bool  # the model hid sequence-parallel traffic (Transformer Engine overlap)
    dp_overlap: bool  # the model overlapped data-parallel traffic with the passes
    ep_dedup: bool = True  # a token crosses to a remote domain once (DeepEP, HybridEP)
    ep_overlap: bool = False  # the stack overlaps the expert all-to-alls with another batch
    ep_overlap_schedule: str = "megatron"  # which schedule pairs them (stack)
    fp8_recipe: str = "delayed"  # how fp8 GEMM inputs are scaled (stack.fp8_recipe)
    pools: tuple[PoolPart, ...] = ()  # GPUs of several types: the pools the plan uses
    stage_split: list[int] | None = None  # layers per stage of a pipeline across pools
    gpu_name: str = ""  # the GPU the dispatch runs on (the oldest of the pools')
    compute_capability: float | None = None  # its CUDA compute capability, if stated
    scale_up_domain: int = 8  # GPUs of its NVLink domain

    @property
    def deepep_blocked(self) -> str | None:
        """Why DeepEP cannot dispatch this plan's tokens on its GPU (cost.deepep: SM80 inside
        an NVLink domain, SM90 across domains), where the stack assumed it (ep_dedup); else
        None. The expert-parallel group's ranks are etp apart: it spans domains where fewer
        than ep of them fit in one (cost.collectives.members_in_domain)."""
        if not self.ep_dedup or self.model.kind != "moe":
            return None
        ep, etp = int(getattr(self.plan, "ep", 1)), int(getattr(self.plan, "etp", 1))
        spans = float(members_in_domain(self.scale_up_domain, stride=etp, size=ep)) < ep
        return deepep_refusal(self.compute_capability, gpu=self.gpu_name, spans=spans)

    @property
    def deepep(self) -> bool:
        """Whether the launch dispatches through DeepEP (the flex dispatcher): the stack
        assumed it, it runs on this GPU for this plan, and the tokens leave the rank: Megatron
        Core's flex dispatcher asserts etp x ep > 1 ('Flex token dispatcher requires TPxEP >
        1', core_v0.15.0 megatron/core/transformer/moe/token_dispatcher.py, its tp the expert
        tensor-parallel group), so ep = etp = 1 dispatches with the all-to-all, a no-op there."""
        ranks = int(getattr(self.plan, "ep", 1)) * int(getattr(self.plan, "etp", 1))
        return self.ep_dedup and self.deepep_blocked is None and ranks > 1

    @property
    def core_fp8_recipe(self) -> str:
        """The fp8 recipe as Megatron Core names it (TransformerConfig.fp8_recipe, core_v0.15.0:
        tensorwise, delayed, mxfp8, blockwise), which Megatron-LM's --fp8-recipe and NeMo's
        MegatronMixedPrecision.fp8_recipe both pass on: the model's current (per-tensor)
        scaling is Core's "tensorwise"; an unknown recipe is Core's default, "delayed"."""
        return _CORE_FP8_RECIPES.get(self.fp8_recipe, "delayed")

    @property
    def ep_overlap_blocked(self) -> str | None:
        """Why Megatron Core cannot run the expert all-to-all overlap the stack asked for
        (cost.moe_time.overlap_refusal, the rules the cost model applies; a virtual pipeline
        of 1, or a layout of one chunk a stage, is none), or None where it can (or the stack
        asked for none)."""
        if not self.ep_overlap or self.model.kind != "moe":
            return None
        pp, vs = int(self.plan.pp), int(self.plan.virtual_stages)
        if self.layout is not None:
            vs = (self.layout.count("|") + 1) // pp
        return overlap_refusal(ep=int(getattr(self.plan, "ep", 1)), pp=pp, virtual_stages=vs,
                               recompute=list(Recompute).index(self.plan.recompute),
                               mtp_layers=int(getattr(self.model, "mtp_layers", 0)))

    @property
    def gpus(self) -> int:
        """GPUs the plan runs on."""
        if self.pools:
            return sum(p.nodes * p.gpus_per_node for p in self.pools)
        return self.nodes * self.gpus_per_node

    @property
    def degrees(self) -> dict[str, int]:
        """Each degree of DEGREES the plan record has (1 when it is not parallel)."""
        return {d: int(getattr(self.plan, d)) for d in DEGREES if hasattr(self.plan, d)}

    @property
    def split_ends(self) -> bool:
        """True when the pipeline counts the embedding and the loss as a layer each (an even
        split; a pipeline across pools states its own, stage_split)."""
        if self.stage_split is not None:
            return False
        return bool(embedding_and_loss_split(self.model.layers, float(self.plan.pp),
                                             float(self.plan.virtual_stages)))

    @property
    def layout(self) -> str | None:
        """Megatron Core's pipeline layout (pipeline_layout) where the chunks divide neither
        the layers nor the layers plus the embedding and the loss (a mixture of experts'
        layout, cost.moe_layout), or where a pipeline across pools is uneven in its middle
        stages, which no first- and last-stage count states (stage_split); else None."""
        p = self.plan
        split = self.stage_split
        if split is not None and p.pp > 1 and p.virtual_stages == 1 \
                and end_split(split) is None:
            return layout_of(split, mtp=int(getattr(self.model, "mtp_layers", 0)))
        if p.pp <= 1 or split is not None or self.split_ends \
                or self.model.layers % (p.pp * p.virtual_stages) == 0:
            return None
        return pipeline_layout(self.model.layers, p.pp, p.virtual_stages,
                               mtp=int(getattr(self.model, "mtp_layers", 0)))

    @property
    def layers_per_chunk(self) -> int | None:
        """Transformer layers per virtual stage (None when the stages are not even)."""
        chunks = self.plan.pp * self.plan.virtual_stages
        if self.split_ends or self.stage_split is not None or self.model.layers % chunks:
            return None
        return self.model.layers // chunks

    @property
    def batch_micro_batches(self) -> float:
        """Micro-batches of the step, every replica's together (global batch / micro_batch)."""
        return self.global_batch / max(self.plan.micro_batch, 1)

    @property
    def batch_per_replica(self) -> int:
        """Sequences per step on one data-parallel replica."""
        return self.global_batch // max(self.plan.dp, 1)


def ep_overlap_notes(lp: LaunchPlan) -> list[str]:
    """A note where the stack asked for the expert all-to-all overlap but Megatron Core cannot
    run it for this plan (LaunchPlan.ep_overlap_blocked): the flag is left out. Under
    Megatron-Core's schedule the model hid nothing either; under another (DualPipe) it did,
    and the framework's step will be slower than predicted."""
    why = lp.ep_overlap_blocked
    if why is None:
        return []
    if lp.ep_overlap_schedule == "megatron":
        effect = "the predicted step time counts the all-to-alls as exposed too"
    else:
        effect = (f"the predicted step time hid the all-to-alls ({lp.ep_overlap_schedule}'s "
                  "schedule), so expect it slower")
    return [f"the expert all-to-all overlap (stack.ep_overlap) is not set: Megatron Core "
            f"refuses it for this plan ({why}); {effect}"]


def deepep_notes(lp: LaunchPlan) -> list[str]:
    """A note where the stack assumed DeepEP but it cannot run this plan on its GPU
    (LaunchPlan.deepep_blocked): NCCL's all-to-all is written instead, as the cost model
    counted there (no deduplication off SM90; cost.moe_time.dispatch_bytes)."""
    why = lp.deepep_blocked
    if why is None:
        return []
    return [f"token dispatch: {why} (DeepEP v1.2.1 README, Requirements), so NCCL's "
            "all-to-all is set instead of DeepEP; the predicted step time counted no "
            "deduplication there"]


def pipeline_layout(layers: int, pp: int, vs: int, *, mtp: int = 0) -> str:
    """Megatron Core's pipeline layout string (Megatron-LM --pipeline-model-parallel-layout,
    TransformerConfig.pipeline_model_parallel_layout; core_v0.15.0
    megatron/core/transformer/pipeline_parallel_layer_layout.py): pp · vs chunks separated by
    "|", in the order of the virtual stage then the rank, "E" the embedding, "t" a transformer
    layer ("t*4": four), "m" a multi-token-prediction module and "L" the loss. Megatron-LM
    refuses a pipeline whose chunks do not divide the layers without it (arguments.py: 'Number
    of layers should be divisible by the pipeline-model-parallel size'). The layers are spread
    evenly, the earlier chunks taking one more where they do not divide, so the fullest chunk
    holds ceil(layers / chunks) and the last one, with the loss, the fewest (DeepSeek-V3's 61
    layers on 2 stages: "Et*31|t*30mL")."""
    chunks = pp * vs
    base, extra = divmod(layers, chunks)
    return layout_of([base + (1 if c < extra else 0) for c in range(chunks)], mtp=mtp)


def layout_of(chunk_layers: list[int], *, mtp: int = 0) -> str:
    """The layout string (pipeline_layout) of chunks of these transformer layers in order:
    the embedding in the first, the multi-token-prediction modules and the loss in the last
    (a pipeline across pools at the layers the model gave each pool's stages: "Et*34|t*34|t*6|
    t*6L")."""
    last = len(chunk_layers) - 1

    def chunk(c: int, n: int) -> str:
        body = "" if n == 0 else "t" if n == 1 else f"t*{n}"
        return ("E" if c == 0 else "") + body + ("m" * mtp + "L" if c == last else "")

    return "|".join(chunk(c, n) for c, n in enumerate(chunk_layers))


def launch_plan(chosen: ChosenPlan) -> LaunchPlan:
    """The launch view of a chosen plan; TunerError for a model no framework format takes."""
    spec = chosen.spec
    model = spec.model.to_model_spec()
    if model.kind not in ("transformer", "moe"):
        raise TunerError(f"{model.name} is a layers model; the Megatron-LM, NeMo and "
                         "torchtitan formats are for transformers: use --as spec")
    cluster = chosen.result.cluster
    efficiency = spec.efficiency()
    plan = chosen.result.plan
    parts = pool_parts(chosen.result) if chosen.result.pools else ()
    nodes = sum(p.nodes for p in parts) if parts else cluster.nodes
    per_node = parts[0].gpus_per_node if parts else cluster.gpus_per_node
    where = (" + ".join(f"{p.nodes} x {p.gpus_per_node} {p.gpu}" for p in parts) if parts
             else f"{cluster.nodes} x {cluster.gpus_per_node} {cluster.gpu}")
    title = (f"{spec.name.rsplit('-trial-', 1)[0]}, trial {chosen.trial}: {where}, "
             f"step {chosen.result.step_time_s:.3f} s predicted")
    return LaunchPlan(
        title=title, model=model,  # type: ignore[arg-type]
        plan=plan, result=chosen.result, nodes=nodes,
        gpus_per_node=per_node, global_batch=spec.training.global_batch,
        precision=spec.training.precision,
        tp_overlap=efficiency.tp_overlap > 0 and plan.sequence_parallel and plan.tp > 1,
        dp_overlap=efficiency.dp_overlap > 0 and plan.dp > 1,
        ep_dedup=efficiency.ep_dedup, ep_overlap=efficiency.ep_overlap > 0,
        ep_overlap_schedule=efficiency.ep_overlap_schedule,
        fp8_recipe=efficiency.fp8_recipe, pools=parts,
        stage_split=stage_layers(parts, int(getattr(model, "layers", 0))),
        **_dispatch_gpu(chosen, parts))


def _dispatch_gpu(chosen: ChosenPlan, parts: tuple[PoolPart, ...]) -> dict[str, Any]:
    """The GPU DeepEP would run on (LaunchPlan.deepep_blocked): the cluster's, or of the pools
    the plan uses the one of the lowest compute capability (its NVLink domain the smallest)."""
    _, cluster, _, _ = chosen.spec.to_cost_inputs(check=False)
    names = {p.gpu for p in parts}
    used = [c for c in getattr(cluster, "pools", [cluster])
            if not names or c.gpu.name in names]
    if not used:
        return {}
    oldest = min(used, key=lambda c: c.gpu.compute_capability or 99.0)
    return {"gpu_name": oldest.gpu.name, "compute_capability": oldest.gpu.compute_capability,
            "scale_up_domain": int(min(float(np.min(c.scale_up_domain_gpus)) for c in used))}
