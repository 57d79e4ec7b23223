"""The spec boundary of issue 15: keys given twice, files that are not UTF-8 text, every error
at once, misspellings, training lengths under one step, GPUs from a catalog base, node-wide
prices and bandwidths, memory_headroom."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from search_spaces import (
    SpecError,
    SpecErrors,
    gpu_catalog,
    load_spec,
    parse_headroom,
    parse_spec,
)
from tests.hostile_specs import VALID

_GIB = 2.0**30


def _spec(**sections: Any) -> dict[str, Any]:
    data = copy.deepcopy(VALID)
    for name, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(name), dict):
            data[name].update(value)
        else:
            data[name] = value
    return data


def _cluster(**cluster: Any) -> Any:
    return parse_spec(_spec(cluster=cluster), file="s.yaml").to_cost_inputs()[1]


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("model: gpt3-1.3b\ntraining: {global_batch: 64}\n"
                    "cluster:\n  gpu: a100-80gb\n  nodes: 2\n  nodes: 4\n", encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert caught.value.field == "line 6, column 3"
    assert "key 'nodes' is given twice (lines 5 and 6); keep one" in caught.value.message


def test_a_section_given_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("model: gpt3-1.3b\nmodel: gpt3-2.7b\n", encoding="utf-8")
    with pytest.raises(SpecError, match="key 'model' is given twice"):
        load_spec(path)


@pytest.mark.parametrize(("content", "words"), [
    (bytes(range(256)) * 4, "a binary file"),
    ("model: gpt3-1.3b  # caf\u00e9\n".encode("latin-1"), "not UTF-8 text"),
])
def test_a_file_that_is_not_utf8_text_is_one_spec_error(tmp_path: Path, content: bytes,
                                                        words: str) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(content)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert caught.value.file == str(path) and words in caught.value.message
    assert len(str(caught.value).splitlines()) == 1


def test_every_error_of_a_spec_is_reported_at_once() -> None:
    data = _spec(training={"global_batch": -1, "precision": "bf17"},
                 cluster={"nodes": 0, "scale_out_bandwidth": 400},
                 plan={"recompute": "selectiv", "foo": 1})
    with pytest.raises(SpecErrors) as caught:
        parse_spec(data, file="s.yaml")
    fields = [e.field for e in caught.value.errors]
    assert fields == ["training.global_batch", "training.precision", "cluster.nodes",
                      "cluster.scale_out_bandwidth", "plan.recompute", "plan.foo"]
    lines = str(caught.value).splitlines()
    assert len(lines) == 6 and all(line.startswith("s.yaml: ") for line in lines)
    assert caught.value.field == "training.global_batch"  # read as one error: the first
    assert "did you mean 'selective'?" in lines[4]


def test_a_misspelt_required_section_is_one_line_with_the_name_meant() -> None:
    data = _spec()
    data["clustr"] = data.pop("cluster")
    with pytest.raises(SpecError) as caught:
        parse_spec(data, file="s.yaml")
    assert not isinstance(caught.value, SpecErrors)  # no second line "missing 'cluster'"
    assert caught.value.field == "clustr"
    assert "did you mean 'cluster' (required, and missing)?" in caught.value.message


def test_a_misspelt_field_gets_a_did_you_mean() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(cluster={"scale_out_bandwith": "400 Gbit/s"}), file="s.yaml")
    assert "did you mean 'scale_out_bandwidth'?" in caught.value.message


@pytest.mark.parametrize(("tokens", "meant"), [(300, "300e9 (billion) or 300e12"),
                                               ("15", "15e9 (billion) or 15e12")])
def test_tokens_fewer_than_one_step_are_refused(tokens: Any, meant: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(training={"tokens": tokens}), file="s.yaml")
    assert caught.value.field == "training.tokens" and meant in caught.value.message
    assert "64 sequences x 2,048 = 131,072 tokens" in caught.value.message


def test_a_gpu_from_a_catalog_base_takes_the_users_figures() -> None:
    cluster = _cluster(gpu={"base": "h100-80gb", "price_per_hour": 2.10,
                            "spot_price_per_hour": 0.9, "hbm_capacity": "94 GiB"})
    base, gpu = gpu_catalog()["h100-80gb"], cluster.gpu
    assert gpu.name == "h100-80gb" and gpu.hbm_capacity_bytes == 94 * _GIB
    assert gpu.price_usd_per_hour == 2.10 and gpu.spot_price_usd_per_hour == 0.9
    assert cluster.price_usd_per_gpu_hour == 2.10
    assert gpu.hbm_bandwidth_bytes_per_s == base.hbm_bandwidth_bytes_per_s  # kept
    assert gpu.gemm_fraction == base.gemm_fraction
    assert gpu.sources["hbm_capacity"] == "user spec"
    spot = _cluster(gpu={"base": "h100-80gb", "spot_price_per_hour": 0.9}, pricing="spot")
    assert spot.price_usd_per_gpu_hour == 0.9


def test_a_base_peak_replaces_only_the_training_precision() -> None:
    cluster = _cluster(gpu={"base": "h100-80gb", "name": "h100-slow",
                            "peak_flops": "700 TFLOP/s"})
    assert cluster.gpu.name == "h100-slow"
    assert cluster.gpu.peak_flops_per_s["bf16"] == 700e12
    assert cluster.gpu.peak_flops_per_s["fp8"] == gpu_catalog()["h100-80gb"].peak_for("fp8")


def test_an_unknown_base_and_an_incomplete_custom_gpu_name_what_to_give() -> None:
    with pytest.raises(SpecError, match="unknown GPU 'h100'; did you mean") as caught:
        parse_spec(_spec(cluster={"gpu": {"base": "h100"}}), file="s.yaml")
    assert caught.value.field == "cluster.gpu.base"
    with pytest.raises(SpecError, match="needs peak_flops, hbm_bandwidth") as caught:
        parse_spec(_spec(cluster={"gpu": {"name": "x", "hbm_capacity": "8 GiB"}}),
                   file="s.yaml")
    assert caught.value.field == "cluster.gpu.peak_flops"


_CUSTOM = {"name": "x", "peak_flops": "900 TFLOP/s", "hbm_capacity": "80 GiB",
           "hbm_bandwidth": "3 TB/s"}


@pytest.mark.parametrize("money", [{"objective": "cost"},
                                   {"objective": ["time_to_train", "cost"]},
                                   {"constraints": {"max_cost": 1e6}},
                                   {"constraints": {"max_hourly_cost": 100}}])
def test_a_gpu_without_a_price_is_refused_where_money_counts(money: dict[str, Any]) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(cluster={"gpu": dict(_CUSTOM)}, **money), file="s.yaml")
    assert caught.value.field == "cluster.gpu.price_per_hour"
    assert "GPU 'x' has no price" in caught.value.message
    listed = _spec(cluster={"gpu": ["a100-80gb", dict(_CUSTOM)]}, **money)
    with pytest.raises(SpecError) as caught:
        parse_spec(listed, file="s.yaml")
    assert caught.value.field == "cluster.gpu[1].price_per_hour"


@pytest.mark.parametrize("gpu", ["h800", {"base": "h800", "hbm_capacity": "96 GiB"}])
def test_a_catalog_gpu_without_a_list_price_has_none(gpu: Any) -> None:
    """The H800 is sold in no public cloud: the catalog gives it no price, which is no price
    (NaN, refused where money counts), not $0 that wins every cost comparison."""
    assert math.isnan(gpu_catalog()["h800"].price_usd_per_hour)
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(cluster={"gpu": gpu}, objective="cost"), file="s.yaml")
    assert caught.value.field == "cluster.gpu.price_per_hour"
    assert "GPU 'h800' has no price" in caught.value.message
    priced = parse_spec(_spec(cluster={"gpu": {"base": "h800", "price_per_hour": 2.0}},
                              objective="cost"), file="s.yaml")
    assert tuple(priced.objective) == ("cost",)


def test_a_gpu_without_a_price_is_fine_for_throughput_and_has_no_price() -> None:
    cluster = _cluster(gpu=dict(_CUSTOM))
    assert math.isnan(cluster.price_usd_per_gpu_hour)
    priced = parse_spec(_spec(cluster={"gpu": dict(_CUSTOM), "price_per_node_hour": 40.0},
                              objective="cost"), file="s.yaml")
    assert priced.to_cost_inputs()[1].price_usd_per_gpu_hour == 5.0


def test_node_prices_are_shared_by_the_nodes_gpus() -> None:
    assert _cluster(price_per_node_hour=20.0).price_usd_per_gpu_hour == 2.5
    spot = _cluster(price_per_node_hour=20.0, spot_price_per_node_hour=6.0, pricing="spot")
    assert spot.price_usd_per_gpu_hour == 0.75
    four = _cluster(price_per_node_hour=20.0, gpus_per_node=4)
    assert four.price_usd_per_gpu_hour == 5.0


@pytest.mark.parametrize(("cluster", "field", "words"), [
    ({"price_per_node_hour": 20.0, "pricing": "spot"}, "cluster.spot_price_per_node_hour",
     "with spot servers give spot_price_per_node_hour too"),
    ({"price_per_node_hour": 20.0, "pricing": ["on_demand", "spot"]},
     "cluster.spot_price_per_node_hour", "price_per_node_hour is the on-demand price"),
    ({"price_per_node_hour": 20.0, "gpu": ["a100-80gb", "h100-80gb"]},
     "cluster.price_per_node_hour", "would price the nodes of 2 GPU types the same"),
    ({"scale_out_bandwidth": "400 Gbit/s", "scale_out_bandwidth_per_node": "3.2 Tbit/s"},
     "cluster.scale_out_bandwidth_per_node", "give the scale-out bandwidth once"),
    ({"gpu": ["h100-80gb", {"base": "h100-80gb", "price_per_hour": 2.0}]}, "cluster.gpu",
     "two GPUs are named 'h100-80gb'"),
])
def test_contradictory_node_fields_are_refused(cluster: dict[str, Any], field: str,
                                               words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(cluster=cluster), file="s.yaml")
    assert caught.value.field == field and words in caught.value.message


def test_a_nodes_scale_out_bandwidth_is_divided_among_its_gpus() -> None:
    assert _cluster(scale_out_bandwidth_per_node="3.2 Tbit/s") \
        .scale_out_bandwidth_bytes_per_s == 50e9
    four = _cluster(scale_out_bandwidth_per_node="100 Gbit/s", gpus_per_node=4)
    assert four.scale_out_bandwidth_bytes_per_s == pytest.approx(100e9 / 8 / 4)


def test_a_per_node_bandwidth_may_be_a_choice() -> None:
    from search_spaces import Space

    data = _spec(cluster={"scale_out_bandwidth_per_node": ["800 Gbit/s", "3.2 Tbit/s"]})
    space = Space.from_spec(parse_spec(data, file="s.yaml"))
    assert "cluster.scale_out_bandwidth_per_node" in space.searched
    got = sorted(float(space.cluster(v).scale_out_bandwidth_bytes_per_s)
                 for v in space.cluster_combinations())
    assert got == [12.5e9, 50e9]


@pytest.mark.parametrize(("value", "parsed"), [("4 GiB", (4 * _GIB, 0.0)),
                                               ("10%", (0.0, 0.1)), (" 2.5 % ", (0.0, 0.025)),
                                               (8e9, (8e9, 0.0)), (0, (0.0, 0.0))])
def test_memory_headroom_is_a_size_or_a_share(value: Any, parsed: tuple[float, float]) -> None:
    assert parse_headroom(value) == parsed
    spec = parse_spec(_spec(constraints={"memory_headroom": value}), file="s.yaml")
    assert spec.constraints.memory_headroom is not None


@pytest.mark.parametrize(("value", "words"), [("4", 'did you mean "4 GiB" or "4%"?'),
                                              ("150%", "from 0% to under 100%"),
                                              ("four GiB", "cannot read"),
                                              ("4 GB/s", "cannot read")])
def test_a_bad_memory_headroom_says_what_to_write(value: Any, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(constraints={"memory_headroom": value}), file="s.yaml")
    assert caught.value.field == "constraints.memory_headroom"
    assert words in caught.value.message


def test_the_readmes_own_cluster_example_is_a_valid_cluster() -> None:
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", readme, re.DOTALL)
                 if "price_per_node_hour" in b)
    import yaml

    data = _spec(cluster=yaml.safe_load(block)["cluster"], objective="cost")
    del data["cluster"]["gpus_per_node"]
    cluster = parse_spec(data, file="README.md").to_cost_inputs()[1]
    assert cluster.gpu.hbm_capacity_bytes == 94 * _GIB
    assert cluster.price_usd_per_gpu_hour == 16.80 / 8
    assert cluster.scale_out_bandwidth_bytes_per_s == 3.2e12 / 8 / 8


@pytest.mark.parametrize("name", ["", "   ", "a\nb", "tab\there"])
def test_a_blank_study_name_or_one_with_control_characters_is_refused(name: str) -> None:
    """A study named '' is listed as a blank row and cannot be named on a command line; a
    line break splits every table and header that shows the name."""
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(name=name), file="s.yaml")
    assert caught.value.field == "name" and "leave it out" in caught.value.message


def test_a_study_name_keeps_what_the_command_line_accepts() -> None:
    assert parse_spec(_spec(name="my study/v2.1"), file="s.yaml").name == "my study/v2.1"


@pytest.mark.parametrize(("section", "value", "words"), [
    ("plan", {"tp": []}, "plan.tp: an empty list offers nothing to choose; give one value "
                         "(tp: VALUE) or the values to search (tp: [A, B])"),
    ("cluster", {"gpu": []}, "cluster.gpu: an empty list offers nothing to choose; give one "
                             "value (gpu: VALUE) or the values to search (gpu: [A, B])"),
    ("cluster", {"pools": []}, "cluster.pools: an empty list; give at least 1 item"),
])
def test_an_empty_list_says_what_to_write(section: str, value: Any, words: str) -> None:
    """Not pydantic's 'tuple should have at least 1 item after validation'."""
    with pytest.raises(SpecError) as raised:
        parse_spec(_spec(**{section: value}), file="s.yaml")
    assert str(raised.value) == f"s.yaml: {words}"


