"""A space where no plan fits: the exhaustive sweep keeps the nearest miss (the valid plan
that exceeds its limits by the least), `tuner search` names it with what it lacks and says
that none is feasible rather than optimal, and `--json` carries it as `nearest`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tuner.cli import main
from tuner.engine.exhaustive import sweep

from .specs import each_valid_plan, space, write

TOO_BIG = {
    "name": "too-big",
    "model": "gpt3-175b",
    "training": {"global_batch": 64, "tokens": 1e9, "precision": "bf16"},
    "cluster": {"gpu": "a100-80gb", "nodes": 1, "gpus_per_node": 8},
    "plan": {"tp": [2, 4, 8], "pp": [1, 2, 4], "micro_batch": [1, 2],
             "recompute": ["none", "full"]},
    "search": {"sampler": "exhaustive"},
}
"""GPT-3 175B on one node of eight A100: no layout holds its weights and optimizer state."""


def _least_memory_ratio() -> float:
    """By brute force (one scalar cost.evaluate per valid plan): the least memory per GPU over
    usable HBM of the space, the memory constraint of the plan nearest to fitting."""
    s = space(TOO_BIG)
    cluster = s.cluster({})
    return min(float(np.ravel(report.memory.total_bytes / report.hbm_usable_bytes)[0])
               for _, report in each_valid_plan(s, cluster))


def test_the_sweep_keeps_the_plan_nearest_to_fitting() -> None:
    summary = sweep(space(TOO_BIG))
    assert summary.feasible == 0 and summary.evaluated > 0
    assert len(summary.best) == 1
    candidate, _ = summary.best[0]
    assert candidate.constraints["hbm"] > 0  # it does not fit ...
    # ... and no valid plan of the space misses by less
    assert np.isclose(candidate.constraints["hbm"], _least_memory_ratio() - 1.0)


OVER_BUDGET = {**TOO_BIG, "name": "over-budget",
               "cluster": {"gpu": "a100-80gb", "nodes": [1, 16], "gpus_per_node": 8},
               "plan": {**TOO_BIG["plan"], "pp": [1, 2, 4, 8], "zero": [0, 1]},
               "constraints": {"max_cost": 1.0}}
"""The same model where sixteen nodes hold it, under a budget of one dollar."""


def test_a_budget_no_plan_meets_is_named_by_the_cheapest_plan_that_fits() -> None:
    """The nearest miss of an impossible budget fits in memory (one node's plans are cheaper
    but cannot run): by brute force, the least cost of the plans that fit."""
    s = space(OVER_BUDGET)
    summary = sweep(s)
    assert summary.feasible == 0 and len(summary.best) == 1
    candidate, _ = summary.best[0]
    assert candidate.constraints["hbm"] <= 0 < candidate.constraints["max_cost"]
    costs, cheaper_unfit = [], 0
    for nodes in (1, 16):
        for _, report in each_valid_plan(s, s.cluster({"nodes": nodes})):
            usd = float(np.ravel(report.price.cost_to_train_usd)[0])
            fits = float(np.ravel(report.memory.total_bytes / report.hbm_usable_bytes)[0]) <= 1
            costs += [usd] if fits else []
            cheaper_unfit += int(not fits and usd < min(costs, default=np.inf))
    assert np.isclose(candidate.constraints["max_cost"], min(costs) / 1.0 - 1.0)
    assert cheaper_unfit > 0  # the rule chose: a plan that cannot run was cheaper


def test_the_nearest_miss_says_what_it_costs_against_the_limit(tmp_path: Path) -> None:
    """'cost to train is $X, Nx constraints.max_cost = 1': the value itself, and the factor
    over a limit it exceeds twice or more (a percentage below that)."""
    done = CliRunner().invoke(main, ["search", str(write(tmp_path, OVER_BUDGET)), "--storage",
                                     f"sqlite:///{tmp_path / 'b.db'}", "--json"])
    assert done.exit_code == 0, done.output
    nearest = json.loads(done.stdout)["nearest"]
    usd = nearest["cost_to_train_usd"]
    assert nearest["violations"] == [
        f"cost to train is ${usd:,.0f}, {usd:,.0f}x constraints.max_cost = 1"]


def test_search_names_the_nearest_miss_and_what_it_lacks(tmp_path: Path) -> None:
    spec = str(write(tmp_path, TOO_BIG))
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    runner = CliRunner()
    done = runner.invoke(main, ["search", spec, "--storage", storage])
    assert done.exit_code == 0, done.output
    headline, _, rest = done.output.partition("\n")
    assert "none feasible" in headline and "optimal" not in headline
    assert "no feasible plan; the nearest, trial 0 (" in rest
    assert "GiB usable" in rest
    assert f"`tuner explain too-big --trial 0 --storage {storage}`" in rest  # as typed
    shown = runner.invoke(main, ["best", "too-big", "--storage", storage]).output
    assert f"`tuner explain too-big --trial 0 --storage {storage}`" in shown
    data = json.loads(runner.invoke(main, ["search", spec, "--storage", storage, "--json"]
                                    ).stdout)
    assert data["best"] == [] and data["feasible_plans"] == 0
    assert data["nearest"]["trial"] == 0 and data["nearest"]["feasible"] is False
    assert any("GiB usable" in v for v in data["nearest"]["violations"])
    explained = runner.invoke(main, ["explain", "too-big", "--trial", "0", "--storage", storage])
    assert explained.exit_code == 0 and "does NOT fit" in explained.output


def test_best_names_the_nearest_miss_of_a_swept_study(tmp_path: Path) -> None:
    spec = str(write(tmp_path, TOO_BIG))
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    runner = CliRunner()
    assert runner.invoke(main, ["search", spec, "--storage", storage, "--json"]).exit_code == 0
    shown = runner.invoke(main, ["best", "too-big", "--storage", storage]).output
    assert shown.startswith("too-big: no feasible plan; the nearest, trial 0 (")
    assert "run more trials" not in shown  # every plan was seen
    data = json.loads(runner.invoke(main, ["best", "too-big", "--storage", storage,
                                           "--json"]).stdout)
    assert data["best"] == [] and data["nearest"]["trial"] == 0


def test_the_http_api_best_names_the_nearest_miss_too(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from studies import open_storage
    from tuner.serve.config import ServeConfig
    from tuner.serve.service import Service

    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    spec = str(write(tmp_path, TOO_BIG))
    assert CliRunner().invoke(main, ["search", spec, "--storage", storage]).exit_code == 0
    service = Service(config=ServeConfig(storage_url=storage), storage=open_storage(storage),
                      runner=None)  # type: ignore[arg-type]  # best() starts no worker
    data = json.loads(service.best("too-big", top=1))
    assert data["best"] == [] and data["nearest"]["trial"] == 0


def test_explain_and_plan_of_a_swept_study_without_a_feasible_plan_name_the_nearest(
        tmp_path: Path) -> None:
    """`tuner explain NAME` and `tuner plan NAME` of a study whose sweep found no feasible plan:
    more trials cannot help (every plan was seen), so the message says to change the problem
    and names the nearest miss's trial, not "run more trials"; exit 2."""
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    runner = CliRunner()
    spec = str(write(tmp_path, TOO_BIG))
    assert runner.invoke(main, ["search", spec, "--storage", storage]).exit_code == 0
    for command in (["explain", "too-big"], ["plan", "too-big", "--as", "megatron"]):
        done = runner.invoke(main, [*command, "--storage", storage])
        assert done.exit_code == 2, done.output
        line = done.output.strip()
        assert "\n" not in line
        assert line.startswith("error: study 'too-big' has no feasible plan: an exhaustive "
                               "sweep saw every plan of its space"), line
        assert "run more trials" not in line
        assert line.endswith("the nearest miss is trial 0 (--trial 0)"), line


