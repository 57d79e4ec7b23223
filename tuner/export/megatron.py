"""Megatron-LM command-line flags (`pretrain_gpt.py` under torchrun).

Option names from Megatron-LM's megatron/training/arguments.py at core_v0.15.0
(https://github.com/NVIDIA/Megatron-LM/blob/core_v0.15.0/megatron/training/arguments.py,
commit 0d7e02bd26d3eb347ad8d1bef625002babfa6df7); torchrun's --nnodes and --nproc-per-node
from https://docs.pytorch.org/docs/stable/elastic/run.html. ZeRO 1 is Megatron's distributed
optimizer; ZeRO 2 and 3 its FSDP (--use-megatron-fsdp with --data-parallel-sharding-strategy
optim_grads or optim_grads_params). dp is not a flag: Megatron fills the GPUs. A pipeline
across pools of several GPU types states its uneven split with
--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers where the middle
stages are even (tuner.export.pools), else with --pipeline-model-parallel-layout
(tuner.export.launch.layout_of); so does a mixture of experts whose pipeline chunks divide
neither its layers nor its layers plus two (tuner.export.launch.pipeline_layout)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, cast

from search_spaces.wording import counted

from .core_model import core_model, layer_pattern
from .launch import LaunchPlan, deepep_notes, ep_overlap_notes
from .megatron_model import architecture
from .pools import end_split, pool_notes

if TYPE_CHECKING:
    from cost.moe import MoEModelSpec

__all__ = ["DEGREE_FLAGS", "environment", "flags", "layer_pattern", "render"]

DEGREE_FLAGS = {"tp": "--tensor-model-parallel-size", "pp": "--pipeline-model-parallel-size",
                "cp": "--context-parallel-size", "ep": "--expert-model-parallel-size",
                "etp": "--expert-tensor-parallel-size"}
_SHARDING = {2: "optim_grads", 3: "optim_grads_params"}
_PRECISION = {"bf16": ["--bf16"], "fp16": ["--fp16"], "fp8": ["--bf16"], "fp32": []}
_FP8_FORMATS = {"mxfp8": "e4m3", "blockwise": "e4m3"}
"""--fp8-format by Megatron Core's fp8 recipe (LaunchPlan.core_fp8_recipe; arguments.py choices
e4m3/hybrid): the block-scaled recipes in E4M3 throughout, as Transformer Engine's
MXFP8BlockScaling and Float8BlockScaling default to (and Megatron-LM's own MXFP8 example
writes); per-tensor scaling with E4M3 forward and E5M2 gradients, hybrid, otherwise."""


def _model(lp: LaunchPlan, notes: list[str]) -> list[str]:
    """The model's shape, its architecture (tuner.export.megatron_model), latent attention
    and experts, from Megatron Core's fields of the model (tuner.export.core_model)."""
    core, said = core_model(lp, "Megatron-LM")
    notes += said
    out = ["--num-layers", str(core["num_layers"]), "--hidden-size", str(core["hidden_size"]),
           "--ffn-hidden-size", str(core["ffn_hidden_size"]),
           "--num-attention-heads", str(core["num_attention_heads"]),
           "--seq-length", str(core["seq_length"]),
           "--max-position-embeddings", str(core["seq_length"])]
    even = core["hidden_size"] // core["num_attention_heads"]
    if core.get("kv_channels", even) != even:
        out += ["--kv-channels", str(core["kv_channels"])]
    return out + architecture(core) + _latent_attention(core) + _experts(lp, core)


_MLA_FLAGS = {"q_lora_rank": "--q-lora-rank", "kv_lora_rank": "--kv-lora-rank",
              "qk_head_dim": "--qk-head-dim", "qk_pos_emb_head_dim": "--qk-pos-emb-head-dim",
              "v_head_dim": "--v-head-dim"}


def _latent_attention(core: dict[str, Any]) -> list[str]:
    """DeepSeek's multi-head latent attention (model.attention, kind mla)."""
    if not core.get("multi_latent_attention"):
        return []
    return ["--multi-latent-attention",  # no --q-lora-rank: queries without a latent
            *(item for field, flag in _MLA_FLAGS.items() if core[field] is not None
              for item in (flag, str(core[field])))]


