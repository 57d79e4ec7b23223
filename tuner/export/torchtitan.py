"""A torchtitan job config (TOML): its [model] (for a catalog model torchtitan has a flavor
of), [training], [parallelism] and [activation_checkpoint] sections.

Keys from torchtitan v0.2.2 torchtitan/config/job_config.py (commit
73a0e6979dd10b6b1904098eb3c8f62c18ab87ce): Model (name, flavor), Training (local_batch_size:
per data-parallel rank, global_batch_size, seq_len, mixed_precision_param,
enable_cpu_offload), Parallelism (data_parallel_replicate_degree, data_parallel_shard_degree,
fsdp_reshard_after_forward, tensor_parallel_degree, pipeline_parallel_degree,
pipeline_parallel_schedule, pipeline_parallel_layers_per_stage,
pipeline_parallel_first_stage_less_layers, pipeline_parallel_last_stage_less_layers,
pipeline_parallel_microbatch_size, context_parallel_degree, expert_parallel_degree,
expert_tensor_parallel_degree, expert_parallel_comm_backend) and
ActivationCheckpoint (mode: none | selective | full, selective_ac_option). Data parallelism
is FSDP2: ZeRO 0 replicates (DDP), ZeRO 1 and 2 shard without resharding after the forward
pass (gradients sharded too), ZeRO 3 reshards (weights gathered per use)."""

from __future__ import annotations

from typing import Any

from search_spaces import model_catalog

from .launch import LaunchPlan, deepep_notes
from .pools import EndSplit, end_split, pool_notes

__all__ = ["DEGREE_KEYS", "FLAVORS", "flavor_args", "layers_per_stage", "render", "sections"]

DEGREE_KEYS = {"tp": "tensor_parallel_degree", "pp": "pipeline_parallel_degree",
               "cp": "context_parallel_degree", "ep": "expert_parallel_degree",
               "etp": "expert_tensor_parallel_degree"}
_PARAM_DTYPE = {"bf16": "bfloat16", "fp8": "bfloat16", "fp16": "bfloat16", "fp32": "float32"}


def _data_parallel(lp: LaunchPlan, notes: list[str]) -> dict[str, Any]:
    dp, zero = lp.plan.dp, lp.plan.zero
    if zero == 0 and lp.plan.ep > 1:
        return _expert_shards(lp, notes)
    if zero == 0:
        return {"data_parallel_replicate_degree": dp, "data_parallel_shard_degree": 1}
    if zero == 1:
        notes.append("zero: 1: torchtitan's FSDP2 shards gradients too (as ZeRO 2)")
    return {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": dp,
            "fsdp_reshard_after_forward": "always" if zero >= 3 else "never"}


def _expert_shards(lp: LaunchPlan, notes: list[str]) -> dict[str, Any]:
    """ZeRO 0 with expert parallelism: torchtitan (v0.2.2 torchtitan/distributed/
    parallel_dims.py, build_mesh) lays the experts out over its FSDP dimension, efsdp =
    dp_shard x cp x tp / (etp x ep), never over dp_replicate, so ep x etp must divide
    dp_shard x cp x tp (with dp_shard 1 the mesh is refused). The least dp_shard that holds
    the experts, the rest replicated (HSDP), weights kept gathered through the step."""
    p = lp.plan
    shard = next(s for s in range(1, p.dp + 1)
                 if p.dp % s == 0 and (s * p.cp * p.tp) % (p.ep * p.etp) == 0)
    notes.append(f"zero: 0 with ep {p.ep}: torchtitan lays the experts over its FSDP "
                 f"dimension, so data_parallel_shard_degree {shard} (FSDP2 shards weights, "
                 "gradients and optimizer state over those ranks, as ZeRO 2) and the rest "
                 "replicated")
    return {"data_parallel_replicate_degree": p.dp // shard,
            "data_parallel_shard_degree": shard, "fsdp_reshard_after_forward": "never"}