def test_a_study_whose_trials_found_no_feasible_plan_yet_says_to_run_more(
        tmp_path: Path) -> None:
    """Without an exhaustive sweep (TPE's trials), more trials may find a feasible plan."""
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    runner = CliRunner()
    spec = str(write(tmp_path, {**TOO_BIG, "search": {"sampler": "tpe", "trials": 2}}))
    done = runner.invoke(main, ["search", spec, "--storage", storage])
    assert done.exit_code == 0, done.output
    line = runner.invoke(main, ["explain", "too-big", "--storage", storage]).output.strip()
    assert "no trial so far fits memory and the constraints; run more trials (`tuner resume " \
           f"too-big --storage {storage}`)" in line, line


def test_a_study_without_a_completed_trial_says_so_not_to_relax_constraints(
        tmp_path: Path) -> None:
    """`tuner best` of a study made with --timeout 0 said 'no feasible plan yet; run more
    trials or relax the constraints' where no trial had run, so nothing was known of the
    constraints (found by a helper); it says none has completed and how to run them."""
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    runner = CliRunner()
    spec = str(write(tmp_path, {**TOO_BIG, "search": {"sampler": "tpe", "trials": 2}}))
    made = runner.invoke(main, ["search", spec, "--storage", storage, "--timeout", "0"])
    assert made.exit_code == 0, made.output
    done = runner.invoke(main, ["best", "too-big", "--storage", storage])
    assert done.exit_code == 0, done.output
    assert done.output.strip() == (
        f"too-big: no trial has completed yet; run them: `tuner resume too-big --storage "
        f"{storage}` (or `tuner worker too-big --storage {storage}` beside others)")


def test_explain_and_plan_of_a_study_without_a_completed_trial_say_so(tmp_path: Path) -> None:
    """`tuner explain NAME` and `tuner plan NAME` of a study made with --timeout 0 said 'no
    trial so far fits memory and the constraints; ... or relax the constraints', as `tuner
    best` did before, though no trial had run; they say none has completed and how to run
    them."""
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    runner = CliRunner()
    spec = str(write(tmp_path, {**TOO_BIG, "search": {"sampler": "tpe", "trials": 2}}))
    made = runner.invoke(main, ["search", spec, "--storage", storage, "--timeout", "0"])
    assert made.exit_code == 0, made.output
    for command in (["explain", "too-big", "--json"], ["plan", "too-big", "--as", "spec"]):
        done = runner.invoke(main, [*command, "--storage", storage])
        assert done.exit_code == 2 and done.stdout == ""
        assert done.stderr.strip() == (
            f"error: study 'too-big' has no trial completed yet; run them (`tuner resume "
            f"too-big --storage {storage}`), then name a plan"), done.stderr