@pytest.mark.parametrize(("section", "value", "words"), [
    ("cluster", {"gpu": None, "nodes": None, "pools": {"gpu": "a100-80gb", "nodes": 2}},
     "cluster.pools: must be a list: [A, B], or one '- ITEM' line per item"),
    ("cluster", {"gpu": None, "nodes": None, "pools": "a100-80gb"},
     "cluster.pools: must be a list: [A, B], or one '- ITEM' line per item (got 'a100-80gb')"),
    ("model", {"kind": "layers", "layers": {"name": "a", "forward_flops": 1, "params": 1,
                                             "activation_bytes": 1}},
     "model.layers: must be a list: [A, B], or one '- ITEM' line per item"),
    ("objective", 3, "objective: give one of throughput, time_to_train, cost, or a list of two "
                     "of them for a Pareto search, e.g. [time_to_train, cost] (got 3)"),
])
def test_a_value_that_is_not_a_list_says_what_to_write(section: str, value: Any,
                                                       words: str) -> None:
    """Not pydantic's 'input should be a valid tuple' (Python's word, no hint of what to
    write), nor for an objective, which is also one name, 'must be a list'."""
    data = _spec(**{section: value})
    data["cluster"] = {k: v for k, v in data["cluster"].items() if v is not None}
    with pytest.raises(SpecError) as raised:
        parse_spec(data, file="s.yaml")
    assert str(raised.value) == f"s.yaml: {words}"


