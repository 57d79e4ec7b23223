"""`tuner explain`: the terms add up to the step time, the what-ifs never slow a plan down,
more HBM never makes the best neighbour slower, and the command line renders it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cost import PlanRecord
from search_spaces import load_spec
from tests.tuner.specs import EXAMPLES
from tuner.cli import main
from tuner.engine.explain import explain, neighbourhood, time_terms

FIXED = EXAMPLES / "gpt3-175b-a100-fixed.yaml"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def explained() -> dict[str, Any]:
    return explain(load_spec(FIXED))


def test_terms_add_up_to_the_step_time(explained: dict[str, Any]) -> None:
    terms = explained["terms"]
    assert sum(t["seconds"] for t in terms) == pytest.approx(explained["step_time_s"])
    assert sum(t["share"] for t in terms) == pytest.approx(1.0)
    assert all(t["seconds"] >= 0 for t in terms)
    assert explained["dominant"] == max(terms, key=lambda t: t["seconds"])["term"]
    assert {"compute", "memory_bound", "tp_comm", "pp_bubble", "dp_comm"} <= {
        t["term"] for t in terms}


def test_memory_bound_work_is_what_unlimited_hbm_bandwidth_saves() -> None:
    model, cluster, training, plan = load_spec(FIXED).to_cost_inputs()
    terms = {t["term"]: t["seconds"] for t in time_terms(model, cluster, training, plan)}
    assert terms["memory_bound"] > 0 and terms["compute"] > terms["memory_bound"]


def test_more_bandwidth_never_slows_the_plan(explained: dict[str, Any]) -> None:
    what_if = explained["what_if"]
    for key in ("scale_out_bandwidth_x2", "hbm_bandwidth_x2"):
        assert what_if[key]["step_time_s"] <= explained["step_time_s"]
        assert what_if[key]["to_bytes_per_s"] == 2 * what_if[key]["from_bytes_per_s"]


def test_more_hbm_never_slows_the_best_neighbour(explained: dict[str, Any]) -> None:
    capacity = explained["what_if"]["hbm_capacity_x1_5"]
    today, larger = capacity["best_today"], capacity["best_larger"]
    assert capacity["to_bytes"] == pytest.approx(1.5 * capacity["from_bytes"])
    assert larger["step_time_s"] <= today["step_time_s"] <= explained["step_time_s"]
    assert larger["plans_evaluated"] == today["plans_evaluated"] > 1000
    assert larger["memory_total_bytes"] <= larger["hbm_usable_bytes"]
    assert capacity["change"] == pytest.approx(
        larger["step_time_s"] / today["step_time_s"] - 1.0)


def test_the_neighbours_count_their_plans_under_search_names(explained: dict[str, Any]
                                                              ) -> None:
    """The plans swept for the larger-HBM what-if under the names `tuner search --json` gives
    them (`evaluated`, `feasible_plans`: shared/SPEC.md), where explain said only
    `plans_evaluated` and `plans_feasible` (kept)."""
    capacity = explained["what_if"]["hbm_capacity_x1_5"]
    for neighbour in (capacity["best_today"], capacity["best_larger"]):
        assert neighbour["evaluated"] == neighbour["plans_evaluated"] > 1000
        assert neighbour["feasible_plans"] == neighbour["plans_feasible"] > 0


def test_the_neighbourhood_holds_the_plan_and_fills_the_cluster() -> None:
    spec = load_spec(FIXED)
    _, cluster, training, plan = spec.to_cost_inputs()
    record = PlanRecord.of(plan, gpus=64)
    space = neighbourhood(spec, record, gpus=64, global_batch=training.global_batch)
    assert record.tp in space.choices["tp"] and record.pp in space.choices["pp"]
    assert set(space.choices["recompute"]) == {"none", "selective", "full"}
    plans = list(space.plans(cluster))
    layouts = {(int(t), int(p), int(d)) for chunk in plans
               for t, p, d in zip(chunk.tp, chunk.pp, chunk.arrays(64)["dp"], strict=True)}
    assert (8, 8, 1) in layouts and all(t * p * d == 64 for t, p, d in layouts)


def test_a_plan_over_memory_says_by_how_much(tmp_path: Path) -> None:
    data = yaml.safe_load(FIXED.read_text(encoding="utf-8"))
    data["name"] = "gpt3-no-model-parallelism"
    data["plan"] = {"tp": 1, "pp": 1, "micro_batch": 1}
    path = tmp_path / "over.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, out, _ = _run("explain", str(path))
    assert code == 0 and "does NOT fit" in out and "GiB over" in out


def test_cli_text_and_json() -> None:
    code, out, _ = _run("explain", str(FIXED))
    assert code == 0
    assert "<- dominant" in out and "2x scale-out bandwidth" in out and "1.5x HBM" in out
    code, out, _ = _run("explain", str(FIXED), "--json")
    data = json.loads(out)
    assert code == 0 and data["spec"] == "gpt3-175b-a100-fixed"
    assert data["memory"]["fits"] is True and 0 < data["memory"]["used_share"] < 1


def test_a_spec_with_choices_is_bad_input() -> None:
    code, _, err = _run("explain", str(EXAMPLES / "gpt3-175b-1024-a100.yaml"))
    assert code == 2 and "plan.tp" in err and len(err.strip().splitlines()) == 1


def test_json_holds_evaluates_fields_under_their_names() -> None:
    """A program reading both commands finds evaluate's fields in explain's JSON under the
    same names and with the same values (it had `terms` and `memory.breakdown` only, no
    `time_breakdown_s`, `memory_per_gpu_bytes`, `mfu_palm`); `dominant` stays explain's,
    the largest of its terms."""
    _, explained, _ = _run("explain", str(FIXED), "--json")
    _, evaluated, _ = _run("evaluate", str(FIXED), "--json")
    ex, ev = json.loads(explained), json.loads(evaluated)
    for key, value in ev.items():
        if key != "dominant":
            assert ex[key] == value, key
    assert ex["dominant"] == ex["terms"][0]["term"]


def test_a_calibrated_plan_says_what_its_profile_sets(tmp_path: Path) -> None:
    """`tuner explain` did not say that a calibration profile was in use nor what it set (found
    by a helper): the text names the profile and each value it sets beside the default, and
    the JSON holds them; without a profile, `calibration` is null and no line is shown."""
    (tmp_path / "profile.yaml").write_text(
        "efficiency: {network_fraction: 0.7}\ngemm_fraction_by_gpu:\n  a100-80gb: 0.5\n",
        encoding="utf-8")
    spec = tmp_path / "fixed.yaml"
    spec.write_text(FIXED.read_text(encoding="utf-8") + "calibration: profile.yaml\n",
                    encoding="utf-8")
    code, out, _ = _run("explain", str(spec), "--json")
    assert code == 0
    sets = json.loads(out)["calibration"]["sets"]
    assert sets["network_fraction"] == {"value": 0.7, "default": 0.8}
    assert sets["gemm_fraction_by_gpu"] == {"value": {"a100-80gb": 0.5}, "default": {}}
    code, text, _ = _run("explain", str(spec))
    line = next(x for x in text.splitlines() if x.startswith("  calibrated by"))
    assert line == (f"  calibrated by     {tmp_path / 'profile.yaml'}: gemm_fraction_by_gpu "
                    "a100-80gb 0.5 (default none), network_fraction 0.7 (default 0.8)")
    code, plain, _ = _run("explain", str(FIXED), "--json")
    assert json.loads(plain)["calibration"] is None
