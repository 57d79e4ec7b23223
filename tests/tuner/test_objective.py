"""PlanObjective with optuna.trial.FixedTrial: a trial's value is the best fitting plan of its
layout (checked against cost.evaluate directly), a layout without a valid plan is pruned,
constraints tell how far off a layout is, and a repeated proposal comes from the cache."""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
import pytest
from optuna.trial import FixedTrial, TrialState

import cost
from search_spaces import Space
from studies import RESULT_ATTR
from tuner.engine.evaluation import best_plan, cluster_values
from tuner.engine.objective import PlanObjective

from .specs import gpt3_narrow, space, tiny

LAYOUTS = [{"tp": tp, "pp": pp} for tp in (2, 4, 8) for pp in (4, 8, 16)]


def gpt3_space() -> Space:
    """Nine layouts of GPT-3 on 1024 A100; some do not fit in HBM with these savers."""
    return space(gpt3_narrow(zero=[0, 1], recompute=["none", "selective"]))


def best_fitting(space: Space, fixed: dict[str, Any]) -> float | None:
    """The highest tokens/s of the plans of `fixed` that fit, straight from cost.evaluate."""
    cluster = space.cluster(cluster_values(space, {}))
    best = None
    for plans in space.plans(cluster, fixed):
        report = cost.evaluate(space.model, cluster, space.training, plans)
        fits = (np.asarray(report.memory.total_bytes) <= report.hbm_usable_bytes) & np.asarray(
            report.fits)
        if np.any(fits):
            top = float(np.max(np.asarray(report.tokens_per_s)[fits]))
            best = top if best is None else max(best, top)
    return best


def run(objective: PlanObjective, params: dict[str, Any]) -> tuple[float, FixedTrial]:
    trial = FixedTrial(params)
    value = objective(trial)  # type: ignore[arg-type]
    assert isinstance(value, float)
    return value, trial


def test_the_objective_sweeps_only_the_cheap_knobs_it_does_not_sample() -> None:
    assert PlanObjective(gpt3_space()).knobs == ["tp", "pp"]
    every = PlanObjective(gpt3_space(), sweep_inner=False).knobs
    assert every == ["tp", "pp", "virtual_stages", "micro_batch", "recompute",
                     "sequence_parallel", "zero"]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda p: f"tp{p['tp']}-pp{p['pp']}")
def test_a_fitting_layout_scores_its_best_fitting_plan(layout: dict[str, int]) -> None:
    space = gpt3_space()
    value, trial = run(PlanObjective(space), layout)
    expected = best_fitting(space, layout)
    cluster = space.cluster(cluster_values(space, {}))
    candidate = best_plan(space, cluster, layout)
    assert candidate is not None and value == candidate.objectives[0]
    if expected is None:  # nothing fits: the plan closest to fitting, flagged by hbm
        assert trial.constraints["hbm"] > 0 and not candidate.feasible
        assert trial.user_attrs[RESULT_ATTR]["feasible"] is False
        return
    assert value == pytest.approx(expected, rel=1e-12)
    assert all(c <= 0 for c in trial.constraints.values())
    result = trial.user_attrs[RESULT_ATTR]
    assert result["feasible"] is True and result["plan"]["tp"] == layout["tp"]
    assert result["tokens_per_s"] == pytest.approx(value, rel=1e-9)
    assert trial.user_attrs["plans_evaluated"] == candidate.evaluated > 0


def test_some_layouts_fit_and_some_do_not() -> None:
    fitting = [best_fitting(gpt3_space(), layout) is not None for layout in LAYOUTS]
    assert any(fitting) and not all(fitting)


def test_constraints_are_set_on_a_stored_trial_and_infeasible_ones_are_positive() -> None:
    space = gpt3_space()
    study = optuna.create_study(direction="maximize")
    for layout in LAYOUTS:
        study.enqueue_trial(layout)
    study.optimize(PlanObjective(space), n_trials=len(LAYOUTS))
    for trial in study.trials:
        assert trial.state == TrialState.COMPLETE
        assert {"hbm", "expansion"} <= set(trial.constraints)
        fits = best_fitting(space, trial.params) is not None
        assert (max(trial.constraints.values()) <= 0) == fits
        assert trial.user_attrs[RESULT_ATTR]["feasible"] == fits


def test_spec_limits_become_constraints() -> None:
    limited = {**gpt3_narrow(), "constraints": {"max_days": 1.0, "max_gpus": 512}}
    value, trial = run(PlanObjective(space(limited)), {"tp": 8, "pp": 8})
    assert value > 0
    assert trial.constraints["max_gpus"] == pytest.approx(1024 / 512 - 1)
    days = trial.user_attrs[RESULT_ATTR]["time_to_train_days"]
    assert trial.constraints["max_days"] == pytest.approx(days / 1.0 - 1, rel=1e-6)
    assert trial.user_attrs[RESULT_ATTR]["feasible"] is False


def test_a_layout_with_no_valid_plan_is_pruned() -> None:
    objective = PlanObjective(space(tiny()))  # 8 GPUs: tp 8 x pp 8 needs 64
    trial = FixedTrial({"tp": 8, "pp": 8})
    with pytest.raises(optuna.TrialPruned):
        objective(trial)  # type: ignore[arg-type]
    assert "no structurally valid plan" in trial.user_attrs["pruned_reason"]
    with pytest.raises(optuna.TrialPruned):  # and again, from the cache
        objective(FixedTrial({"tp": 8, "pp": 8}))  # type: ignore[arg-type]
    assert objective.evaluations == 1


def test_a_repeated_proposal_is_answered_from_the_cache() -> None:
    objective = PlanObjective(gpt3_space())
    first, trial = run(objective, {"tp": 4, "pp": 8})
    assert objective.evaluations == 1 and "cached" not in trial.user_attrs
    again, repeat = run(objective, {"tp": 4, "pp": 8})
    assert objective.evaluations == 1
    assert again == first
    assert repeat.constraints == trial.constraints
    assert repeat.user_attrs == {**trial.user_attrs, "cached": True}
    run(objective, {"tp": 8, "pp": 8})
    assert objective.evaluations == 2


def test_a_study_proposing_one_layout_twice_evaluates_it_once() -> None:
    objective = PlanObjective(gpt3_space())
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial({"tp": 4, "pp": 8})
    study.enqueue_trial({"tp": 4, "pp": 8})
    study.optimize(objective, n_trials=2)
    first, second = study.trials
    assert objective.evaluations == 1
    assert first.values == second.values and first.constraints == second.constraints
    assert second.user_attrs == {**first.user_attrs, "cached": True}


def test_remembered_trials_are_not_evaluated_again() -> None:
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial({"tp": 4, "pp": 8})
    study.optimize(PlanObjective(gpt3_space()), n_trials=1)
    fresh = PlanObjective(gpt3_space())
    fresh.remember(study.trials)
    value, trial = run(fresh, {"tp": 4, "pp": 8})
    assert fresh.evaluations == 0 and value == study.trials[0].value
    assert trial.user_attrs["cached"] is True
