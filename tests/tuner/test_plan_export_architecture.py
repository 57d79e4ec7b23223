"""`tuner plan --as megatron` builds the model that was planned: read back with Megatron-LM's
defaults (megatron/training/arguments.py at core_v0.15.0, commit
0d7e02bd26d3eb347ad8d1bef625002babfa6df7), the command's flags give every catalog model's
norms, biases, positions, attention groups, MLP and dropout as the catalog states them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from cost import PlanRecord
from search_spaces import SpecError, model_catalog, parse_spec
from tuner.export import megatron

from .test_plan_export import MoEPlan, _launch
from .test_plan_export_megatron_rules import _command, _value

_DENSE = PlanRecord(tp=8, pp=2, dp=16, micro_batch=1, sequence_parallel=True)
_EXPERTS = MoEPlan(tp=1, pp=1, dp=256, ep=8, micro_batch=1)


def built(words: list[str]) -> dict[str, Any]:
    """The architecture Megatron-LM builds from `words`, each flag left out taking its
    core_v0.15.0 default (line numbers of arguments.py)."""
    has = set(words).__contains__
    heads = int(_value(words, "--num-attention-heads") or 0)
    position = _value(words, "--position-embedding-type") or "learned_absolute"  # 1588
    return {
        "normalization": _value(words, "--normalization") or "LayerNorm",  # 1628
        "norm_epsilon": float(_value(words, "--norm-epsilon") or 1e-5),  # 1631
        "linear_bias": not has("--disable-bias-linear"),  # 2191
        "position_embedding": position,
        "rotary_base": int(_value(words, "--rotary-base") or 10000) if position == "rope"
        else 0,  # 1598
        "qk_norm": has("--qk-layernorm"),  # 3023
        "dropout": float(_value(words, "--hidden-dropout") or 0.1) > 0  # 1876-1878
        and float(_value(words, "--attention-dropout") or 0.1) > 0,
        "gated_mlp": has("--swiglu"),
        "kv_heads": int(_value(words, "--num-query-groups") or 1)  # 1568-1570
        if has("--group-query-attention") else heads,
    }


def planned(m: Any) -> dict[str, Any]:
    """The same facts of a catalog model, in Megatron-LM's words (ALiBi, which it lacks,
    as the learned positions the command falls back to, with a note)."""
    position = {"learned": "learned_absolute", "rope": "rope", "alibi": "learned_absolute"}
    return {"normalization": {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}[m.normalization],
            "norm_epsilon": m.norm_epsilon, "linear_bias": m.linear_bias,
            "position_embedding": position[m.position_embedding],
            "rotary_base": m.rotary_base, "qk_norm": m.qk_norm, "dropout": m.dropout,
            "gated_mlp": m.gated_mlp,
            "kv_heads": m.heads if m.attention is not None else m.kv_heads}


@pytest.mark.parametrize("name", list(model_catalog()))
def test_the_command_builds_the_planned_architecture(name: str) -> None:
    m = model_catalog()[name]
    plan = _EXPERTS if m.kind == "moe" else _DENSE
    lp = _launch(plan, model=name)
    _, words = _command(megatron.render(lp))
    assert built(words) == planned(m)
    notes = megatron.flags(lp)[1]
    assert any("alibi has no Megatron-LM option" in n for n in notes) is (
        m.position_embedding == "alibi")


def test_llama3_is_written_as_llama3() -> None:
    """The smoke test's case: Llama 3 70B with RMSNorm, no biases, RoPE of base 500000 and
    no dropout, beside the SwiGLU and GQA flags it had."""
    _, words = _command(megatron.render(_launch(_DENSE, model="llama3-70b")))
    for flag, value in [("--normalization", "RMSNorm"), ("--position-embedding-type", "rope"),
                        ("--rotary-base", "500000"), ("--num-query-groups", "8"),
                        ("--hidden-dropout", "0.0"), ("--attention-dropout", "0.0")]:
        assert _value(words, flag) == value, flag
    assert {"--disable-bias-linear", "--swiglu", "--group-query-attention"} <= set(words)


def test_gpt3_keeps_megatrons_defaults() -> None:
    """GPT-3 is Megatron-LM's default layout: none of the architecture flags."""
    _, words = _command(megatron.render(_launch(_DENSE, model="gpt3-175b")))
    assert not {"--normalization", "--disable-bias-linear", "--position-embedding-type",
                "--rotary-base", "--swiglu", "--hidden-dropout"} & set(words)