def _dispatch(lp: LaunchPlan) -> dict[str, Any]:
    """The all-to-all the model assumed for an expert-parallel plan: DeepEP's, which sends a
    token once to each remote node (`stack.ep_dedup`), or PyTorch's all-to-all
    (expert_parallel_comm_backend, torchtitan v0.2.2 Parallelism: standard | deepep)."""
    if lp.model.kind != "moe" or lp.plan.ep == 1:
        return {}
    return {"expert_parallel_comm_backend": "deepep" if lp.deepep else "standard"}


def _expert_tensor_note(lp: LaunchPlan) -> list[str]:
    """torchtitan v0.2.2 (ParallelDims._validate) runs experts with etp 1 or etp = tp only."""
    p = lp.plan
    if p.ep > 1 and p.etp not in (1, p.tp):
        return [f"etp {p.etp}: torchtitan runs expert tensor parallelism of 1 or of tp "
                f"({p.tp}) only; this plan cannot run there as it is"]
    return []


def _pipeline(lp: LaunchPlan, notes: list[str]) -> dict[str, Any]:
    p = lp.plan
    if p.pp == 1:
        return {}
    if lp.stage_split is not None:
        return _uneven(lp, notes)
    chunks = p.pp * p.virtual_stages
    ends = 1 if lp.split_ends else 0
    out: dict[str, Any] = {
        "pipeline_parallel_schedule": "Interleaved1F1B" if p.virtual_stages > 1 else "1F1B"}
    per_stage = layers_per_stage(lp.model.layers + 2 * ends, chunks)
    if per_stage is not None:
        out["pipeline_parallel_layers_per_stage"] = per_stage
    elif p.virtual_stages not in (1, 2):  # torchtitan's own count is pp or 2 x pp stages
        notes.append(f"no pipeline_parallel_layers_per_stage makes {chunks} stages of "
                     f"{lp.model.layers} layers in torchtitan; split the model yourself")
    return {**out, "pipeline_parallel_first_stage_less_layers": ends,
            "pipeline_parallel_last_stage_less_layers": ends,
            "pipeline_parallel_microbatch_size": p.micro_batch}


