"""Reading studies back: lists, best plans (one objective and a Pareto front), exports."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import optuna
import pytest

from cost import PlanResult
from studies import (
    best_results,
    export_trials,
    is_feasible,
    list_studies,
    record_result,
    result_of,
    trials_table,
)

from .builders import add_trial, gpt3_result, new_study, storage_in

PRUNED = optuna.trial.TrialState.PRUNED


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    """Four realistic PLAN_RESULTs of GPT-3 on 64 A100s."""
    return {"base": gpt3_result(), "mb2": gpt3_result(micro_batch=2),
            "full": gpt3_result(recompute="full"),
            "tp4": gpt3_result(tp=4, pp=16, virtual_stages=1)}


def _throughput_study(tmp_path: Path, results: dict[str, dict]) -> optuna.Study:
    study = new_study(storage_in(tmp_path))
    for key in ("base", "mb2", "full", "tp4"):
        add_trial(study, [results[key]["tokens_per_s"]], results[key])
    add_trial(study, [results["mb2"]["tokens_per_s"]], results["mb2"])  # the same plan again
    add_trial(study, [1e9], results["base"], memory=5e9)  # over memory: infeasible
    add_trial(study, [], None, state=PRUNED)
    return study


def test_best_is_the_fastest_feasible_distinct_plans(tmp_path: Path,
                                                     results: dict[str, dict]) -> None:
    best = [r.as_dict() for r in best_results(_throughput_study(tmp_path, results), top=3)]
    assert [b["trial"] for b in best] == [1, 0, 3]
    assert best[0]["plan"]["micro_batch"] == 2
    assert best[0]["value"] == pytest.approx(results["mb2"]["tokens_per_s"])
    assert best[0]["step_time_s"] == results["mb2"]["step_time_s"]


def test_nothing_feasible_gives_an_empty_list(tmp_path: Path,
                                              results: dict[str, dict]) -> None:
    study = new_study(storage_in(tmp_path))
    add_trial(study, [1.0], results["base"], memory=1.0)
    assert [r.as_dict() for r in best_results(study)] == []


def test_pareto_front_is_feasible_distinct_and_sorted(tmp_path: Path,
                                                      results: dict[str, dict]) -> None:
    study = new_study(storage_in(tmp_path), directions=("minimize", "minimize"))
    for key in ("base", "mb2", "full", "tp4", "mb2"):
        r = results[key]
        add_trial(study, [r["time_to_train_days"], r["cost_to_train_usd"]], r)
    add_trial(study, [1.0, 1.0], results["base"], memory=1.0)  # dominates all, infeasible
    front = [r.as_dict() for r in best_results(study)]
    assert [f["trial"] for f in front] == [1]  # mb2 is faster and cheaper than the rest
    assert front[0]["value"] == pytest.approx([results["mb2"]["time_to_train_days"],
                                               results["mb2"]["cost_to_train_usd"]])


def test_pareto_front_keeps_a_trade_off(tmp_path: Path, results: dict[str, dict]) -> None:
    study = new_study(storage_in(tmp_path), directions=("minimize", "minimize"))
    add_trial(study, [10.0, 300.0], results["base"])
    add_trial(study, [20.0, 100.0], results["tp4"])
    add_trial(study, [30.0, 400.0], results["full"])
    assert [f["trial"] for f in [r.as_dict() for r in best_results(study)]] == [0, 1]


def test_list_studies_counts_states_and_best(tmp_path: Path,
                                             results: dict[str, dict]) -> None:
    _throughput_study(tmp_path, results)
    new_study(storage_in(tmp_path), name="pareto", directions=("minimize", "minimize"))
    listed = {s["name"]: s for s in list_studies(storage_in(tmp_path))}
    gpt3 = listed["gpt3"]
    assert gpt3["complete"] == 6 and gpt3["pruned"] == 1 and gpt3["fail"] == 0
    assert gpt3["directions"] == ["maximize"] and gpt3["objectives"] == ["throughput"]
    assert gpt3["best_values"] == [pytest.approx(results["mb2"]["tokens_per_s"])]
    assert gpt3["target_trials"] == 10 and gpt3["cost_model_version"]
    assert listed["pareto"]["best_values"] is None and listed["pareto"]["trials"] == 0


def test_records_round_trip_and_feasibility(tmp_path: Path, results: dict[str, dict]) -> None:
    study = new_study(storage_in(tmp_path))
    trial = study.ask()
    record_result(trial, PlanResult.from_dict(results["base"]))
    trial.set_constraint("memory", -3.0)
    study.tell(trial, 1.0)
    frozen = study.trials[0]
    assert result_of(frozen).as_dict() == results["base"] and is_feasible(frozen)


def test_trials_table_is_flat(tmp_path: Path, results: dict[str, dict]) -> None:
    rows = trials_table(_throughput_study(tmp_path, results))
    row = rows[0]
    assert row["number"] == 0 and row["state"] == "COMPLETE"
    assert row["plan.tp"] == 8 and row["cluster.gpu"] == "a100-80gb"
    assert row["cluster.gpus"] == 64 and row["feasible"] is True
    assert row["memory_per_gpu_bytes.total"] == results["base"]["memory_per_gpu_bytes"]["total"]
    assert row["time_breakdown_s.compute"] > 0 and row["constraints.memory"] == -1.0
    assert not [key for row in rows for key in row if key.startswith("constraint.")], \
        "one column per constraint: the result's constraints.KEY, not Optuna's copy too"
    assert row["params.micro_batch"] == 1 and "duration_s" in row
    assert rows[-1]["state"] == "PRUNED" and "plan.tp" not in rows[-1]


def test_export_csv_round_trips(tmp_path: Path, results: dict[str, dict]) -> None:
    study = _throughput_study(tmp_path, results)
    text = export_trials(study, "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(study.trials)
    header = text.splitlines()[0].split(",")
    assert header[:3] == ["number", "state", "value"] and len(set(header)) == len(header)
    assert float(rows[0]["step_time_s"]) == pytest.approx(results["base"]["step_time_s"])
    assert rows[-1]["state"] == "PRUNED" and rows[-1]["plan.tp"] == ""


def test_export_json_round_trips(tmp_path: Path, results: dict[str, dict]) -> None:
    study = _throughput_study(tmp_path, results)
    rows = json.loads(export_trials(study, "json"))
    assert rows == json.loads(json.dumps(trials_table(study, keep_lists=True)))
    assert rows[1]["plan.micro_batch"] == 2


@pytest.mark.parametrize(("directions", "header"), [
    (["minimize"], "number,state,value,duration_s"),
    (["minimize", "minimize"], "number,state,values_0,values_1,duration_s"),
])
def test_export_csv_of_a_study_without_trials_has_its_header(directions: list[str],
                                                               header: str) -> None:
    """A study with no trial exported as a blank line: a script reading it by column found
    nothing (found by a helper); its header is the columns every row starts with."""
    study = optuna.create_study(directions=directions)
    assert export_trials(study, "csv") == header + "\n"
