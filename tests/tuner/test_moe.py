"""Mixtures of experts through the tuner: search with ep as a layout knob (the default search
finds the exhaustive optimum), co-design, explain's what-ifs, calibration, the text views."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cost import DEFAULT_EFFICIENCY, evaluate
from search_spaces import OUTER_PLAN_KNOBS, SpecError, load_spec
from tests.tuner.specs import space, tiny, write
from tuner.cli import main
from tuner.engine.calibrate import errors, fit, read_measurements

TINY_MOE = {"name": "tiny-moe", "layers": 4, "hidden": 256, "heads": 8, "vocab": 1000,
            "seq_len": 128, "gated_mlp": True, "experts": 8, "top_k": 2,
            "expert_ffn_hidden": 128}


def moe_spec(name: str = "tiny-moe", *, plan: dict[str, Any] | None = None,
             **sections: Any) -> dict[str, Any]:
    data = tiny(name, plan=plan if plan is not None else {
        "tp": [1, 2], "pp": [1, 2], "ep": [1, 2, 4, 8], "micro_batch": [1, 2],
        "recompute": ["none", "full"], "sequence_parallel": [False, True]}, **sections)
    data["model"] = dict(TINY_MOE)
    data["cluster"] = {"gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 8}
    return data


def _run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_ep_is_a_layout_knob_and_invalid_values_are_derived_away() -> None:
    assert "ep" in OUTER_PLAN_KNOBS and "etp" in OUTER_PLAN_KNOBS
    data = moe_spec(plan={"ep": [1, 2, 3, 16], "tp": [1, 2]})
    assert space(data).choices["ep"] == (1, 2)  # 3 and 16 do not divide the 8 experts


def test_default_search_finds_the_exhaustive_optimum(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, moe_spec())
    exhaustive = _run("search", str(path), "--sampler", "exhaustive", "--json")
    assert exhaustive.exit_code == 0, exhaustive.output
    best = json.loads(exhaustive.stdout)["best"][0]
    tpe = _run("search", str(write(tmp_path, moe_spec("tiny-moe-tpe"))), "--trials", "30",
               "--json")
    assert tpe.exit_code == 0, tpe.output
    found = json.loads(tpe.stdout)["best"][0]
    assert found["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)
    assert found["workload"] == "moe" and "ep_comm" in found["time_breakdown_s"]
    report = _run("report", "tiny-moe", "--json")
    assert report.exit_code == 0, report.output
    html = Path(json.loads(report.stdout)["report"]).read_text(encoding="utf-8")
    assert "EP all-to-all" in html


def test_codesign_sweeps_ep_on_each_cluster(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = moe_spec("tiny-moe-codesign")
    data["cluster"] = {"gpu": ["a100-80gb", "h100-80gb"], "nodes": [1, 2], "gpus_per_node": 8}
    result = _run("search", str(write(tmp_path, data)), "--trials", "4", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["best"][0]["plan"]["ep"] in (1, 2, 4, 8)


def test_explain_and_evaluate_show_the_expert_all_to_alls(tmp_path: Path) -> None:
    path = write(tmp_path, moe_spec("fixed-moe", plan={"ep": 8, "micro_batch": 2}))
    explained = _run("explain", str(path))
    assert explained.exit_code == 0, explained.output
    assert "expert-parallel all-to-alls" in explained.stdout
    assert "ep=8" in explained.stdout
    evaluated = _run("evaluate", str(path))
    assert "ep_comm" in evaluated.stdout and "ep=8 etp=1" in evaluated.stdout


def test_dense_models_keep_the_expert_knobs_at_one(tmp_path: Path) -> None:
    path = write(tmp_path, tiny("dense-ep", plan={"ep": 2}))
    result = _run("evaluate", str(path))
    assert result.exit_code == 2 and "do not apply" in result.stderr
    assert "ep_comm" not in _run("evaluate", str(write(tmp_path, tiny("dense", plan={}))))\
        .stdout


def test_expert_fields_need_experts(tmp_path: Path) -> None:
    data = tiny("no-experts")
    data["model"] = {**data["model"], "top_k": 2}
    with pytest.raises(SpecError, match="top_k applies to a mixture of experts only"):
        load_spec(write(tmp_path, data))


@pytest.mark.parametrize(("groups", "message"), [
    ({"expert_groups": 3}, "expert_groups=3 does not divide experts"),
    ({"expert_groups": 4, "group_top_k": 5}, "group_top_k=5 is more than expert_groups=4"),
])
def test_expert_groups_must_split_the_experts(tmp_path: Path, groups: dict,
                                              message: str) -> None:
    data = moe_spec("groups")
    data["model"] = {**data["model"], **groups}
    with pytest.raises(SpecError, match=message):
        load_spec(write(tmp_path, data))


@pytest.mark.parametrize(("layout", "refused"), [
    ({"moe_layer_freq": 5}, False),  # layer 0 only, and 0 % 5 == 0: one MoE layer
    ({"moe_layer_freq": 5, "dense_layers": 1}, True),  # none of layers 1-3 is a multiple
    ({"moe_layer_freq": 3, "dense_layers": 2}, False),  # layer 3
    ({"moe_layer_freq": 2, "dense_layers": 3}, True),  # layer 4 is past the 4 layers
])
def test_a_layer_frequency_that_leaves_no_moe_layer_is_refused(tmp_path: Path,
                                                                 layout: dict,
                                                                 refused: bool) -> None:
    """moe_layer_freq past the layers (with dense_layers) made a 'mixture of experts' with no
    MoE layer, evaluated as if it were one; it names the field and a frequency that works."""
    data = moe_spec("freq")
    data["model"] = {**data["model"], **layout}  # 4 layers
    if not refused:
        assert load_spec(write(tmp_path, data)).name == "freq"
        return
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, data))
    assert caught.value.field == "model.moe_layer_freq"
    assert "leaves no MoE layer of layers=4" in caught.value.message
    assert f"choose moe_layer_freq <= {4 - layout['dense_layers']}" in caught.value.message


def test_calibration_fits_moe_runs(tmp_path: Path) -> None:
    true = DEFAULT_EFFICIENCY.with_(gemm_fraction_by_gpu=(("a100-80gb", 0.45),))
    rows = ["spec,measured_step_time_s"]
    for i, (ep, mb) in enumerate([(1, 1), (2, 2), (4, 1), (8, 2), (8, 1), (2, 1)]):
        data = moe_spec(f"run{i}", plan={"ep": ep, "micro_batch": mb})
        data["model"] = {**data["model"], "hidden": 2048, "heads": 16}
        path = write(tmp_path, data)
        seconds = float(evaluate(*load_spec(path).to_cost_inputs(), efficiency=true)
                        .step_time_s)
        rows.append(f"{path.name},{seconds}")
    measured = tmp_path / "runs.csv"
    measured.write_text("\n".join(rows) + "\n")
    runs = read_measurements(measured)
    fitted = fit(runs, DEFAULT_EFFICIENCY)
    assert dict(fitted.gemm_fraction_by_gpu)["a100-80gb"] == pytest.approx(0.45, abs=0.02)
    assert abs(errors(runs, fitted)).mean() < 0.03


def test_catalog_lists_the_mixtures_of_experts() -> None:
    result = _run("catalog", "--json")
    models = json.loads(result.stdout)["models"]
    assert models["deepseek-v3"]["experts"] == 256
    assert models["deepseek-v3"]["active_parameters"] < models["deepseek-v3"]["parameters"]
