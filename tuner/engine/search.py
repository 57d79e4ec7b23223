"""Run a study: create or continue it, warm-start it, and optimise to its trial target."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState

from search_spaces import Space, SpecError, StudySpec
from studies import (
    RecoveryCallback,
    best_results,
    complete_count,
    create_or_continue,
    finished_under_us,
    recover_stale_trials,
    set_target_trials,
    settle,
    stored_spec,
    target_trials,
    to_run,
)

from .exhaustive import sweep, write_sweep
from .objective import PlanObjective
from .samplers import make_sampler
from .scoring import DIRECTIONS
from .warm_start import warm_start_params

__all__ = ["SearchOptions", "continue_study", "run_search", "summary"]

_STALLED_PASSES = 20  # passes in a row that complete nothing: the space has no valid plan


@dataclass(frozen=True)
class SearchOptions:
    """Command-line overrides of the spec's `search` section, and how to run."""

    sampler: str | None = None
    trials: int | None = None
    seed: int | None = None
    timeout: float | None = None
    progress: bool = False
    sweep_inner: bool = True


def _check_objectives(spec: StudySpec) -> None:
    needs_tokens = {"time_to_train", "cost"} & set(spec.objective)
    needs_tokens |= {c for c in ("max_cost", "max_days") if getattr(spec.constraints, c)}
    if needs_tokens and not spec.training.tokens:
        raise SpecError(f"{sorted(needs_tokens)[0]} needs the tokens to train; set "
                        "training.tokens (e.g. 300e9)", file=spec.file, field="training.tokens")


def run_search(spec: StudySpec, spec_text: str, storage: optuna.storages.BaseStorage,
               options: SearchOptions) -> optuna.Study:
    """A new study, or `trials` more trials of the study of the spec's name."""
    _check_objectives(spec)
    space = Space.from_spec(spec)
    name = options.sampler or spec.search.sampler
    trials = options.trials or spec.search.trials
    seed = options.seed if options.seed is not None else spec.search.seed
    sampler = make_sampler(name, seed=seed, objectives=len(spec.objective))
    directions = [DIRECTIONS[o] for o in spec.objective]
    study = create_or_continue(storage, spec, spec_text, directions=directions,
                               sampler=sampler, target_trials=trials)
    if name == "exhaustive":
        write_sweep(study, space, sweep(space))
        return study
    done = complete_count(study)
    if done:
        set_target_trials(study, done + trials)
    _optimize(study, space, options)
    return study


def continue_study(study: optuna.Study, options: SearchOptions) -> optuna.Study:
    """Run a stored study (its own spec) until it reaches its trial target."""
    space = Space.from_spec(stored_spec(study))
    _optimize(study, space, options)
    return study


_LOG = logging.getLogger(__name__)
_FINISHED_UNDER_US = (optuna.exceptions.UpdateFinishedTrialError, ValueError)


def _optimize(study: optuna.Study, space: Space, options: SearchOptions) -> None:
    """Optimise until the study has its target of completed trials (over all workers);
    pruned trials (no valid plan) do not count, and a timeout stops early. Trials of workers
    that are gone (studies.recovery) are failed and, as far as the target still needs them,
    retried, at the start and while running. Once the target is reached, the running trials
    of other workers are waited for (a grace period) and those of dead workers failed; if the
    study then falls short, or retries wait, this worker runs them, so that a finished study
    holds no running or waiting trial."""
    target = target_trials(study)
    recover_stale_trials(study, target=target)
    objective = PlanObjective(space, sweep_inner=options.sweep_inner)
    objective.remember(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    if not study.trials:
        for params in warm_start_params(space, objective.knobs)[:target]:
            study.enqueue_trial(params, skip_if_exists=True)
    callbacks: list[Callable[[optuna.Study, optuna.trial.FrozenTrial], None]] = [
        MaxTrialsCallback(target, states=(TrialState.COMPLETE,)), RecoveryCallback(target)]
    deadline = None if options.timeout is None else time.monotonic() + options.timeout
    stalled = 0
    while stalled < _STALLED_PASSES:
        if (todo := to_run(study, target)) <= 0:
            settle(study, target)
            if to_run(study, target) <= 0:
                return
            continue
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return
        before = complete_count(study)
        try:
            study.optimize(objective, n_trials=todo, timeout=left, callbacks=callbacks,
                           show_progress_bar=options.progress and stalled == 0)
        except _FINISHED_UNDER_US as err:
            if not finished_under_us(err):
                raise
            _LOG.warning("a trial of this worker was failed by another one that took it "
                         "for dead (a stall longer than the grace period); continuing")
        stalled = stalled + 1 if complete_count(study) == before else 0
    if complete_count(study) == 0:
        raise SpecError("no plan of this space is structurally valid (every trial was "
                        "pruned); widen the plan choices", file=space.spec.file, field="plan")


def summary(study: optuna.Study, *, top: int = 1) -> dict[str, Any]:
    """The `tuner search --json` object of shared/SPEC.md."""
    out: dict[str, Any] = {
        "study": study.study_name,
        "trials": complete_count(study),
        "best": [r.as_dict() for r in best_results(study, top=top)],
    }
    for key in ("evaluated", "feasible_plans"):
        if key in study.user_attrs:
            out[key] = study.user_attrs[key]
    return out
