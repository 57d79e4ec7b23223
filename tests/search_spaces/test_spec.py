"""Study specs: the examples load and convert; choices list their values; every bad spec gives
one SpecError naming the file and the field."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

import cost
import cost.codec
from cost import GPUSpec
from cost.validity import precision_violation
from search_spaces import Choice, IntRange, SpecError, load_spec, parse_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "search_spaces" / "examples"


def _spec(**changes: Any) -> dict[str, Any]:
    """A small valid fixed spec (gpt3-1.3b on 2 x 8 A100), with top-level sections replaced."""
    data: dict[str, Any] = {
        "model": "gpt3-1.3b",
        "training": {"global_batch": 64, "tokens": "300e9", "precision": "bf16"},
        "cluster": {"gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 8},
        "plan": {"tp": 2, "pp": 2, "micro_batch": 2},
    }
    data.update(changes)
    return data


def _section(name: str, **changes: Any) -> dict[str, Any]:
    return _spec(**{name: {**_spec()[name], **changes}})


def _write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*-fixed.yaml")), ids=lambda p: p.stem)
def test_fixed_examples_are_fixed_and_feasible(example: Path) -> None:
    spec = load_spec(example)
    assert spec.is_fixed and spec.name == example.stem
    report = cost.evaluate(*spec.to_cost_inputs())
    assert bool(report.feasible)


@pytest.mark.parametrize("example", sorted(set(EXAMPLES.glob("*.yaml"))
                                            - set(EXAMPLES.glob("*-fixed.yaml"))),
                         ids=lambda p: p.stem)
def test_search_examples_load_with_choices(example: Path) -> None:
    spec = load_spec(example)
    assert not spec.is_fixed and spec.name == example.stem


def test_gpt3_example_is_korthikantis_configuration() -> None:
    model, cluster, training, plan = load_spec(EXAMPLES / "gpt3-175b-a100-fixed.yaml") \
        .to_cost_inputs()
    assert (model.name, cluster.gpu.name, int(cluster.gpus)) == ("gpt3-175b", "a100-80gb", 64)
    assert (plan.tp, plan.pp, plan.dp, plan.virtual_stages) == (8, 8, 0, 3)
    assert plan.recompute == cost.codec.encode("recompute", ["selective"])[0]
    assert plan.sequence_parallel
    assert training.precision == "fp16" and training.tokens == 300e9


def test_name_defaults_to_the_file_stem(tmp_path: Path) -> None:
    path = _write(tmp_path, yaml.safe_dump(_spec()), "my-study.yaml")
    assert load_spec(path).name == "my-study"
    assert load_spec(path).file == str(path)


def test_model_overrides_on_a_catalog_base() -> None:
    spec = parse_spec(_spec(model={"base": "llama3-70b", "seq_len": 4096}))
    model = spec.model.to_model_spec()
    assert (model.seq_len, model.hidden, model.kv_heads, model.gated_mlp) == (4096, 8192, 8, True)


def test_a_catalog_name_with_some_fields_points_to_base() -> None:
    """`{name: llama3-70b, seq_len: 4096}` reads as a model of one's own missing most of its
    fields; one line says to write `base:` (a full mapping under a catalog name stays a model
    of one's own)."""
    with pytest.raises(SpecError, match=r"llama3-70b is a catalog model; .*`model: \{base: "
                                        r"llama3-70b, \.\.\.\}`") as caught:
        parse_spec(_spec(model={"name": "llama3-70b", "seq_len": 4096}))
    assert "model.name" in str(caught.value)
    full = {"name": "llama3-70b", "layers": 4, "hidden": 256, "heads": 4, "vocab": 1000,
            "seq_len": 512}
    assert parse_spec(_spec(model=full)).model.to_model_spec().layers == 4


def test_model_as_a_full_mapping() -> None:
    spec = parse_spec(_spec(model={"name": "tiny", "layers": 4, "hidden": 256, "heads": 4,
                                   "vocab": 1000, "seq_len": 512}))
    model = spec.model.to_model_spec()
    assert (model.kv_heads, model.ffn_hidden) == (4, 1024)


def test_cluster_defaults_come_from_the_gpu() -> None:
    _, cluster, _, _ = parse_spec(_spec()).to_cost_inputs()
    gpu = cluster.gpu
    assert cluster.scale_up_bandwidth_bytes_per_s == gpu.scale_up_bandwidth_bytes_per_s
    assert cluster.price_usd_per_gpu_hour == gpu.price_usd_per_hour


def test_cluster_overrides_with_units() -> None:
    spec = parse_spec(_section("cluster", scale_out_bandwidth="400 Gbit/s", pricing="spot",
                               expansion={"capacity": "512 GiB", "bandwidth": "64 GB/s"}))
    _, cluster, _, _ = spec.to_cost_inputs()
    assert cluster.scale_out_bandwidth_bytes_per_s == 50e9
    assert cluster.expansion_capacity_bytes == 512 * 2**30
    assert cluster.price_usd_per_gpu_hour == cluster.gpu.spot_price_usd_per_hour


def test_custom_gpu_with_a_single_peak() -> None:
    gpu = {"name": "my-gpu", "peak_flops": "500 TFLOP/s", "hbm_capacity": "96 GiB",
           "hbm_bandwidth": "4 TB/s", "price_per_hour": 2.5}
    _, cluster, _, _ = parse_spec(_section("cluster", gpu=gpu)).to_cost_inputs()
    assert cluster.gpu.peak_for("bf16") == 500e12
    assert cluster.gpu.hbm_capacity_bytes == 96 * 2**30


def test_a_gpu_states_its_compute_capability() -> None:
    """DeepEP's internode dispatch needs SM90 (cost.deepep): a GPU of one's own had no compute
    capability, so it was taken to run it; now it may say, and a base GPU's is kept unless
    replaced."""
    own = {"name": "my-a100", "peak_flops": "312 TFLOP/s", "hbm_capacity": "80 GiB",
           "hbm_bandwidth": "2 TB/s", "compute_capability": 8.0}
    gpu_of = {name: parse_spec(_section("cluster", gpu=gpu)).to_cost_inputs()[1].gpu
              for name, gpu in (("own", own), ("base", {"base": "h100-80gb"}),
                                ("replaced", {"base": "h100-80gb", "name": "h100-slow",
                                              "compute_capability": 8.9}))}
    assert gpu_of["own"].compute_capability == 8.0
    assert gpu_of["base"].compute_capability == 9.0
    assert gpu_of["replaced"].compute_capability == 8.9
    moe = _spec(model="mixtral-8x7b", stack={"ep_dedup": True},
                cluster={"gpu": own, "nodes": 2, "gpus_per_node": 8},
                plan={"tp": 1, "pp": 1, "ep": 8})
    with pytest.raises(SpecError) as err:
        parse_spec(moe)
    assert err.value.field == "stack.ep_dedup" and "my-a100 is SM80" in err.value.message
    with pytest.raises(SpecError) as err:
        parse_spec(_section("cluster", gpu={**own, "compute_capability": 80}))
    assert err.value.field == "cluster.gpu.compute_capability"
    # stated, it is part of the study's problem (its spec's dump); a study stored before the
    # field existed continues: tests/studies/test_added_fields.py
    dumped = parse_spec(_section("cluster", gpu=own)).model_dump(mode="json")
    assert dumped["cluster"]["gpu"]["compute_capability"] == 8.0


@pytest.mark.parametrize(("gpu", "says"), [
    ({"name": "h100-80gb", "peak_flops": "1200 TFLOP/s", "hbm_capacity": "144 GiB",
      "hbm_bandwidth": "5 TB/s"}, "write base: h100-80gb instead of name"),
    ({"base": "h100-80gb", "name": "h200"}, "leave name out (it is then h100-80gb)"),
])
def test_a_gpu_of_your_own_may_not_take_a_catalog_gpus_name(gpu: Any, says: str) -> None:
    """By name a calibration profile's GEMM fraction for the catalog GPU applied to a
    1200 TFLOP/s GPU of the user's, and listings showed it as the H100."""
    with pytest.raises(SpecError) as err:
        parse_spec(_section("cluster", gpu=gpu))
    assert err.value.field.endswith("name") and "is a catalog GPU's" in err.value.message
    assert says in err.value.message
    same = parse_spec(_section("cluster", gpu={"base": "h100-80gb", "name": "h100-80gb"}))
    assert same.to_cost_inputs()[1].gpu.name == "h100-80gb"


@pytest.mark.parametrize("peak", ["2 PFLOP/s", {"fp8": "2 PFLOP/s"}])
def test_a_custom_gpus_fp8_peak_implies_its_bf16_one(peak: Any) -> None:
    """fp8 training runs attention and the output layer in bf16: a custom GPU given only its
    fp8 rate gets half of it for bf16 (FP8_OVER_BF16), and a fixed fp8 plan on it has a
    finite step time (it had none: the attention's bf16 rate was 0)."""
    gpu = {"name": "my-gpu", "peak_flops": peak, "hbm_capacity": "192 GiB",
           "hbm_bandwidth": "8 TB/s"}
    data = _section("cluster", gpu=gpu)
    data["training"] = {**data["training"], "precision": "fp8"}
    model, cluster, training, plan = parse_spec(data).to_cost_inputs()
    assert cluster.gpu.peak_for("fp8") == 2e15 and cluster.gpu.peak_for("bf16") == 1e15
    assert math.isfinite(float(cost.evaluate(model, cluster, training, plan).step_time_s))


def test_an_fp8_gpu_without_a_bf16_rate_is_refused() -> None:
    gpu = GPUSpec(name="fp8-only", peak_flops_per_s={"fp8": 2e15}, hbm_capacity_bytes=1e11,
                  hbm_bandwidth_bytes_per_s=8e12)
    message = precision_violation(gpu.peak_flops_per_s, gpu.name, "fp8")
    assert message is not None and "no bf16 one" in message


def test_choices_parse_and_list_their_values() -> None:
    plan = {"tp": [1, 2, 4, 8], "pp": {"min": 1, "max": 64, "powers_of_two": True},
            "micro_batch": {"min": 1, "max": 7, "step": 2}, "dp": {"min": 1, "max": 4, "log": True},
            "recompute": ["none", "selective", "full"], "sequence_parallel": [True, False]}
    spec = parse_spec(_spec(plan=plan, cluster={"gpu": ["a100-80gb", "h100-80gb"], "nodes": 2}))
    assert isinstance(spec.plan.tp, Choice) and spec.plan.tp.values() == (1, 2, 4, 8)
    assert isinstance(spec.plan.pp, IntRange)
    assert spec.plan.pp.values() == (1, 2, 4, 8, 16, 32, 64)
    assert isinstance(spec.plan.micro_batch, IntRange)
    assert spec.plan.micro_batch.values() == (1, 3, 5, 7)
    assert isinstance(spec.plan.dp, IntRange) and spec.plan.dp.values() == (1, 2, 3, 4)
    assert isinstance(spec.cluster.gpu, Choice)
    assert not spec.is_fixed
    assert spec.choice_fields()[:2] == ["plan.tp", "plan.pp"]


def test_powers_of_two_range_inside_odd_bounds() -> None:
    assert IntRange(min=3, max=100, powers_of_two=True).values() == (4, 8, 16, 32, 64)


def test_a_spec_with_choices_cannot_be_evaluated() -> None:
    spec = parse_spec(_section("plan", tp=[1, 2]), file="s.yaml")
    with pytest.raises(SpecError) as caught:
        spec.to_cost_inputs()
    assert (caught.value.file, caught.value.field) == ("s.yaml", "plan.tp")


def test_objective_constraints_search() -> None:
    spec = parse_spec(_spec(objective=["time_to_train", "cost"],
                            constraints={"max_cost": "2e6", "max_gpus": 1024},
                            search={"sampler": "nsga2", "trials": 50, "seed": 0,
                                    "timeout": "2 h"}))
    assert spec.objective == ("time_to_train", "cost")
    assert spec.constraints.max_cost == 2e6 and spec.search.timeout == 7200.0


def test_sync_and_parameter_servers_are_stored() -> None:
    spec = parse_spec(_section("plan", sync="parameter_server", parameter_servers=4))
    assert (spec.plan.sync, spec.plan.parameter_servers) == ("parameter_server", 4)
    spec.to_cost_inputs()


BAD_SPECS: list[tuple[str, dict[str, Any], str, str]] = [
    ("unknown field", _section("plan", foo=3), "plan.foo", "known fields"),
    ("typo", _section("plan", tpp=2), "plan.tpp", "did you mean 'tp'"),
    ("unknown top-level", _spec(sampler="tpe"), "sampler", "top level"),
    ("bytes as bandwidth", _section("cluster", gpu={
        "name": "x", "peak_flops": "900 TFLOP/s", "hbm_capacity": "80 GB/s",
        "hbm_bandwidth": "3 TB/s"}), "cluster.gpu.hbm_capacity", "bandwidth"),
    ("bandwidth as bytes", _section("cluster", scale_up_bandwidth="80 GiB"),
     "cluster.scale_up_bandwidth", "size in bytes"),
    ("tp and heads", _section("plan", tp=3, dp=1, pp=1), "plan", "does not divide heads"),
    ("gpu not in catalog", _section("cluster", gpu="a100"), "cluster.gpu", "a100-80gb"),
    ("model not in catalog", _spec(model="gpt5"), "model", "choose one of"),
    ("base not in catalog", _spec(model={"base": "llama9"}), "model.base", "llama3-70b"),
    ("negative nodes", _section("cluster", nodes=-8), "cluster.nodes", "greater than"),
    ("zero hbm", _section("cluster", gpu={"name": "x", "peak_flops": 1e15, "hbm_capacity": 0,
                                          "hbm_bandwidth": 1e12}),
     "cluster.gpu.hbm_capacity", "0 must be a finite number above 0"),
    ("too many gpus", _section("cluster", nodes=500_000), "cluster.nodes", "1,000,000"),
    ("choice with a bad value", _section("plan", tp=[1, 0]), "plan.tp[1]", "greater than"),
    ("range with a typo", _section("plan", pp={"min": 1, "max": 8, "stepp": 2}), "plan.pp.stepp",
     "did you mean 'step'"),
    ("range upside down", _section("plan", pp={"min": 8, "max": 1}), "plan.pp", "swap"),
    ("bad precision", _section("training", precision="bf17"), "training.precision", "'bf16'"),
    ("precision the gpu lacks", _section("cluster", gpu="v100-32gb"), "training.precision",
     "no bf16 support"),
    ("missing field", _spec(training={"tokens": 1e9}), "training.global_batch", "missing"),
    ("bad recompute", _section("plan", recompute="some"), "plan.recompute", "'selective'"),
    ("zero out of range", _section("plan", zero=4), "plan.zero", "less than or equal to 3"),
    ("string count", _section("plan", tp="8"), "plan.tp", "valid integer"),
    ("spot without price", _section("cluster", gpu="gb200", pricing="spot", gpus_per_node=4),
     "cluster.pricing", "spot"),
    ("twice the same objective", _spec(objective=["cost", "cost"]), "objective", "twice"),
    ("unknown model kind", _spec(model={"name": "r", "kind": "cnn", "layers": 4, "hidden": 8,
                                        "heads": 1, "vocab": 1, "seq_len": 1}),
     "model.kind", "kind"),
    ("layers model without layers", _spec(model={"name": "r", "kind": "layers", "layers": 4}),
     "model.layers", "must be a list"),
    ("overlap over one", _spec(stack={"tp_overlap": 1.5}), "stack.tp_overlap",
     "less than or equal to 1"),
    ("flash attention as a string", _spec(stack={"flash_attention": "no"}),
     "stack.flash_attention", "boolean"),
    ("unknown stack field", _spec(stack={"flash": False}), "stack.flash", "known fields"),
    ("resharding sometimes", _spec(stack={"reshard_after_forward": "sometimes"}),
     "stack.reshard_after_forward", "unless_pipelined"),
    ("an unknown selective policy", _spec(stack={"selective_recompute": "full"}),
     "stack.selective_recompute", "'attention' or 'op'"),
    ("negative offload", _spec(stack={"activation_offload_layers": -1}),
     "stack.activation_offload_layers", "greater than or equal to 0"),
    ("an unknown offload module", _spec(stack={"offload_modules": ["router"]}),
     "stack.offload_modules[0]", "'expert_fc1' or 'moe_act'"),
]


@pytest.mark.parametrize(("data", "field", "words"), [b[1:] for b in BAD_SPECS],
                         ids=[b[0] for b in BAD_SPECS])
def test_bad_specs_name_the_field(data: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(data, file="bad.yaml").to_cost_inputs()
    err = caught.value
    assert (err.file, err.field) == ("bad.yaml", field), str(err)
    assert words in err.message
    assert str(err).startswith(f"bad.yaml: {field}: ") and "\n" not in str(err)


def test_unknown_gpu_message_lists_the_catalog() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_section("cluster", gpu="a100"), file="spec.yaml")
    assert str(caught.value).startswith("spec.yaml: cluster.gpu: unknown GPU 'a100'")
    assert "a100-40gb" in str(caught.value) and "h100-80gb" in str(caught.value)


def test_a_name_in_other_case_is_meant_as_that_name() -> None:
    """'H100-80GB' and 'DeepSeek-V3' (as vendors write them) suggest the one name they are,
    not the three closest spellings (h100-80gb, a100-80gb, a100-40gb)."""
    with pytest.raises(SpecError) as caught:
        parse_spec(_section("cluster", gpu="H100-80GB"), file="spec.yaml")
    assert "unknown GPU 'H100-80GB'; did you mean h100-80gb? choose" in str(caught.value)


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "model: gpt3-1.3b\ntraining: {global_batch: 8\ncluster: x\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert caught.value.file == str(path) and caught.value.field.startswith("line 3")
    assert "malformed YAML" in caught.value.message


def test_python_yaml_tags_are_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = _write(tmp_path, f"model: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(SpecError, match=r"python/object/apply:os\.system") as caught:
        load_spec(path)
    assert caught.value.field.startswith("line 1")
    assert not marker.exists()


def test_a_local_yaml_tag_is_named(tmp_path: Path) -> None:
    """Not 'YAML tag this tag is not allowed': a tag outside yaml.org's (`!mine`) is named."""
    with pytest.raises(SpecError, match="YAML tag !mine is not allowed") as caught:
        load_spec(_write(tmp_path, "model: !mine gpt3-1.3b\n"))
    assert caught.value.field == "line 1, column 8"


@pytest.mark.parametrize("text", ["a: " + "[" * 3000 + "]" * 3000,
                                  "".join(" " * i + "a:\n" for i in range(3000))])
def test_a_document_nested_past_pythons_recursion_limit_is_one_error(tmp_path: Path,
                                                                    text: str) -> None:
    """PyYAML composes nodes recursively: a RecursionError and a traceback (exit 1)."""
    with pytest.raises(SpecError, match="nested too deeply") as caught:
        load_spec(_write(tmp_path, text + "\n"))
    assert caught.value.file.endswith(".yaml")


def test_a_spec_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"YAML mapping.*got a list"):
        load_spec(_write(tmp_path, "- just\n- a list\n"))
    with pytest.raises(SpecError, match="got an empty document"):  # not "got NoneType"
        load_spec(_write(tmp_path, "# nothing yet\n", name="empty.yaml"))


def test_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_spec(tmp_path / "nothere.yaml")


def test_specs_are_frozen() -> None:
    spec = parse_spec(_spec())
    with pytest.raises(ValueError, match="frozen"):
        spec.name = "x"  # type: ignore[misc]


def test_a_network_described_by_its_layers_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "mlp.yaml"
    path.write_text(
        "model:\n  name: mlp\n  kind: layers\n  layers:\n"
        "    - {name: fc1, forward_flops: 2e6, params: 1e6, activation_bytes: '4 kB'}\n"
        "    - {name: fc2, forward_flops: 2e6, params: 1e6, activation_bytes: 4096}\n"
        "training: {global_batch: 256, precision: fp32}\n"
        "cluster: {gpu: t4, nodes: 2, gpus_per_node: 1}\n"
        "plan: {micro_batch: 128, sync: ring}\n", encoding="utf-8")
    model, cluster, training, plan = load_spec(path).to_cost_inputs()
    assert isinstance(model, cost.LayersModel)
    assert model.params == 2e6 and model.layers[0].activation_bytes == 4000.0
    report = cost.evaluate(model, cluster, training, plan)
    assert bool(report.feasible) and float(report.step.dp_comm_s) > 0


def test_built_in_resnets_match_their_papers() -> None:
    from search_spaces.networks import network_catalog

    nets = network_catalog()
    assert nets["resnet-50"].params == pytest.approx(25.56e6, rel=0.01)
    assert nets["resnet-101"].params == pytest.approx(44.55e6, rel=0.01)
    assert nets["resnet-32"].params == pytest.approx(0.46e6, rel=0.02)
    assert nets["resnet-50"].forward_flops / 2 == pytest.approx(3.86e9, rel=0.03)


def test_a_stack_sets_the_software_features_over_the_profile(tmp_path: Path) -> None:
    """`stack` names what the software has (flash attention, overlaps); the calibration
    profile's fitted fields stay, and fields the stack leaves out keep the profile's value."""
    (tmp_path / "p.yaml").write_text("efficiency: {gemm_fraction: 0.5, dp_overlap: 0.3}\n")
    data = _spec(stack={"flash_attention": False, "tp_overlap": 0}, calibration="p.yaml")
    path = _write(tmp_path, yaml.safe_dump(data))
    eff = load_spec(path).efficiency()
    assert (eff.flash_attention, eff.tp_overlap) == (False, 0.0)
    assert (eff.gemm_fraction, eff.dp_overlap) == (0.5, 0.3)
    assert parse_spec(_spec()).efficiency() == cost.DEFAULT_EFFICIENCY


def test_mxfp8_is_refused_on_a_gpu_before_blackwell() -> None:
    """MXFP8's block scales are Blackwell's tensor cores (Transformer Engine refuses it below
    compute capability 10.0): fp8 training with `stack.fp8_recipe: mxfp8` on an H100, fixed
    or among a cluster's choices, is one line naming the field; on a B200, in bf16 training
    (no fp8 GEMM) or on a GPU of one's own whose compute capability is not stated, it runs."""
    def spec(gpu: Any, precision: str = "fp8") -> dict[str, Any]:
        return _spec(training={"global_batch": 64, "tokens": "300e9", "precision": precision},
                     cluster={"gpu": gpu, "nodes": 2, "gpus_per_node": 8},
                     stack={"fp8_recipe": "mxfp8"})

    for gpu in ("h100-80gb", ["b200", "h200"]):
        with pytest.raises(SpecError) as err:
            parse_spec(spec(gpu))
        assert err.value.field == "stack.fp8_recipe" and "is SM90" in err.value.message
    own = {"name": "mine", "peak_flops": {"bf16": "1000 TFLOP/s", "fp8": "2000 TFLOP/s"},
           "hbm_capacity": "80 GiB", "hbm_bandwidth": "3 TB/s"}
    for ok in (spec("b200"), spec("h100-80gb", "bf16"), spec(own)):
        parse_spec(ok)
    current = spec("h100-80gb")
    parse_spec({**current, "stack": {"fp8_recipe": "current"}})


def test_latent_attention_without_a_query_latent() -> None:
    """DeepSeek-V2-Lite's config has q_lora_rank null: queries come straight from the hidden
    state (2048 x 16 heads x 192), no query latent or its norm. Left out, the spec takes it
    so (it was refused as a missing field) and counts the published 15.7B parameters
    (HF deepseek-ai/DeepSeek-V2-Lite: 15,706,484,224)."""
    mla = {"kind": "mla", "kv_lora_rank": 512, "qk_head_dim": 128, "qk_rope_head_dim": 64,
           "v_head_dim": 128}
    lite = {"name": "dsv2-lite", "layers": 27, "hidden": 2048, "heads": 16, "vocab": 102400,
            "seq_len": 4096, "gated_mlp": True, "ffn_hidden": 10944, "experts": 64, "top_k": 6,
            "expert_ffn_hidden": 1408, "shared_experts": 2, "dense_layers": 1, "attention": mla}
    spec = _spec(model=lite, cluster={"gpu": "h100-80gb", "nodes": 1, "gpus_per_node": 8},
                 plan={"tp": 2, "pp": 1, "ep": 8, "sequence_parallel": True})
    model = parse_spec(spec).to_cost_inputs()[0]
    assert model.parameters() == 15_706_484_224  # type: ignore[attr-defined]
    with_null = parse_spec({**spec, "model": {**lite, "attention": {**mla, "q_lora_rank": None}}})
    assert with_null.to_cost_inputs()[0].parameters() == 15_706_484_224  # type: ignore[attr-defined]
