"""`tuner plan --as nemo|torchtitan` for a model of the user's own: NeMo's overrides write the
planned model whole as recipe.model.config's fields (the recipe's own model would otherwise be
trained), and torchtitan's config, which cannot set the model, says which flavor args it
needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomllib
from click.testing import CliRunner

from search_spaces import model_catalog
from tuner.cli import main
from tuner.export import torchtitan

from .specs import write
from .test_plan_export import NEMO_ATTRIBUTES

_OWN_20B = {"name": "own-20b", "layers": 48, "hidden": 6144, "heads": 48, "kv_heads": 8,
            "ffn_hidden": 16384, "gated_mlp": True, "vocab": 100352, "seq_len": 4096}
_OWN_MOE = {"name": "own-moe", "layers": 24, "hidden": 2048, "heads": 16, "kv_heads": 4,
            "ffn_hidden": 8192, "gated_mlp": True, "vocab": 100352, "seq_len": 4096,
            "experts": 32, "top_k": 4, "expert_ffn_hidden": 1024, "shared_experts": 1,
            "dense_layers": 2}


def _plan(tmp_path: Path, model: dict[str, Any], fmt: str, **plan: Any) -> str:
    data = {"name": model["name"], "model": model,
            "training": {"global_batch": 256, "tokens": 1e11, "precision": "bf16"},
            "cluster": {"gpu": "h100-80gb", "nodes": 4, "gpus_per_node": 8},
            "plan": {"micro_batch": [1], "zero": [1], **plan},
            "search": {"sampler": "exhaustive"}}
    url = f"sqlite:///{tmp_path / 'own.db'}"
    for args in (["search", str(write(tmp_path, data)), "--storage", url, "--json"],
                 ["plan", model["name"], "--as", fmt, "--storage", url]):
        run = CliRunner().invoke(main, args)
        assert run.exit_code == 0, run.stderr
    return run.stdout


def _assigned(text: str) -> dict[str, str]:
    pairs = [line.split(" = ", 1) for line in text.splitlines() if not line.startswith("#")]
    assert {name for name, _ in pairs} <= NEMO_ATTRIBUTES
    return {name.removeprefix("recipe.model.config."): value for name, value in pairs}


def test_nemo_builds_the_users_own_model(tmp_path: Path) -> None:
    config = _assigned(_plan(tmp_path, _OWN_20B, "nemo", tp=[8], pp=[2]))
    assert {k: config[k] for k in (
        "num_layers", "hidden_size", "num_attention_heads", "num_query_groups",
        "ffn_hidden_size", "kv_channels", "gated_linear_unit", "normalization",
        "add_bias_linear", "position_embedding_type", "share_embeddings_and_output_weights",
        "seq_length")} == {
        "num_layers": "48", "hidden_size": "6144", "num_attention_heads": "48",
        "num_query_groups": "8", "ffn_hidden_size": "16384", "kv_channels": "128",
        "gated_linear_unit": "True", "normalization": "'RMSNorm'", "add_bias_linear": "False",
        "position_embedding_type": "'rope'", "share_embeddings_and_output_weights": "False",
        "seq_length": "4096"}
    assert config["activation_func"] == "torch.nn.functional.silu"


def test_nemo_builds_the_users_own_experts(tmp_path: Path) -> None:
    config = _assigned(_plan(tmp_path, _OWN_MOE, "nemo", tp=[1], pp=[1], ep=[8]))
    assert {k: config[k] for k in (
        "num_moe_experts", "moe_router_topk", "moe_ffn_hidden_size",
        "moe_shared_expert_intermediate_size", "moe_layer_freq", "moe_grouped_gemm")} == {
        "num_moe_experts": "32", "moe_router_topk": "4", "moe_ffn_hidden_size": "1024",
        "moe_shared_expert_intermediate_size": "1024", "moe_layer_freq": "([0]*2+[1]*22)",
        "moe_grouped_gemm": "True"}
    assert eval(config["moe_layer_freq"]) == [0] * 2 + [1] * 22  # Python NeMo takes


def test_torchtitan_names_the_flavor_args_of_the_users_own_model(tmp_path: Path) -> None:
    text = _plan(tmp_path, _OWN_20B, "torchtitan", tp=[8], pp=[2])
    note = next(line for line in text.splitlines() if "is not in the catalog" in line)
    for arg in ("dim=6144", "n_layers=48", "n_heads=48", "n_kv_heads=8", "vocab_size=100352",
                "multiple_of=4096", "ffn_dim_multiplier=None", "norm_eps=1e-05",
                "rope_theta=10000"):
        assert arg in note, arg


def test_torchtitan_names_the_expert_args_of_the_users_own_experts(tmp_path: Path) -> None:
    text = _plan(tmp_path, _OWN_MOE, "torchtitan", tp=[1], pp=[1], ep=[8])
    note = next(line for line in text.splitlines() if "is not in the catalog" in line)
    for arg in ("num_experts=32", "num_shared_experts=1", "top_k=4", "moe_inter_dim=1024",
                "n_dense_layers=2"):
        assert arg in note, arg


def test_torchtitan_names_the_flavor_of_a_catalog_model(tmp_path: Path) -> None:
    model = {"base": "llama3-8b", "name": "llama3-8b"}
    text = _plan(tmp_path, model, "torchtitan", tp=[4], pp=[1])
    assert "# note: model" not in text
    assert tomllib.loads(text)["model"] == {"name": "llama3", "flavor": "8B"}


def test_torchtitan_notes_a_catalog_model_it_has_no_flavor_of(tmp_path: Path) -> None:
    model = {"base": "gpt3-1.3b", "name": "gpt3-1.3b"}
    text = _plan(tmp_path, model, "torchtitan", tp=[4], pp=[1])
    note = next(line for line in text.splitlines() if "has no flavor in torchtitan" in line)
    assert "dim=2048" in note and "a GeLU MLP" in note
    assert "model" not in tomllib.loads(text)


def test_torchtitan_flavors_build_the_catalog_models() -> None:
    """Each flavor's shape as torchtitan v0.2.2 states it (commit 73a0e69: llama3_configs,
    deepseekv3_args, qwen3_args, gptoss_configs and GptOssModelArgs' defaults): layers, width,
    heads, kv heads (MLA: heads), experts, top-k, expert width; the catalog model's agree."""
    flavors = {
        ("llama3", "8B"): (32, 4096, 32, 8, None, None, None),
        ("llama3", "70B"): (80, 8192, 64, 8, None, None, None),
        ("llama3", "405B"): (126, 16384, 128, 8, None, None, None),
        ("deepseek_v3", "671B"): (61, 7168, 128, 128, 256, 8, 2048),
        ("qwen3", "30B-A3B"): (48, 2048, 32, 4, 128, 8, 768),
        ("qwen3", "235B-A22B"): (94, 4096, 64, 4, 128, 8, 1536),
        ("gpt_oss", "20b"): (24, 2880, 64, 8, 32, 4, 2880),
        ("gpt_oss", "120b"): (36, 2880, 64, 8, 128, 4, 2880),
    }
    assert set(torchtitan.FLAVORS.values()) == set(flavors)
    for name, flavor in torchtitan.FLAVORS.items():
        m = model_catalog()[name]
        shape = (m.layers, m.hidden, m.heads, m.kv_heads, getattr(m, "experts", None),
                 getattr(m, "top_k", None), getattr(m, "expert_ffn_hidden", None))
        assert shape == flavors[flavor], name