_MOE_FLAGS = {"num_moe_experts": "--num-experts", "moe_router_topk": "--moe-router-topk",
              "moe_ffn_hidden_size": "--moe-ffn-hidden-size",
              "moe_grouped_gemm": "--moe-grouped-gemm",
              "moe_shared_expert_intermediate_size": "--moe-shared-expert-intermediate-size",
              "moe_layer_freq": "--moe-layer-freq",
              "moe_router_num_groups": "--moe-router-num-groups",
              "moe_router_group_topk": "--moe-router-group-topk",
              "mtp_num_layers": "--mtp-num-layers"}


def _experts(lp: LaunchPlan, core: dict[str, Any]) -> list[str]:
    """A mixture of experts: the experts, their router and widths, the layers that have them
    (--moe-layer-freq only where some have none), grouped GEMMs, the token dispatcher the
    model assumed (DeepEP's deduplicating dispatch, `stack.ep_dedup`, where it runs on the
    GPU: LaunchPlan.deepep; or NCCL all-to-alls) and the all-to-all overlap
    (`stack.ep_overlap`)."""
    if lp.model.kind != "moe":
        return []
    out: list[str] = []
    for field, flag in _MOE_FLAGS.items():
        value = core.get(field)
        if value is None or (field == "moe_layer_freq" and value == 1):  # 1: every layer
            continue
        out += [flag] if value is True else [flag, str(value)]
    out += (["--moe-token-dispatcher-type", "flex", "--moe-enable-deepep"] if lp.deepep
            else ["--moe-token-dispatcher-type", "alltoall"])
    if lp.ep_overlap and lp.ep_overlap_blocked is None:
        out.append("--overlap-moe-expert-parallel-comm")
    return out


def _pipeline(lp: LaunchPlan) -> list[str]:
    out: list[str] = []
    vs = lp.plan.virtual_stages
    if lp.layout is not None:  # sets the virtual stages too: no other pipeline flag with it
        return ["--pipeline-model-parallel-layout", lp.layout]
    if vs > 1:
        per_chunk = lp.layers_per_chunk
        out += (["--num-layers-per-virtual-pipeline-stage", str(per_chunk)] if per_chunk
                else ["--num-virtual-stages-per-pipeline-rank", str(vs)])
    if lp.split_ends:
        out += ["--account-for-embedding-in-pipeline-split",
                "--account-for-loss-in-pipeline-split"]
    ends = end_split(lp.stage_split) if lp.stage_split is not None else None
    if ends is not None and ends.first != ends.middle:
        out += ["--decoder-first-pipeline-num-layers", str(ends.first)]
    if ends is not None and ends.last != ends.middle:
        out += ["--decoder-last-pipeline-num-layers", str(ends.last)]
    return out


def _memory(lp: LaunchPlan, notes: list[str]) -> list[str]:
    p = lp.plan
    out: list[str] = []
    recompute = p.recompute.value
    if recompute == "selective":
        out += ["--recompute-granularity", "selective"]
    elif recompute == "full":
        out += ["--recompute-granularity", "full", "--recompute-method", "uniform",
                "--recompute-num-layers", "1"]
    offload = p.offload.value != "none"
    if p.zero >= 2:  # validate_args: Megatron FSDP saves fsdp_dtensor checkpoints only
        out += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", _SHARDING[p.zero],
                "--ckpt-format", "fsdp_dtensor"]
    if p.zero >= 1 or offload:  # with FSDP as docs/source/api-guide/custom_fsdp.md writes it
        out.append("--use-distributed-optimizer")
    if offload:  # validate_args: the CPU offload runs on the precision-aware optimizer, which
        # OptimizerConfig allows on the distributed optimizer only
        out += ["--optimizer-cpu-offload", "--optimizer-offload-fraction", "1.0",
                "--use-precision-aware-optimizer"]
        if p.zero == 0:
            notes.append("offload: Megatron-LM offloads the distributed optimizer's state "
                         "only, so the optimizer is sharded here (ZeRO 1), where the plan "
                         "has zero 0")
    if p.offload.value == "optimizer+weights":
        notes.append("weights offload has no Megatron-LM flag: only the optimizer state is "
                     "offloaded here")
    return out


def _overlap(lp: LaunchPlan, notes: list[str]) -> list[str]:
    out = []
    if lp.tp_overlap:
        out.append("--tp-comm-overlap")
    if lp.dp_overlap:
        out += ["--overlap-grad-reduce", "--overlap-param-gather"] if lp.plan.zero >= 1 \
            else ["--overlap-grad-reduce"]
    sync = lp.plan.sync
    if sync is not None and sync.value in ("ring", "tree"):
        notes.append(f"sync: {sync.value}: set NCCL_ALGO={sync.value.capitalize()} in the "
                     "environment")
    elif sync is not None:
        notes.append(f"sync: {sync.value} has no Megatron-LM flag (NCCL picks its algorithm)")
    return out


