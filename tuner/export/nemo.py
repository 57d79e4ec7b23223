"""NeMo 2 recipe overrides: assignments to a recipe's attributes (a `run.Partial` from
`nemo.collections.llm`, e.g. `llm.llama3_70b.pretrain_recipe(...)`).

Attribute names from NeMo v2.4.0 (commit 2381f42f6979449b5b99538f8f80135831009b51): the
trainer and MegatronStrategy arguments (nemo/lightning/pytorch/strategies/megatron_strategy.py:
tensor_model_parallel_size, ..., account_for_loss_in_pipeline_split, fsdp, ddp), the data
module's micro_batch_size, global_batch_size and seq_length, and the attributes its recipes
set (nemo/collections/llm/recipes/*.py: recipe.model.config.recompute_granularity,
recipe.optim.config.use_distributed_optimizer, ...); the fields of Megatron Core's
TransformerConfig, OptimizerConfig and DistributedDataParallelConfig behind them
(core_v0.15.0: recompute_method, recompute_num_layers, optimizer_cpu_offload,
data_parallel_sharding_strategy, overlap_grad_reduce, overlap_param_gather, and
TransformerConfig's num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage
for the uneven split of a pipeline across pools of several GPU types, tuner.export.pools).

The planned model is written whole as recipe.model.config's fields (GPTConfig, nemo/collections/
llm/gpt/model/base.py, a Megatron Core TransformerConfig: tuner.export.core_model cites each
field), whatever recipe the overrides are applied to: a recipe carries its own model
(llama3_70b's Llama3Config70B), and these overrides do not know which recipe that is, so only
every field makes the run train the model that was planned (a model of the user's own, or a
catalog model on another model's recipe), as the Megatron-LM command does."""

from __future__ import annotations

from typing import Any

from search_spaces.wording import counted

from .core_model import core_model
from .launch import LaunchPlan, deepep_notes, ep_overlap_notes
from .pools import end_split, pool_notes

__all__ = ["DEGREE_ATTRIBUTES", "assignments", "render"]

_STRATEGY = "recipe.trainer.strategy."
_CONFIG = "recipe.model.config."
DEGREE_ATTRIBUTES = {"tp": "tensor_model_parallel_size", "pp": "pipeline_model_parallel_size",
                     "cp": "context_parallel_size", "ep": "expert_model_parallel_size",
                     "etp": "expert_tensor_parallel_size"}
_SHARDING = {2: "optim_grads", 3: "optim_grads_params"}


def _memory(lp: LaunchPlan, notes: list[str]) -> list[tuple[str, Any]]:
    p = lp.plan
    out: list[tuple[str, Any]] = []
    recompute = p.recompute.value
    if recompute == "none":
        out.append(("recipe.model.config.recompute_granularity", None))
    else:
        out.append(("recipe.model.config.recompute_granularity", recompute))
    if recompute == "full":
        out += [("recipe.model.config.recompute_method", "uniform"),
                ("recipe.model.config.recompute_num_layers", 1)]
    offload = p.offload.value != "none"
    # Megatron FSDP over the distributed optimizer, as NeMo's own FSDP settings keep the
    # recipes' (scripts/performance/helpers.py, set_mcore_fsdp_configs) and Megatron-LM's
    # docs/source/api-guide/custom_fsdp.md; an offloaded optimizer is the precision-aware
    # one (Megatron-LM's validate_args), which OptimizerConfig allows on the distributed
    # optimizer only (core_v0.15.0 megatron/core/optimizer/optimizer_config.py)
    out.append(("recipe.optim.config.use_distributed_optimizer", p.zero >= 1 or offload))
    if p.zero >= 2:
        out += [(_STRATEGY + "fsdp", "megatron"),
                (_STRATEGY + "ddp.data_parallel_sharding_strategy", _SHARDING[p.zero])]
    if offload:
        out += [("recipe.optim.config.optimizer_cpu_offload", True),
                ("recipe.optim.config.optimizer_offload_fraction", 1.0),
                ("recipe.optim.config.use_precision_aware_optimizer", True)]
        if p.zero == 0:
            notes.append("offload: Megatron Core offloads the distributed optimizer's state "
                         "only, so the optimizer is sharded here (ZeRO 1), where the plan has "
                         "zero 0")
    if p.offload.value == "optimizer+weights":
        notes.append("weights offload has no NeMo attribute: only the optimizer state is "
                     "offloaded here")
    return out


