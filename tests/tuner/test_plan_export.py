"""`tuner plan NAME --as spec|megatron|nemo|torchtitan`: every option name written is one the
framework documents (lists below, each cited), the values are the plan's, and the spec format
evaluates to the trial's own step time. `tuner explain NAME` explains the same plan."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cost import Offload, PlanRecord, Recompute, Sync
from cost.moe import moe_layer_count
from search_spaces import model_catalog
from tuner.cli import main
from tuner.export import megatron, nemo, torchtitan
from tuner.export.launch import LaunchPlan

from .specs import gpt3_narrow, write

MEGATRON_FLAGS = {
    # Megatron-LM megatron/training/arguments.py at core_v0.15.0, commit
    # 0d7e02bd26d3eb347ad8d1bef625002babfa6df7:
    # https://github.com/NVIDIA/Megatron-LM/blob/core_v0.15.0/megatron/training/arguments.py
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
    "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
    "--context-parallel-size", "--sequence-parallel", "--expert-model-parallel-size",
    "--expert-tensor-parallel-size", "--account-for-embedding-in-pipeline-split",
    "--account-for-loss-in-pipeline-split", "--micro-batch-size", "--global-batch-size",
    "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    "--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy",
    "--optimizer-cpu-offload", "--optimizer-offload-fraction", "--use-precision-aware-optimizer",
    "--ckpt-format", "--tp-comm-overlap",
    "--overlap-grad-reduce", "--overlap-param-gather", "--num-layers", "--hidden-size",
    "--ffn-hidden-size", "--num-attention-heads", "--group-query-attention",
    "--num-query-groups", "--seq-length", "--max-position-embeddings", "--swiglu",
    "--untie-embeddings-and-output-weights", "--bf16", "--fp16", "--fp8-format", "--fp8-recipe",
    # the uneven split of a pipeline across pools (same arguments.py, _add_distributed_args)
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
    # a pipeline the chunks do not divide (_add_distributed_args; megatron/core/transformer/
    # pipeline_parallel_layer_layout.py parses it)
    "--pipeline-model-parallel-layout",
    # a head width other than hidden / heads (_add_network_size_args), mixtures of experts
    # (_add_moe_args) and multi-head latent attention (_add_mla_args), same arguments.py
    "--kv-channels", "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size",
    "--moe-grouped-gemm", "--moe-shared-expert-intermediate-size", "--moe-layer-freq",
    "--moe-router-num-groups", "--moe-router-group-topk", "--mtp-num-layers",
    "--moe-token-dispatcher-type", "--moe-enable-deepep", "--overlap-moe-expert-parallel-comm",
    "--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim",
    "--qk-pos-emb-head-dim", "--v-head-dim",
    # experts without biases (_add_network_size_args: dest add_bias_linear, default on)
    "--disable-bias-linear",
    # the architecture (tuner/export/megatron_model.py): _add_network_size_args (lines
    # 1588-1631: --position-embedding-type, --rotary-base, --normalization, --norm-epsilon),
    # _add_regularization_args (1876-1878: --attention-dropout, --hidden-dropout), and
    # --qk-layernorm (3023)
    "--position-embedding-type", "--rotary-base", "--normalization", "--norm-epsilon",
    "--attention-dropout", "--hidden-dropout", "--qk-layernorm",
    # torchrun: https://docs.pytorch.org/docs/stable/elastic/run.html
    "--nnodes", "--nproc-per-node",
}
MEGATRON_CHOICES = {"--recompute-granularity": {"full", "selective"},
                    "--recompute-method": {"uniform", "block"},
                    "--data-parallel-sharding-strategy": {"no_shard", "optim", "optim_grads",
                                                          "optim_grads_params"},
                    "--ckpt-format": {"torch", "torch_dist", "zarr", "torch_dcp",
                                      "fsdp_dtensor"},
                    "--fp8-format": {"e4m3", "hybrid"},
                    "--fp8-recipe": {"tensorwise", "delayed", "mxfp8", "blockwise"},
                    "--moe-token-dispatcher-type": {"allgather", "alltoall", "flex"},
                    "--normalization": {"LayerNorm", "RMSNorm"},
                    "--position-embedding-type": {"learned_absolute", "rope", "mrope",
                                                  "relative", "none"}}

NEMO_ATTRIBUTES = {
    # NeMo v2.4.0, commit 2381f42f6979449b5b99538f8f80135831009b51: nl.Trainer (num_nodes,
    # devices) and MegatronStrategy's arguments,
    # nemo/lightning/pytorch/strategies/megatron_strategy.py; MockDataModule's
    # micro_batch_size, global_batch_size, seq_length as nemo/collections/llm/recipes set them.
    "recipe.trainer.num_nodes", "recipe.trainer.devices",
    *(f"recipe.trainer.strategy.{a}" for a in (
        "tensor_model_parallel_size", "pipeline_model_parallel_size",
        "virtual_pipeline_model_parallel_size", "context_parallel_size", "sequence_parallel",
        "expert_model_parallel_size", "expert_tensor_parallel_size",
        "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
        "pipeline_model_parallel_layout", "fsdp")),
    "recipe.data.micro_batch_size", "recipe.data.global_batch_size", "recipe.data.seq_length",
    # Megatron Core (core_v0.15.0) configs the recipe holds: TransformerConfig
    # (recipe.model.config), OptimizerConfig (recipe.optim.config),
    # DistributedDataParallelConfig (recipe.trainer.strategy.ddp)
    "recipe.model.config.recompute_granularity", "recipe.model.config.recompute_method",
    "recipe.model.config.recompute_num_layers", "recipe.optim.config.use_distributed_optimizer",
    "recipe.model.config.num_layers_in_first_pipeline_stage",  # TransformerConfig (core_v0.15.0)
    "recipe.model.config.num_layers_in_last_pipeline_stage",
    "recipe.optim.config.optimizer_cpu_offload", "recipe.optim.config.optimizer_offload_fraction",
    "recipe.optim.config.use_precision_aware_optimizer",  # OptimizerConfig (core_v0.15.0)
    "recipe.trainer.strategy.ddp.data_parallel_sharding_strategy",
    "recipe.trainer.strategy.ddp.overlap_grad_reduce",
    "recipe.trainer.strategy.ddp.overlap_param_gather",
    # a mixture of experts: TransformerConfig's dispatcher fields and ModelParallelConfig's
    # overlap_moe_expert_parallel_comm (core_v0.15.0 megatron/core/model_parallel_config.py)
    "recipe.model.config.moe_token_dispatcher_type", "recipe.model.config.moe_enable_deepep",
    "recipe.model.config.overlap_moe_expert_parallel_comm",
    # an fp8 plan: MegatronMixedPrecision's fp8 and fp8_recipe (NeMo v2.4.0
    # nemo/lightning/pytorch/plugins/mixed_precision.py), the recipes' trainer.plugins
    "recipe.trainer.plugins.fp8", "recipe.trainer.plugins.fp8_recipe",
    # the model (tuner/export/core_model.py): TransformerConfig (core_v0.15.0
    # megatron/core/transformer/transformer_config.py lines 45-528), MLATransformerConfig's
    # latent attention (1552-1567), and GPTConfig's own fields (NeMo v2.4.0
    # nemo/collections/llm/gpt/model/base.py lines 292-298)
    *(f"recipe.model.config.{f}" for f in (
        "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "kv_channels",
        "num_query_groups", "gated_linear_unit", "activation_func", "normalization",
        "layernorm_epsilon", "qk_layernorm", "add_bias_linear", "hidden_dropout",
        "attention_dropout", "num_moe_experts", "moe_router_topk", "moe_ffn_hidden_size",
        "moe_shared_expert_intermediate_size", "moe_layer_freq", "moe_router_num_groups",
        "moe_router_group_topk", "mtp_num_layers", "moe_grouped_gemm",
        "multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim",
        "qk_pos_emb_head_dim", "v_head_dim",
        "share_embeddings_and_output_weights", "position_embedding_type", "rotary_base",
        "seq_length")),
}

TORCHTITAN_KEYS = {
    # torchtitan v0.2.2 torchtitan/config/job_config.py, commit
    # 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce (classes Training, Parallelism,
    # ActivationCheckpoint, Model)
    "model": {"name", "flavor"},
    "training": {"local_batch_size", "global_batch_size", "seq_len", "mixed_precision_param",
                 "enable_cpu_offload"},
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree",
                    "fsdp_reshard_after_forward", "tensor_parallel_degree",
                    "pipeline_parallel_degree", "pipeline_parallel_schedule",
                    "pipeline_parallel_layers_per_stage",
                    "pipeline_parallel_first_stage_less_layers",
                    "pipeline_parallel_last_stage_less_layers",
                    "pipeline_parallel_microbatch_size", "context_parallel_degree",
                    "expert_parallel_degree", "expert_tensor_parallel_degree",
                    "expert_parallel_comm_backend"},
    "activation_checkpoint": {"mode", "selective_ac_option"},
}


@dataclass(frozen=True, slots=True, kw_only=True)
class MoEPlan(PlanRecord):
    """A plan record with expert degrees, as the MoE work adds them."""

    ep: int = 1
    etp: int = 1


def _launch(plan: PlanRecord, *, model: str = "llama3-70b", precision: str = "bf16"
            ) -> LaunchPlan:
    return LaunchPlan(title="t", model=model_catalog()[model], plan=plan, result=None,  # type: ignore[arg-type]
                      nodes=32, gpus_per_node=8, global_batch=1024, precision=precision,
                      tp_overlap=plan.sequence_parallel, dp_overlap=True)


def _plans() -> list[PlanRecord]:
    """Plans that exercise every mapping: recompute, ZeRO, offload, interleaving (even and
    with the embedding-and-loss split), sync, context and expert parallelism."""
    out: list[PlanRecord] = []
    for recompute, zero, offload, vs in itertools.product(
            Recompute, (0, 1, 2, 3), Offload, (1, 2, 5)):
        out.append(PlanRecord(tp=8, pp=4, dp=8, virtual_stages=vs, micro_batch=2,
                              recompute=recompute, sequence_parallel=True, zero=zero,
                              offload=offload))
    out.append(PlanRecord(tp=8, pp=16, dp=2, micro_batch=1, sync=Sync.RING))
    out.append(PlanRecord(tp=2, pp=1, dp=64, cp=2, micro_batch=1, sync=Sync.DIRECT))
    out.append(MoEPlan(tp=4, pp=2, dp=32, ep=8, etp=2, micro_batch=1))
    return out


def _megatron_names(text: str) -> list[str]:
    body = [line for line in text.splitlines() if not line.startswith("#")]
    return re.findall(r"(--[a-z0-9-]+)", " ".join(body))


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_megatron_writes_only_documented_flags(precision: str) -> None:
    for plan in _plans():
        items, _ = megatron.flags(_launch(plan, precision=precision))
        names = [x for x in items if x.startswith("--")]
        assert set(names) <= MEGATRON_FLAGS, set(names) - MEGATRON_FLAGS
        for flag, allowed in MEGATRON_CHOICES.items():
            if flag in items:
                assert items[items.index(flag) + 1] in allowed
        text = megatron.render(_launch(plan, precision=precision))
        assert set(_megatron_names(text)) <= MEGATRON_FLAGS
        assert items[items.index("--tensor-model-parallel-size") + 1] == str(plan.tp)


def test_megatron_writes_expert_degrees_when_the_plan_has_them() -> None:
    moe = _plans()[-1]
    items, _ = megatron.flags(_launch(moe))
    assert items[items.index("--expert-model-parallel-size") + 1] == "8"
    assert items[items.index("--expert-tensor-parallel-size") + 1] == "2"
    plain, _ = megatron.flags(_launch(_plans()[0]))
    assert "--expert-model-parallel-size" not in plain


def test_megatron_describes_a_mixture_of_experts() -> None:
    """DeepSeek-V3: 256 experts, 8 per token, one shared expert, three dense layers first,
    group-limited routing, multi-token prediction and latent attention; etp written even at
    1 (Megatron-LM would otherwise take tp), and the layer pattern evaluates to the layers
    the cost model gives experts."""
    model = model_catalog()["deepseek-v3"]
    plan = MoEPlan(tp=2, pp=8, dp=16, ep=32, etp=1, micro_batch=1)
    items, _ = megatron.flags(_launch(plan, model="deepseek-v3"))
    names = [x for x in items if x.startswith("--")]
    assert set(names) <= MEGATRON_FLAGS, set(names) - MEGATRON_FLAGS

    def value(flag: str) -> str:
        return items[items.index(flag) + 1]

    assert value("--expert-tensor-parallel-size") == "1"
    assert (value("--num-experts"), value("--moe-router-topk")) == ("256", "8")
    assert value("--moe-ffn-hidden-size") == "2048"
    assert value("--moe-shared-expert-intermediate-size") == "2048"
    pattern = eval(value("--moe-layer-freq"))  # as Megatron-LM's moe_freq_type evaluates it
    assert pattern[:4] == [0, 0, 0, 1] and len(pattern) == model.layers
    assert sum(pattern) == moe_layer_count(model) == 58
    assert (value("--q-lora-rank"), value("--kv-lora-rank")) == ("1536", "512")
    assert (value("--qk-head-dim"), value("--qk-pos-emb-head-dim")) == ("128", "64")
    assert value("--mtp-num-layers") == "1"
    assert value("--moe-token-dispatcher-type") == "flex"  # DeepEP: the model's default
    plain = megatron.flags(_launch(_plans()[0]))[0]
    assert "--num-experts" not in plain and "--expert-tensor-parallel-size" not in plain


def test_the_command_line_parses_back_in_a_shell() -> None:
    """Each word is quoted where the shell would read it otherwise: the layer pattern's
    parentheses, brackets and stars reach Megatron-LM as one argument."""
    plan = MoEPlan(tp=2, pp=8, dp=16, ep=32, etp=1, micro_batch=1)
    text = megatron.render(_launch(plan, model="deepseek-v3"))
    command = " ".join(line.rstrip(" \\") for line in text.splitlines()
                       if not line.startswith("#"))
    words = shlex.split(command)
    assert words[words.index("--moe-layer-freq") + 1] == "([0]*3+[1]*58)"
    assert words[:1] == ["CUDA_DEVICE_MAX_CONNECTIONS=1"]  # tp=2 (validate_args)
    assert words[1:] == ["torchrun", "--nnodes", "32", "--nproc-per-node", "8", "pretrain_gpt.py",
                     *megatron.flags(_launch(plan, model="deepseek-v3"))[0]]


@pytest.mark.parametrize(("recipe", "fmt", "flag"), [
    ("delayed", "hybrid", "delayed"), ("current", "hybrid", "tensorwise"),
    ("mxfp8", "e4m3", "mxfp8"), ("blockwise", "e4m3", "blockwise")])
def test_the_fp8_recipe_the_model_assumed_is_written(recipe: str, fmt: str, flag: str) -> None:
    lp = dataclasses.replace(_launch(_plans()[0], precision="fp8"), fp8_recipe=recipe)
    items, _ = megatron.flags(lp)
    assert items[items.index("--fp8-format") + 1] == fmt
    assert items[items.index("--fp8-recipe") + 1] == flag


@pytest.mark.parametrize(("recipe", "nemo_recipe"), [
    ("delayed", "delayed"), ("current", "tensorwise"), ("mxfp8", "mxfp8")])
def test_nemo_states_the_fp8_recipe(recipe: str, nemo_recipe: str) -> None:
    lp = dataclasses.replace(_launch(_plans()[0], precision="fp8"), fp8_recipe=recipe)
    pairs, _ = nemo.assignments(lp)
    assert {name for name, _ in pairs} <= NEMO_ATTRIBUTES
    values = dict(pairs)
    assert values["recipe.trainer.plugins.fp8"] == "hybrid"
    assert values["recipe.trainer.plugins.fp8_recipe"] == nemo_recipe
    assert "recipe.trainer.plugins.fp8" not in dict(nemo.assignments(_launch(_plans()[0]))[0])


def test_every_layer_pattern_counts_the_moe_layers() -> None:
    for name, model in model_catalog().items():
        if model.kind == "moe":
            pattern = eval(megatron.layer_pattern(model))
            assert len(pattern) == model.layers and sum(pattern) == moe_layer_count(model), name


def test_a_mixture_of_experts_study_has_every_format(tmp_path: Path) -> None:
    spec = {"name": "moe-plan", "training": {"global_batch": 64, "precision": "bf16"},
            "model": {"name": "small-moe", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1000,
                      "seq_len": 512, "gated_mlp": True, "experts": 8, "top_k": 2,
                      "expert_ffn_hidden": 256, "dense_layers": 1},
            "cluster": {"gpu": "h100-80gb", "nodes": 1, "gpus_per_node": 8},
            "plan": {"tp": [1, 2], "ep": [2, 4, 8], "micro_batch": 1}}
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    runner = CliRunner()
    done = runner.invoke(main, ["search", str(write(tmp_path, spec)), "--storage", storage,
                                "--json"])
    assert done.exit_code == 0, done.output
    best = json.loads(done.stdout)["best"][0]["plan"]
    shown = {fmt: runner.invoke(main, ["plan", "moe-plan", "--as", fmt, "--storage", storage])
             for fmt in ("megatron", "nemo", "torchtitan")}
    assert all(r.exit_code == 0 for r in shown.values()), {f: r.output for f, r in shown.items()}
    assert f"--expert-model-parallel-size {best['ep']}" in shown["megatron"].output \
        or best["ep"] == 1
    assert "--num-experts 8" in shown["megatron"].output
    assert "--moe-layer-freq '([0]*1+[1]*3)'" in shown["megatron"].output
    assert f"expert_model_parallel_size = {best['ep']}" in shown["nemo"].output
    assert "recipe.model.config.moe_token_dispatcher_type = 'flex'" in shown["nemo"].output
    assert f"expert_parallel_degree = {best['ep']}" in shown["torchtitan"].output


def test_megatron_states_the_embedding_and_loss_split() -> None:
    split = _launch(_plans()[-3], model="llama3-405b")  # 126 layers + 2 on 16 stages
    items, notes = megatron.flags(split)
    assert "--account-for-loss-in-pipeline-split" in items
    assert any("NCCL_ALGO=Ring" in n for n in notes)


def test_nemo_writes_only_documented_attributes_as_python() -> None:
    for plan in _plans():
        pairs, _ = nemo.assignments(_launch(plan))
        names = {name for name, _ in pairs}
        assert names <= NEMO_ATTRIBUTES, names - NEMO_ATTRIBUTES
        text = nemo.render(_launch(plan))
        for line in text.splitlines():
            if not line.startswith("#"):
                compile(line, "<nemo>", "exec")  # valid Python assignments
        values = dict(pairs)
        assert values["recipe.trainer.strategy.tensor_model_parallel_size"] == plan.tp
        assert values["recipe.data.micro_batch_size"] == plan.micro_batch


def test_nemo_states_the_dispatcher_of_a_mixture_of_experts() -> None:
    plan = MoEPlan(tp=2, pp=8, dp=16, ep=32, etp=1, micro_batch=1)
    pairs, _ = nemo.assignments(_launch(plan, model="deepseek-v3"))
    assert {name for name, _ in pairs} <= NEMO_ATTRIBUTES
    values = dict(pairs)
    assert values["recipe.model.config.moe_token_dispatcher_type"] == "flex"
    assert values["recipe.model.config.moe_enable_deepep"] is True
    assert values["recipe.trainer.strategy.expert_tensor_parallel_size"] == 1
    dense = dict(nemo.assignments(_launch(_plans()[0]))[0])
    assert "recipe.model.config.moe_token_dispatcher_type" not in dense


def test_torchtitan_writes_documented_keys_as_toml() -> None:
    tomllib = pytest.importorskip("tomllib")
    for plan in _plans():
        parsed = tomllib.loads(torchtitan.render(_launch(plan)))
        assert set(parsed) <= set(TORCHTITAN_KEYS)
        for section, keys in parsed.items():
            assert set(keys) <= TORCHTITAN_KEYS[section], set(keys) - TORCHTITAN_KEYS[section]
        par = parsed["parallelism"]
        assert par["tensor_parallel_degree"] == plan.tp
        dp = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
        assert dp == plan.dp
        assert parsed["activation_checkpoint"]["mode"] == plan.recompute.value
        if isinstance(plan, MoEPlan):
            assert par["expert_parallel_degree"] == 8


def _torchtitan_mesh_problems(par: dict[str, Any]) -> list[str]:
    """torchtitan v0.2.2's own checks of a [parallelism] section with experts
    (torchtitan/distributed/parallel_dims.py: ParallelDims._validate; build_mesh unflattens
    the sparse mesh (pp, dp_replicate, efsdp, ep, etp), efsdp = dp_shard x cp x tp //
    (etp x ep), which must be a whole positive count)."""
    shard, cp = par["data_parallel_shard_degree"], par["context_parallel_degree"]
    tp, ep = par["tensor_parallel_degree"], par["expert_parallel_degree"]
    etp = par["expert_tensor_parallel_degree"]
    found = []
    if ep > 1 and etp not in (1, tp):
        found.append("_validate: Currently we only support ETP=TP or ETP=1")
    if (shard * cp * tp) % (etp * ep) or shard * cp * tp < etp * ep:
        found.append(f"build_mesh: efsdp = {shard}x{cp}x{tp} / ({etp}x{ep}) is no whole count")
    return found


@pytest.mark.parametrize("zero", [0, 1, 3])
@pytest.mark.parametrize(("tp", "ep", "etp"), [(1, 8, 1), (2, 8, 1), (2, 4, 2), (4, 2, 2)])
def test_torchtitan_lays_experts_out_on_a_mesh_it_builds(zero: int, tp: int, ep: int,
                                                          etp: int) -> None:
    """ZeRO 0 with ep > 1 was written as data_parallel_shard_degree 1, on which torchtitan
    cannot lay the experts (efsdp = 1 x 1 x 1 / 8); an etp it cannot run (neither 1 nor tp)
    is a note."""
    tomllib = pytest.importorskip("tomllib")
    plan = MoEPlan(tp=tp, pp=1, dp=256 // tp, ep=ep, etp=etp, micro_batch=1, zero=zero,
                   sequence_parallel=tp > 1)
    text = torchtitan.render(_launch(plan, model="deepseek-v3"))
    par = tomllib.loads(text)["parallelism"]
    assert par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"] == plan.dp
    problems = _torchtitan_mesh_problems(par)
    assert par["expert_parallel_comm_backend"] == "deepep"  # the dispatch the model assumed
    if etp in (1, tp):
        assert problems == [], text
    else:
        assert problems and f"# note: etp {etp}: torchtitan runs expert tensor" in text


def _study(tmp_path: Path) -> tuple[str, str]:
    path = write(tmp_path, gpt3_narrow(name="export", virtual_stages=[1, 2], zero=[0, 1, 3]))
    url = f"sqlite:///{tmp_path / 'e.db'}"
    run = CliRunner().invoke(main, ["search", str(path), "--sampler", "exhaustive",
                                    "--storage", url, "--json"])
    assert run.exit_code == 0, run.stderr
    return url, str(path)


def _cli(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_the_spec_format_evaluates_to_the_trials_step_time(tmp_path: Path) -> None:
    url, _ = _study(tmp_path)
    best = json.loads(_cli("best", "export", "--storage", url, "--json"))["best"][0]
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(_cli("plan", "export", "--as", "spec", "--storage", url),
                     encoding="utf-8")
    evaluated = json.loads(_cli("evaluate", str(fixed), "--json"))
    assert evaluated["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-12)
    assert evaluated["plan"] == best["plan"]
    second = json.loads(_cli("best", "export", "--top", "2", "--storage", url, "--json"))
    number = second["best"][1]["trial"]
    other = _cli("plan", "export", "--trial", str(number), "--as", "megatron", "--storage", url)
    assert f"trial {number}" in other and "--tensor-model-parallel-size" in other


def test_explain_a_study_explains_its_best_plan(tmp_path: Path) -> None:
    url, _ = _study(tmp_path)
    best = json.loads(_cli("best", "export", "--storage", url, "--json"))["best"][0]
    out = json.loads(_cli("explain", "export", "--storage", url, "--json"))
    assert out["plan"] == best["plan"]
    assert out["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-12)
    missing = CliRunner().invoke(main, ["explain", "export", "--trial", "999", "--storage", url])
    assert missing.exit_code == 2 and "trial 999 has no result" in missing.stderr
    # the advice is a command to copy: it names the study (and the storage given)
    assert f"(`tuner export export --storage {url}` lists them)" in missing.stderr


def test_a_layers_model_has_only_the_spec_format(tmp_path: Path) -> None:
    data = {"name": "cnn", "model": "resnet-50",
            "training": {"global_batch": 256, "precision": "fp32"},
            "cluster": {"gpu": "v100-32gb", "nodes": [1, 2], "gpus_per_node": 8},
            "search": {"sampler": "exhaustive"}}
    path = write(tmp_path, data)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    _cli("search", str(path), "--storage", url)
    refused = CliRunner().invoke(main, ["plan", "cnn", "--as", "megatron", "--storage", url])
    assert refused.exit_code == 2 and "use --as spec" in refused.stderr
    assert "model: resnet-50" in _cli("plan", "cnn", "--storage", url)


def _torchtitan_stages(parallelism: dict[str, Any]) -> int:
    """Stages torchtitan makes of a [parallelism] section: v0.2.2
    torchtitan/distributed/pipeline_parallel.py, pipeline_llm (ceil((layers + first less +
    last less) / layers_per_stage); without layers_per_stage, pp for a single-stage schedule and
    2 x pp for an interleaved one)."""
    pp = parallelism["pipeline_parallel_degree"]
    per_stage = parallelism.get("pipeline_parallel_layers_per_stage")
    if per_stage is None:
        return pp * (1 if parallelism["pipeline_parallel_schedule"] == "1F1B" else 2)
    effective = (parallelism["layers"] + parallelism["pipeline_parallel_first_stage_less_layers"]
                 + parallelism["pipeline_parallel_last_stage_less_layers"])
    return -(-effective // per_stage)


@pytest.mark.parametrize("layers", [61, 80, 126, 7, 9, 33])
def test_torchtitan_makes_the_plans_number_of_stages(layers: int) -> None:
    """The layers per stage written make torchtitan build pp x virtual_stages stages, or a
    note says to split the model by hand (DeepSeek-V3's 61 layers at pp=2 were written as 30
    per stage: three stages, which torchtitan refuses)."""
    tomllib = pytest.importorskip("tomllib")
    base = _launch(_plans()[0])
    checked = 0
    for pp, vs in itertools.product((2, 3, 4, 8), (1, 2, 3, 4)):
        if pp * vs > layers:
            continue
        lp = dataclasses.replace(base, model=dataclasses.replace(base.model, layers=layers),
                                 plan=dataclasses.replace(base.plan, pp=pp, virtual_stages=vs))
        text = torchtitan.render(lp)
        par = tomllib.loads(text)["parallelism"]
        if "pipeline_parallel_layers_per_stage" not in par and vs > 2:
            assert "split the model yourself" in text
            continue
        assert _torchtitan_stages({**par, "layers": layers}) == pp * vs, (pp, vs, par)
        checked += 1
    assert checked > 0


def _megatron_layout(text: str) -> list[list[str]]:
    """Megatron Core's parse of a layout string (core_v0.15.0
    megatron/core/transformer/pipeline_parallel_layer_layout.py, parse_str_to_list): commas
    dropped, "(x)*n" then "x*n" unrolled, chunks split at "|"."""
    text = text.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        text = re.sub(pattern, lambda m: m.group(1) * int(m.group(2)), text)
    assert set(text) <= set("ELtm|"), text
    return [list(chunk) for chunk in text.split("|")]


@pytest.mark.parametrize(("pp", "vs"), [(2, 1), (4, 1), (8, 1), (16, 1), (4, 2), (8, 2)])
def test_an_uneven_pipeline_is_written_as_megatrons_layout(pp: int, vs: int) -> None:
    """DeepSeek-V3's 61 layers on chunks that divide neither 61 nor 63 (Megatron-LM refuses
    them without a layout): the layout passes Megatron Core's checks
    (PipelineParallelLayerLayout.__init__ and validate_layer_layout: chunks a multiple of pp,
    the embedding first, the loss last, every layer once, the MTP module with the loss), its
    fullest chunk holds the ceil(layers / chunks) the cost model sizes a stage by, and no other
    pipeline flag comes with it; NeMo sets the same layout."""
    model = model_catalog()["deepseek-v3"]
    plan = MoEPlan(tp=1, pp=pp, dp=256 // pp, ep=8, etp=1, micro_batch=1, virtual_stages=vs)
    lp = _launch(plan, model="deepseek-v3")
    items, _ = megatron.flags(lp)
    layout = items[items.index("--pipeline-model-parallel-layout") + 1]
    assert not {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
                "--account-for-embedding-in-pipeline-split"} & set(items)
    chunks = _megatron_layout(layout)
    assert len(chunks) == pp * vs
    flat = [c for chunk in chunks for c in chunk]
    assert flat[0] == "E" and flat[-1] == "L" and flat.count("E") == flat.count("L") == 1
    assert flat.count("t") == model.layers and flat.count("m") == model.mtp_layers == 1
    assert "m" in chunks[-1] and "t" not in flat[flat.index("m"):]
    assert max(chunk.count("t") for chunk in chunks) == -(-model.layers // (pp * vs))
    shell = shlex.split(megatron.render(lp).replace("\\\n", " "))
    assert shell[shell.index("--pipeline-model-parallel-layout") + 1] == layout
    assigned = dict(nemo.assignments(lp)[0])
    assert assigned["recipe.trainer.strategy.pipeline_model_parallel_layout"] == layout
    assert assigned["recipe.trainer.strategy.virtual_pipeline_model_parallel_size"] == (
        vs if vs > 1 else None)


def test_an_even_pipeline_has_no_layout() -> None:
    """Chunks that divide the layers (Llama 3 70B's 80), or the layers plus the embedding and
    the loss (DeepSeek-V3's 61 + 2 on 3 or 7 stages), split as before."""
    for plan in _plans():
        assert "--pipeline-model-parallel-layout" not in megatron.flags(_launch(plan))[0]
    for pp in (3, 7):
        lp = _launch(MoEPlan(tp=1, pp=pp, dp=8, ep=8, etp=1, micro_batch=1),
                     model="deepseek-v3")
        assert lp.layout is None and lp.split_ends
        assert "--account-for-embedding-in-pipeline-split" in megatron.flags(lp)[0]


def test_latent_attention_without_a_query_latent_writes_no_query_rank() -> None:
    """A model whose latent attention has no query latent (q_lora_rank left out) is built by
    Megatron-LM without --q-lora-rank (its default None: linear_q_proj) and by NeMo with
    q_lora_rank None; the other latent widths are written as before."""
    v3 = model_catalog()["deepseek-v3"]
    lite = dataclasses.replace(v3, attention=dataclasses.replace(v3.attention, q_lora_rank=0))
    plan = MoEPlan(tp=2, pp=8, dp=16, ep=32, etp=1, micro_batch=1)
    launch = dataclasses.replace(_launch(plan, model="deepseek-v3"), model=lite)
    items, _ = megatron.flags(launch)
    assert "--multi-latent-attention" in items and "--q-lora-rank" not in items
    assert items[items.index("--kv-lora-rank") + 1] == "512"
    assert dict(nemo.assignments(launch)[0])["recipe.model.config.q_lora_rank"] is None
    full, _ = megatron.flags(_launch(plan, model="deepseek-v3"))
    assert full[full.index("--q-lora-rank") + 1] == "1536"