def flags(lp: LaunchPlan) -> tuple[list[str], list[str]]:
    """(the flags and their values, in order; notes on what Megatron-LM cannot express)."""
    notes = pool_notes(lp.pools, "Megatron-LM", lp.stage_split if lp.layout is None else None,
                       batch=lp.batch_micro_batches)
    notes += ep_overlap_notes(lp) + deepep_notes(lp)
    p = lp.plan
    # etp always for a mixture of experts: Megatron-LM sets an unset one to tp
    # (arguments.py, validate_args)
    written = ("tp", "pp", "etp") if lp.model.kind == "moe" else ("tp", "pp")
    out = [item for name, degree in lp.degrees.items() if degree > 1 or name in written
           for item in (DEGREE_FLAGS[name], str(degree))]
    out += _pipeline(lp)
    if p.sequence_parallel and p.tp > 1:
        out.append("--sequence-parallel")
    out += ["--micro-batch-size", str(p.micro_batch), "--global-batch-size",
            str(lp.global_batch)]
    out += _memory(lp, notes) + _overlap(lp, notes) + _model(lp, notes) + _PRECISION[lp.precision]
    if lp.precision == "fp8":
        recipe = lp.core_fp8_recipe
        out += ["--fp8-format", _FP8_FORMATS.get(recipe, "hybrid"), "--fp8-recipe", recipe]
    if lp.precision == "fp32":
        notes.append("fp32: Megatron-LM trains in fp32 without --bf16/--fp16")
    return out, notes + _expert_refusals(lp)


def _expert_refusals(lp: LaunchPlan) -> list[str]:
    """What Megatron-LM refuses of an expert layout the model evaluated: expert parallelism
    in fp16 (arguments.py:1041, validate_args) and biases in experts split by etp > 1
    (megatron/core/transformer/transformer_config.py:1301, 'Bias in Moe is only supported
    when ETP==1'; GPT-OSS's experts add biases)."""
    if lp.model.kind != "moe":
        return []
    p, out = lp.plan, []
    if p.ep > 1 and lp.precision == "fp16":
        out.append(f"fp16 with ep {p.ep}: Megatron-LM refuses expert parallelism in fp16 "
                   "('Expert parallelism is not supported with fp16 training'); train in bf16")
    if p.etp > 1 and cast("MoEModelSpec", lp.model).expert_bias:
        out.append(f"etp {p.etp}: Megatron Core runs experts with biases at etp 1 only ('Bias "
                   "in Moe is only supported when ETP==1'); plan with etp: 1")
    return out


def environment(lp: LaunchPlan, items: list[str]) -> dict[str, str]:
    """The environment the command needs: validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS=1
    where tp or cp > 1 before Blackwell (one hardware queue keeps the tensor-parallel
    communication ahead of the GEMMs it feeds), unless Megatron FSDP (which asserts the
    opposite) or the expert-parallel overlap run; Megatron-LM's example scripts export it."""
    parallel = lp.plan.tp > 1 or lp.plan.cp > 1
    exempt = {"--use-megatron-fsdp", "--overlap-moe-expert-parallel-comm"} & set(items)
    return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"} if parallel and not exempt else {}


def render(lp: LaunchPlan) -> str:
    """A torchrun command line, one flag (and its value) per line, each word quoted for the
    shell where it needs it (shlex.quote: `--moe-layer-freq '([0]*3+[1]*58)'`)."""
    items, notes = flags(lp)
    env = "".join(f"{k}={v} " for k, v in environment(lp, items).items())
    lines = [f"# Megatron-LM (core_v0.15.0 flags) for {lp.title}",
             f"# data parallel {lp.plan.dp} follows from {counted(lp.gpus, 'GPU')}",
             *(f"# note: {n}" for n in notes),
             f"{env}torchrun --nnodes {lp.nodes} --nproc-per-node {lp.gpus_per_node} "
             "pretrain_gpt.py \\"]
    args: list[str] = []
    for item in items:
        if item.startswith("--") or not args:
            args.append(shlex.quote(item))
        else:
            args[-1] += f" {shlex.quote(item)}"
    lines += [f"    {a} \\" for a in args[:-1]] + [f"    {args[-1]}"]
    return "\n".join(lines)