def layers_per_stage(effective_layers: int, stages: int) -> int | None:
    """The pipeline_parallel_layers_per_stage for which torchtitan makes `stages` stages of
    `effective_layers` (the layers, plus the first and last stage's less-layers weights), or
    None where no value does. torchtitan (v0.2.2 torchtitan/distributed/pipeline_parallel.py,
    pipeline_llm) makes ceil(effective / layers_per_stage) stages and refuses a count that pp
    does not divide: 61 layers at 30 per stage are 3 stages, 31 per stage 2. Without the key it
    makes pp stages for a single-stage schedule, 2 per rank for an interleaved one."""
    per_stage = -(-effective_layers // stages)
    return per_stage if -(-effective_layers // per_stage) == stages else None


def _uneven(lp: LaunchPlan, notes: list[str]) -> dict[str, Any]:
    """A pipeline across pools: the middle stages' layers, the first and last stage fewer
    (torchtitan states no more; a split it cannot state is noted by tuner.export.pools). Of
    two stages, the fuller one sets the per-stage count and the other is fewer: [12, 68] is
    68 a stage, the first 56 less."""
    split = lp.stage_split or []
    ends = end_split(split)
    if len(split) == 2:  # both stages are ends: the fuller one is the per-stage count
        ends = EndSplit(first=split[0], middle=max(split), last=split[1])
    out: dict[str, Any] = {"pipeline_parallel_schedule": "1F1B",
                           "pipeline_parallel_microbatch_size": lp.plan.micro_batch}
    if ends is None:
        return out
    if ends.first > ends.middle or ends.last > ends.middle:
        notes.append(f"layers per stage {split}: torchtitan's first and last stage may only "
                     "take fewer layers than the others; set this split yourself")
        return out
    return {**out, "pipeline_parallel_layers_per_stage": ends.middle,
            "pipeline_parallel_first_stage_less_layers": ends.middle - ends.first,
            "pipeline_parallel_last_stage_less_layers": ends.middle - ends.last}


def flavor_args(m: Any) -> dict[str, Any]:
    """The model as the args of a torchtitan flavor (v0.2.2, commit 73a0e69): llama3's
    TransformerModelArgs (torchtitan/models/llama3/model/args.py: dim, n_layers, n_heads,
    n_kv_heads, vocab_size, multiple_of, ffn_dim_multiplier, norm_eps, rope_theta); qwen3's
    head_dim, hidden_dim and qk_norm (models/qwen3/model/args.py) where the heads are not
    dim / n_heads wide or the queries and keys are normed; and a mixture of experts' MoEArgs
    (models/moe/moe.py: num_experts, num_shared_experts, top_k, num_expert_groups,
    num_limited_groups) with deepseek_v3's moe_inter_dim and n_dense_layers."""
    out: dict[str, Any] = {"dim": m.hidden, "n_layers": m.layers, "n_heads": m.heads,
                           "n_kv_heads": m.kv_heads, "vocab_size": m.vocab,
                           **_ffn_args(m.hidden, m.ffn_hidden),
                           "norm_eps": m.norm_epsilon}
    if m.position_embedding == "rope":
        out["rope_theta"] = m.rotary_base
    if m.head_dim != m.hidden // m.heads or m.qk_norm:
        out.update(head_dim=m.head_dim, hidden_dim=m.ffn_hidden, qk_norm=bool(m.qk_norm))
    if m.kind == "moe":
        out.update(num_experts=m.experts, num_shared_experts=m.shared_experts, top_k=m.top_k,
                   moe_inter_dim=m.expert_ffn_hidden, n_dense_layers=m.dense_layers)
        if m.expert_groups > 1:
            out.update(num_expert_groups=m.expert_groups, num_limited_groups=m.group_top_k)
    return out


def _ffn_args(dim: int, ffn_hidden: int) -> dict[str, Any]:
    """multiple_of and ffn_dim_multiplier that make llama3's FeedForward ffn_hidden wide
    (models/llama3/model/model.py: int(2 * 4 * dim / 3), times the multiplier, rounded up to
    a multiple of multiple_of), checked; else the width itself as qwen3's hidden_dim."""
    base = int(2 * 4 * dim / 3)
    multiple = next(k for k in (4096, 1024, 256, 128, 64, 32, 16, 8, 4, 2, 1)
                    if ffn_hidden % k == 0)
    for multiplier in (None, round(ffn_hidden / base, 4)):
        width = int(multiplier * base) if multiplier is not None else base
        if multiple * -(-width // multiple) == ffn_hidden:
            return {"multiple_of": multiple, "ffn_dim_multiplier": multiplier}
    return {"hidden_dim": ffn_hidden}


FLAVORS = {"llama3-8b": ("llama3", "8B"), "llama3-70b": ("llama3", "70B"),
           "llama3-405b": ("llama3", "405B"), "deepseek-v3": ("deepseek_v3", "671B"),
           "qwen3-30b-a3b": ("qwen3", "30B-A3B"), "qwen3-235b-a22b": ("qwen3", "235B-A22B"),
           "gpt-oss-20b": ("gpt_oss", "20b"), "gpt-oss-120b": ("gpt_oss", "120b")}
"""The catalog models torchtitan v0.2.2 ships a flavor of, as its [model] `name` (a module of
torchtitan/models/, `_supported_models` in torchtitan/models/__init__.py) and `flavor` (a key
of the module's args dict: llama3_configs in models/llama3/__init__.py, deepseekv3_args in
models/deepseek_v3/__init__.py, qwen3_args in models/qwen3/__init__.py, gptoss_configs in
models/gpt_oss/__init__.py; commit 73a0e69). Each flavor's layers, width, heads, kv heads,
experts, top-k and expert width are the catalog model's; torchtitan takes the vocabulary
from the tokenizer at `hf_assets_path`, which the user sets."""


def _model(lp: LaunchPlan) -> tuple[dict[str, Any], list[str]]:
    """The [model] section of a catalog model torchtitan has a flavor of; otherwise, since
    torchtitan builds the architecture of the [model] flavor, set in its code and not in this
    config, a note with the args a flavor must have, and what no flavor of llama3's builds
    (a model of the user's own, a catalog model with a field changed, or one torchtitan has
    no flavor of)."""
    m = lp.model
    catalog = model_catalog().get(m.name) == m
    if catalog and m.name in FLAVORS:
        name, flavor = FLAVORS[m.name]
        return {"name": name, "flavor": flavor}, []
    args = ", ".join(f"{k}={v}" for k, v in flavor_args(m).items())
    unbuilt = [what for what, off in (
        ("a GeLU MLP", not m.gated_mlp), ("LayerNorm", m.normalization == "layernorm"),
        ("linear biases", bool(m.linear_bias)),
        (f"{m.position_embedding} positions", m.position_embedding != "rope"),
        ("tied embeddings", m.tied_embeddings),
        ("multi-head latent attention", getattr(m, "attention", None) is not None)) if off]
    more = (f"; torchtitan's llama3 builds none of: {', '.join(unbuilt)}" if unbuilt else "")
    why = "has no flavor in torchtitan v0.2.2" if catalog else "is not in the catalog"
    return {}, [f"model {m.name} {why}: torchtitan builds its [model] flavor's "
                f"architecture, not this config's, so train it with a flavor whose args are "
                f"{args}{more}"]


def sections(lp: LaunchPlan) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """{section: {key: value}} in order, and notes on what torchtitan cannot express."""
    model, model_notes = _model(lp)
    notes = pool_notes(lp.pools, "torchtitan", lp.stage_split,
                       batch=lp.batch_micro_batches) + _expert_tensor_note(lp) + \
        deepep_notes(lp) + model_notes
    p = lp.plan
    per_rank = lp.batch_per_replica if p.pp > 1 else p.micro_batch  # pp = 1: accumulation
    training: dict[str, Any] = {"local_batch_size": per_rank,
                                "global_batch_size": lp.global_batch,
                                "seq_len": lp.model.seq_len,
                                "mixed_precision_param": _PARAM_DTYPE[lp.precision]}
    if p.offload.value != "none":
        training["enable_cpu_offload"] = True
        if p.offload.value == "optimizer":
            notes.append("offload: optimizer: torchtitan offloads weights and gradients too")
    if lp.precision in ("fp8", "fp16"):
        notes.append(f"precision {lp.precision}: set [model] converters (float8) or the "
                     "mixed precision yourself; bfloat16 is written here")
    parallelism = {**_data_parallel(lp, notes),
                   **{DEGREE_KEYS[d]: v for d, v in lp.degrees.items()},
                   **_dispatch(lp), **_pipeline(lp, notes)}
    if p.tp > 1 and not p.sequence_parallel:
        notes.append("torchtitan's tensor parallelism always shards the norms' sequence "
                     "(sequence parallelism)")
    recompute = p.recompute.value
    checkpoint: dict[str, Any] = {"mode": recompute}
    if recompute == "selective":
        checkpoint["selective_ac_option"] = "op"
    parts = {"model": model} if model else {}
    return {**parts, "training": training, "parallelism": parallelism,
            "activation_checkpoint": checkpoint}, notes


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def render(lp: LaunchPlan) -> str:
    """The TOML sections to merge into a torchtitan job config."""
    parts, notes = sections(lp)
    lines = [f"# torchtitan job config (v0.2.2 keys) for {lp.title}",
             *(f"# note: {n}" for n in notes)]
    for name, values in parts.items():
        lines += ["", f"[{name}]", *(f"{k} = {_toml(v)}" for k, v in values.items())]
    return "\n".join(lines)