def assignments(lp: LaunchPlan) -> tuple[list[tuple[str, Any]], list[str]]:
    """(attribute, value) pairs in order, and notes on what NeMo cannot express."""
    notes = pool_notes(lp.pools, "NeMo", lp.stage_split if lp.layout is None else None,
                       batch=lp.batch_micro_batches)
    notes += ep_overlap_notes(lp) + deepep_notes(lp)
    p = lp.plan
    out: list[tuple[str, Any]] = [("recipe.trainer.num_nodes", lp.nodes),
                                  ("recipe.trainer.devices", lp.gpus_per_node)]
    out += [(_STRATEGY + DEGREE_ATTRIBUTES[d], v) for d, v in lp.degrees.items()]
    out.append((_STRATEGY + "virtual_pipeline_model_parallel_size",
                p.virtual_stages if p.virtual_stages > 1 else None))
    if lp.split_ends:
        out += [(_STRATEGY + "account_for_embedding_in_pipeline_split", True),
                (_STRATEGY + "account_for_loss_in_pipeline_split", True)]
    out += _uneven(lp)
    if lp.layout is not None:
        out.append((_STRATEGY + "pipeline_model_parallel_layout", lp.layout))
    out.append((_STRATEGY + "sequence_parallel", bool(p.sequence_parallel and p.tp > 1)))
    out += [("recipe.data.micro_batch_size", p.micro_batch),
            ("recipe.data.global_batch_size", lp.global_batch),
            ("recipe.data.seq_length", lp.model.seq_len)]
    out += _model(lp, notes) + _memory(lp, notes) + _experts(lp) + _fp8(lp)
    if lp.dp_overlap:
        out += [(_STRATEGY + "ddp.overlap_grad_reduce", True),
                (_STRATEGY + "ddp.overlap_param_gather", p.zero >= 1)]
    if p.sync is not None:
        notes.append(f"sync: {p.sync.value}: NCCL chooses the algorithm (NCCL_ALGO in the "
                     "environment for ring or tree)")
    return out, notes


def _fp8(lp: LaunchPlan) -> list[tuple[str, Any]]:
    """An fp8 plan: the recipe's precision plugin (recipe.trainer.plugins, a
    MegatronMixedPrecision config) in fp8 with the scaling the model assumed, hybrid E4M3/E5M2
    as NeMo's own bf16_with_fp8_mixed and bf16_with_mxfp8_mixed set it
    (nemo/collections/llm/recipes/precision/mixed_precision.py). MegatronMixedPrecision's
    fp8_recipe (NeMo v2.4.0 nemo/lightning/pytorch/plugins/mixed_precision.py) passes on to
    Megatron Core's TransformerConfig.fp8_recipe (LaunchPlan.core_fp8_recipe)."""
    if lp.precision != "fp8":
        return []
    return [("recipe.trainer.plugins.fp8", "hybrid"),
            ("recipe.trainer.plugins.fp8_recipe", lp.core_fp8_recipe)]


def _experts(lp: LaunchPlan) -> list[tuple[str, Any]]:
    """A mixture of experts: the token dispatcher the model assumed (DeepEP's deduplicating
    dispatch through the flex dispatcher, `stack.ep_dedup`, or NCCL all-to-alls) and the
    all-to-all overlap with another micro-batch (`stack.ep_overlap`): TransformerConfig's
    moe_token_dispatcher_type and moe_enable_deepep, ModelParallelConfig's
    overlap_moe_expert_parallel_comm (core_v0.15.0); the experts themselves are the model's
    (_model)."""
    if lp.model.kind != "moe":
        return []
    return [(_CONFIG + "moe_token_dispatcher_type", "flex" if lp.deepep else "alltoall"),
            (_CONFIG + "moe_enable_deepep", lp.deepep),
            (_CONFIG + "overlap_moe_expert_parallel_comm",
             lp.ep_overlap and lp.ep_overlap_blocked is None)]


def _model(lp: LaunchPlan, notes: list[str]) -> list[tuple[str, Any]]:
    """Every field of the planned model (tuner.export.core_model). Latent attention's fields
    are MLATransformerConfig's, which NeMo's DeepSeek recipes hold (DeepSeekConfig,
    nemo/collections/llm/gpt/model/deepseek.py line 58) and a GPTConfig lacks."""
    core, said = core_model(lp, "NeMo")
    notes += said
    if core.get("multi_latent_attention"):
        notes.append("multi-head latent attention: apply these to a DeepSeek recipe (its "
                     "model.config a DeepSeekConfig, an MLATransformerConfig), the only "
                     "NeMo config with q_lora_rank, kv_lora_rank, qk_head_dim, ...")
    return [(_CONFIG + field, value) for field, value in core.items()]


def _uneven(lp: LaunchPlan) -> list[tuple[str, Any]]:
    """The first and last stage's layers of a pipeline across pools, where they differ from
    the even middle stages."""
    ends = end_split(lp.stage_split) if lp.stage_split is not None else None
    out: list[tuple[str, Any]] = []
    if ends is not None and ends.first != ends.middle:
        out.append(("recipe.model.config.num_layers_in_first_pipeline_stage", ends.first))
    if ends is not None and ends.last != ends.middle:
        out.append(("recipe.model.config.num_layers_in_last_pipeline_stage", ends.last))
    return out


def _python(value: Any) -> str:
    return repr(value)


def render(lp: LaunchPlan) -> str:
    """Python assignments to apply to a NeMo 2 recipe before running it."""
    pairs, notes = assignments(lp)
    lines = [f"# NeMo 2 recipe overrides (NeMo v2.4.0 attribute names) for {lp.title}",
             f"# data parallel {lp.plan.dp} follows from {counted(lp.gpus, 'GPU')}",
             f"# the model is the plan's whatever the recipe's, its vocabulary the tokenizer's "
             f"(the plan counted {lp.model.vocab:,}); activation_func needs `import torch`",
             *(f"# note: {n}" for n in notes)]
    lines += [f"{name} = {_python(value)}" for name, value in pairs]
    return "\n".join(lines)