def test_a_number_longer_than_python_reads_is_one_line(tmp_path: Path) -> None:
    """Python refuses to read an integer of more than 4300 digits (a ValueError, which was a
    traceback); the spec's line says where it is and what to write."""
    path = tmp_path / "big.yaml"
    path.write_text("name: x\nmodel: gpt3-1.3b\ntraining:\n  global_batch: " + "9" * 5000
                    + "\n", encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    assert str(raised.value).startswith(f"{path}: line 4, column 17: the number 99999")
    assert "5,000 digits" in str(raised.value)


def test_a_study_name_fits_every_storage() -> None:
    """Optuna stores study_name as VARCHAR(512): a longer name worked on SQLite and failed on
    PostgreSQL as 'the storage's database failed: value too long ... (a damaged SQLite file:
    restore it from a copy)'. The spec refuses it, on every storage alike."""
    assert parse_spec(_spec(name="n" * 512), file="s.yaml").name == "n" * 512
    with pytest.raises(SpecError) as raised:
        parse_spec(_spec(name="é" * 513), file="s.yaml")
    assert str(raised.value).startswith("s.yaml: name: 513 characters; a study name has at "
                                        "most 512")


@pytest.mark.parametrize(("section", "value", "field"), [
    ("plan", {"tp": [0]}, "plan.tp[0]"),
    ("cluster", {"gpu": ["a100-80gbx"]}, "cluster.gpu[0]"),
    ("cluster", {"gpu": None, "nodes": None,
                 "pools": [{"gpu": "a100-80gb", "nodes": -1}]}, "cluster.pools[0].nodes"),
    ("model", {"kind": "layers", "layers": [{"name": "a", "forward_flops": -1, "params": 1,
                                              "activation_bytes": 1}]},
     "model.layers[0].forward_flops"),
])
def test_a_list_whose_every_item_is_wrong_is_one_line_per_item(section: str, value: Any,
                                                                 field: str) -> None:
    """pydantic adds 'tuple should have at least 1 item after validation, not 0' to a list
    whose items all failed: a second line about a list the spec gives one item."""
    data = _spec(**{section: value})
    data["cluster"] = {k: v for k, v in data["cluster"].items() if v is not None}
    with pytest.raises(SpecError) as raised:
        parse_spec(data, file="s.yaml")
    assert not isinstance(raised.value, SpecErrors), str(raised.value)
    assert str(raised.value).startswith(f"s.yaml: {field}: ")


@pytest.mark.parametrize("expansion", [
    {"capacity": "1 TiB"},
    {"capacity": ["0 GiB", "512 GiB"], "bandwidth": [0, "64 GB/s"]},
])
def test_an_expansion_tier_without_a_bandwidth_is_refused(expansion: dict[str, Any]) -> None:
    """Before: offload into it ran at the model's 1 byte/s floor, a 'feasible' plan whose
    step took 84 years."""
    with pytest.raises(SpecError) as raised:
        parse_spec(_spec(cluster={"expansion": expansion}), file="s.yaml")
    assert str(raised.value).startswith("s.yaml: cluster.expansion.bandwidth: a tier of ")
    assert parse_spec(_spec(cluster={"expansion": {"capacity": 0}}), file="s.yaml")


def test_a_wrong_attention_kind_is_one_line_without_the_kinds_fields() -> None:
    """`attention: {kind: mha}` named the kind it takes and then five 'missing required field'
    lines for multi-head latent attention's fields, which belong to the kind the spec did not
    name; only the kind's line stays. A right kind still lists what it misses."""
    model = {"name": "m", "layers": 4, "hidden": 256, "heads": 8, "vocab": 1000,
             "seq_len": 128}
    with pytest.raises(SpecError) as raised:
        parse_spec(_spec(model={**model, "attention": {"kind": "mha"}}), file="s.yaml")
    assert not isinstance(raised.value, SpecErrors)
    assert str(raised.value).startswith("s.yaml: model.attention.kind: input should be 'mla'")
    with pytest.raises(SpecErrors) as missing:
        parse_spec(_spec(model={**model, "attention": {"kind": "mla"}}), file="s.yaml")
    assert all("missing required field" in str(e) for e in missing.value.errors)


def test_a_word_yaml_reads_as_true_or_false_says_to_quote_it(tmp_path: Path) -> None:
    """`name: off` is YAML 1.1's false: 'input should be a valid string (got False)' left the
    user looking for a False they never wrote."""
    path = tmp_path / "off.yaml"
    path.write_text("name: off\nmodel: gpt3-1.3b\ncluster: {gpu: a100-80gb, nodes: 1}\n"
                    "training: {global_batch: 8}\n", encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    assert str(raised.value) == (
        f"{path}: name: input should be a valid string (got False); YAML reads an unquoted "
        "yes, no, on, off, true or false as a truth value: quote it")


@pytest.mark.parametrize(("cluster", "words"), [
    ({"gpu": None, "nodes": None, "pools": [{"gpu": "a100-80gb", "nodes": 2}],
      "inter_pool_bandwidth": "100 GB/s"},
     "cluster.inter_pool_bandwidth: is the link between pools, and this cluster has one pool; "
     "add the other pools or leave it out"),
])
def test_a_cluster_field_that_cannot_act_is_refused(cluster: dict[str, Any], words: str) -> None:
    """A link between pools on a cluster of one pool was accepted and did nothing (found by a
    helper). (A tier of capacity 0 with a bandwidth stays accepted: a co-design's fixed plan
    spec of its 'no tier' choice is one, and a plan that offloads to it is infeasible with a
    line saying to set the capacity.)"""
    data = _spec(cluster=cluster)
    data["cluster"] = {k: v for k, v in data["cluster"].items() if v is not None}
    with pytest.raises(SpecError) as raised:
        parse_spec(data, file="s.yaml")
    assert str(raised.value) == f"s.yaml: {words}"


@pytest.mark.parametrize(("objective", "words"), [
    ("fast", "objective: give one of throughput, time_to_train, cost (got 'fast')"),
    ("throughputt", "objective: give one of throughput, time_to_train, cost (got "
                    "'throughputt'); did you mean 'throughput'?"),
])
def test_one_unknown_objective_is_named_as_written(objective: str, words: str) -> None:
    """`objective: fast` was reported at 'objective[0]', an index of a list the user never
    wrote (found by a helper); one name is named as one."""
    with pytest.raises(SpecError) as raised:
        parse_spec(_spec(objective=objective), file="s.yaml")
    assert str(raised.value) == f"s.yaml: {words}"