def test_latent_attention_has_no_query_groups_and_rotary_positions() -> None:
    """DeepSeek-V3: no --group-query-attention beside --multi-latent-attention (MLA's keys and
    values are per head), and rotary positions, which multi-token prediction needs
    (arguments.py:1188: 'Multi-Token Prediction (MTP) is not supported with learned_absolute
    position embedding type')."""
    _, words = _command(megatron.render(_launch(_EXPERTS, model="deepseek-v3")))
    assert "--multi-latent-attention" in words
    assert "--group-query-attention" not in words and "--num-query-groups" not in words
    assert _value(words, "--position-embedding-type") == "rope"
    assert _value(words, "--mtp-num-layers") == "1"


def test_experts_and_dense_layers_with_different_biases_follow_the_experts() -> None:
    """One flag (add_bias_linear) sets every linear layer's bias, experts included: the command
    follows the experts and says what differs."""
    m = dataclasses.replace(model_catalog()["qwen3-30b-a3b"], linear_bias=True)
    lp = dataclasses.replace(_launch(_EXPERTS, model="qwen3-30b-a3b"), model=m)
    _, words = _command(megatron.render(lp))
    assert "--disable-bias-linear" in words
    assert any("the Megatron-LM model has every linear layer without" in n
               for n in megatron.flags(lp)[1])


def _spec(model: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "training": {"global_batch": 64},
            "cluster": {"gpu": "h100-80gb", "nodes": 1}, "plan": {"tp": 1, "pp": 1}}


def test_kv_heads_with_latent_attention_is_refused() -> None:
    """MLA has no key/value groups: kv_heads other than heads is refused with one line naming
    the field; the catalog's DeepSeek-V3 (kv_heads = heads) and one without kv_heads pass."""
    with pytest.raises(SpecError) as err:
        parse_spec(_spec({"base": "deepseek-v3", "kv_heads": 8}), file="s.yaml")
    line = str(err.value)
    assert "s.yaml" in line and "model.kv_heads" in line and "heads=128" in line
    assert len(line.splitlines()) == 1
    parse_spec(_spec("deepseek-v3"))
    parse_spec(_spec({"base": "deepseek-v3", "seq_len": 2048}))


def test_architecture_fields_default_from_the_family_and_take_overrides() -> None:
    """A model of one's own: a gated MLP is Llama's layout, else GPT-3's; each field given
    wins; a spec's values reach the model the export writes."""
    shape = {"name": "mine", "layers": 4, "hidden": 256, "heads": 8, "vocab": 1000,
             "seq_len": 128}
    gpt = parse_spec(_spec(shape)).model.to_model_spec()
    assert (gpt.normalization, gpt.linear_bias, gpt.position_embedding, gpt.rotary_base) == (
        "layernorm", True, "learned", 0)
    llama = parse_spec(_spec({**shape, "gated_mlp": True})).model.to_model_spec()
    assert (llama.normalization, llama.linear_bias, llama.position_embedding,
            llama.rotary_base) == ("rmsnorm", False, "rope", 10000)
    given = parse_spec(_spec({**shape, "normalization": "rmsnorm", "linear_bias": False,
                              "position_embedding": "rope", "rotary_base": 500000,
                              "qk_norm": True, "norm_epsilon": 1e-6})).model.to_model_spec()
    assert (given.normalization, given.linear_bias, given.position_embedding,
            given.rotary_base, given.qk_norm, given.norm_epsilon) == (
        "rmsnorm", False, "rope", 500000, True, 1e-6)
    with pytest.raises(SpecError, match=r"model\.normalization"):
        parse_spec(_spec({**shape, "normalization": "batchnorm"}))
