"""`tuner search`, `tuner resume`, and `tuner best` / `tuner export` on their result, through
click's CliRunner on small specs and a SQLite storage under tmp_path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tuner.cli import main

from .specs import space, tiny, write

EVALUATE_KEYS = {"plan", "cluster", "feasible", "step_time_s", "tokens_per_s", "mfu",
                 "memory_per_gpu_bytes", "time_breakdown_s", "cost_per_hour_usd",
                 "time_to_train_days", "cost_to_train_usd"}


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def _json(*args: str) -> Any:
    code, out, err = _run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def storage(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 's.db'}"


@pytest.fixture
def spec_path(tmp_path: Path) -> str:
    """The tiny model: 16 layouts (some without a valid plan on 8 GPUs), 12 cheap combos."""
    return str(write(tmp_path, tiny()))


def test_search_prints_the_study_its_trials_and_the_best_plan(spec_path: str,
                                                              storage: str) -> None:
    out = _json("search", spec_path, "--trials", "20", "--storage", storage)
    assert set(out) == {"study", "trials", "completed", "target", "best", "sampler",
                        "requested_sampler", "optimal", "evaluated"}
    assert out["sampler"] == "tpe" and out["optimal"] is False and out["evaluated"] > 0
    assert out["study"] == "tiny" and out["trials"] == 20
    assert len(out["best"]) == 1
    best = out["best"][0]
    assert set(best) >= EVALUATE_KEYS
    assert best["feasible"] is True
    assert best["cluster"]["gpus"] == 8 and best["plan"]["tp"] * best["plan"]["pp"] <= 8
    assert best["tokens_per_s"] > 0 and 0 < best["mfu"] < 1


def test_the_table_names_the_study_and_its_trials(spec_path: str, storage: str) -> None:
    code, out, err = _run("search", spec_path, "--trials", "5", "--storage", storage)
    assert code == 0, err
    assert "study tiny: 5 completed trials" in out and "step time" in out


def test_exhaustive_adds_the_counts_of_plans(spec_path: str, storage: str) -> None:
    out = _json("search", spec_path, "--sampler", "exhaustive", "--storage", storage)
    assert {"study", "trials", "best", "evaluated", "feasible_plans"} <= set(out)
    assert out["evaluated"] == space(tiny()).count()
    assert 0 < out["feasible_plans"] <= out["evaluated"]
    assert set(out["best"][0]) >= EVALUATE_KEYS


def test_searching_again_adds_trials(spec_path: str, storage: str) -> None:
    assert _json("search", spec_path, "--trials", "5", "--storage", storage)["trials"] == 5
    again = _json("search", spec_path, "--trials", "7", "--seed", "1", "--storage", storage)
    assert again["trials"] == 12
    [listed] = _json("studies", "--storage", storage)
    assert listed["name"] == "tiny" and listed["target_trials"] == 12
    assert listed["complete"] == 12


def test_a_changed_plan_space_under_the_same_name_is_refused(
        tmp_path: Path, spec_path: str, storage: str) -> None:
    _json("search", spec_path, "--trials", "3", "--storage", storage)
    narrowed = tiny(plan={"tp": [1, 2], "pp": [1, 2, 4, 8], "micro_batch": [1, 2, 4],
                          "recompute": ["none", "full"], "zero": [0, 1]})
    (tmp_path / "other").mkdir()
    changed = write(tmp_path / "other", narrowed)  # same name, tiny
    code, out, err = _run("search", str(changed), "--trials", "3", "--storage", storage)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "plan.tp differs" in err and "[1, 2, 4, 8]" in err and "tuner resume tiny" in err
    assert "Traceback" not in err


def test_best_and_export_read_the_result(spec_path: str, storage: str) -> None:
    found = _json("search", spec_path, "--trials", "10", "--top", "2", "--storage", storage)
    best = _json("best", "tiny", "--top", "2", "--storage", storage)
    assert best["study"] == "tiny"
    assert [b["plan"] for b in best["best"]] == [b["plan"] for b in found["best"]]
    assert set(best["best"][0]) >= EVALUATE_KEYS | {"trial", "value"}
    assert best["best"][0]["value"] == pytest.approx(best["best"][0]["tokens_per_s"])
    code, out, err = _run("export", "tiny", "--json", "--storage", storage)
    assert code == 0, err
    rows = json.loads(out)
    complete = [r for r in rows if r["state"] == "COMPLETE"]
    assert len(complete) == 10
    assert {"number", "value", "params.tp", "params.pp", "plan.micro_batch",
            "constraints.hbm"} <= set(complete[0])
    assert not [k for k in complete[0] if k.startswith("constraint.")]
    assert max(r["value"] for r in complete) == pytest.approx(best["best"][0]["value"])


def test_a_pareto_search_prints_the_front(tmp_path: Path, storage: str) -> None:
    data = tiny("pareto", objective=["time_to_train", "cost"],
                cluster={"gpu": "a100-80gb", "nodes": [1, 2], "gpus_per_node": 8},
                search={"sampler": "nsga2", "trials": 20, "seed": 0})
    out = _json("search", str(write(tmp_path, data)), "--storage", storage)
    assert out["trials"] == 20 and out["best"]
    times = [b["time_to_train_days"] for b in out["best"]]
    costs = [b["cost_to_train_usd"] for b in out["best"]]
    assert times == sorted(times) and costs == sorted(costs, reverse=True)
    assert all(set(b) >= EVALUATE_KEYS and b["feasible"] for b in out["best"])


def test_resume_of_a_missing_study_is_refused(spec_path: str, storage: str) -> None:
    _json("search", spec_path, "--trials", "2", "--storage", storage)
    code, out, err = _run("resume", "nope", "--storage", storage)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "no study named 'nope'" in err
    assert len(err.strip().splitlines()) == 1


def test_a_mistyped_study_name_is_answered_with_the_nearest_stored_one(spec_path: str,
                                                                      storage: str) -> None:
    name = _json("search", spec_path, "--trials", "2", "--storage", storage)["study"]
    code, _, err = _run("best", name[:-1] + "x", "--storage", storage)
    assert code == 2 and f"(did you mean '{name}'?)" in err, err
    code, _, err = _run("best", "zzzzzzzz", "--storage", storage)
    assert code == 2 and "did you mean" not in err, err


@pytest.mark.parametrize(("typed", "meant"), [("list", "studies"), ("ls", "studies"),
                                              ("serach", "search"), ("evalute", "evaluate")])
def test_a_command_that_does_not_exist_is_answered_with_the_one_likely_meant(
        typed: str, meant: str) -> None:
    code, out, err = _run(typed)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert f"no such command '{typed}' (did you mean `tuner {meant}`?); see `" in err, err


def test_resume_without_a_storage_file_is_refused(tmp_path: Path) -> None:
    code, _, err = _run("resume", "tiny", "--storage", f"sqlite:///{tmp_path / 'none.db'}")
    assert code == 2 and "no file" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "none.db").exists()


def test_resume_of_a_finished_study_adds_nothing(spec_path: str, storage: str) -> None:
    first = _json("search", spec_path, "--trials", "4", "--storage", storage)
    resumed = _json("resume", "tiny", "--storage", storage)
    assert resumed["trials"] == 4 and resumed["best"] == first["best"]


def test_a_target_below_the_warm_start_plans_is_not_overshot(tmp_path: Path,
                                                             storage: str) -> None:
    path = write(tmp_path, tiny("one", search={"sampler": "tpe", "trials": 1, "seed": 0}))
    assert _json("search", str(path), "--storage", storage)["trials"] == 1
    studies = _json("studies", "--storage", storage)
    assert len(studies) == 1 and studies[0]["complete"] == studies[0]["trials"] == 1
    assert studies[0].get("waiting", 0) == 0 and studies[0].get("running", 0) == 0
