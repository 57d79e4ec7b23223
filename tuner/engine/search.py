"""Run a study: create or continue it, choose how to search it (`auto`: sweep it whole when
that fits the time budget, else Optuna over what does not fit), and run it to its target.

These are library functions (the command line and the HTTP API call them): messages go to
`SearchOptions.notify`, a stop request through `SearchOptions.stop` (interrupt.Stop), and an
interrupted search raises interrupt.Interrupted with a line saying what was kept.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import time
from collections.abc import Callable
from typing import Any

import optuna
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState

from search_spaces import Space, SpecError, StudySpec
from search_spaces.wording import counted
from studies import (
    RecoveryCallback,
    began,
    best_payload,
    check_problem,
    complete_count,
    create_or_continue,
    finished_under_us,
    recover_stale_trials,
    search_settings,
    set_target_trials,
    settle,
    store_search_settings,
    stored_spec,
    swept,
    target_trials,
    to_run,
)

from ..collector import resume as resume_collector
from .auto import TRIAL_PLANS, AutoChoice, choose
from .exhaustive import SweepSummary, sweep
from .forked import ForkedSweep
from .interrupt import Interrupted, Stop
from .objective import PlanObjective, swept_knobs
from .opening import StorageSource, StudyOpening, storage_of
from .options import SearchOptions
from .options import check_objectives as _check_objectives
from .progress import plans_bar
from .samplers import make_sampler
from .scoring import DIRECTIONS
from .stored_sweep import write_sweep
from .warm_start import warm_start_params

__all__ = ["SearchOptions", "continue_study", "prepare_search", "run_search", "summary"]

_STALLED_PASSES = 20  # passes in a row that complete nothing: the space has no valid plan


def _settings(space: Space, requested: str, choice: AutoChoice | None, *, seed: int | None,
              sweep_inner: bool) -> dict[str, Any]:
    """What is stored with the study: the sampler used, the one asked for, its seed, the
    knobs a trial sweeps, and `auto`'s figures."""
    sampler = choice.sampler if choice is not None else requested
    per_cluster = choice.plans_per_cluster if choice is not None else None
    swept = swept_knobs(space, sweep_inner=sweep_inner, plans_per_cluster=per_cluster,
                        trial_plans=TRIAL_PLANS) if per_cluster is not None else \
        swept_knobs(space, sweep_inner=sweep_inner)
    out: dict[str, Any] = {"sampler": sampler, "requested": requested, "seed": seed,
                           "sweep_inner": sweep_inner, "swept": sorted(swept)}
    if choice is not None:
        out["auto"] = choice.as_dict()
    return out


def run_search(spec: StudySpec, spec_text: str, storage: StorageSource,
               options: SearchOptions, *, forked: ForkedSweep | None = None) -> optuna.Study:
    """A new study, or more of the study of the spec's name: an exhaustive sweep (stored
    once), or Optuna trials to the target (`trials` more, or the rest of an unfinished
    target when `trials` is not given). `storage` may be a function that opens it: it is
    then opened, with the study, beside the sweep (tuner.engine.opening). `forked`: the
    exhaustive sweep of this spec already running in a child process (tuner.engine.forked),
    whose summary is used in place of sweeping here."""
    _check_objectives(spec)
    space = forked.space if forked is not None else Space.from_spec(spec)
    opening = StudyOpening(lambda: _create(storage, spec, spec_text))
    settings, timeout, choice = _decide(space, options)
    seed = settings["seed"]
    sampler = make_sampler(settings["sampler"], seed=seed, objectives=len(spec.objective))
    if settings["sampler"] == "exhaustive":
        total = choice.plans if choice is not None and choice.counted_all else None
        result = forked.result(skip=opening.settled) if forked is not None else None
        if result is None:
            result = _sweep(space, options, total=total, skip=opening.settled)
        study = opening.study()
        _store(study, space, result, options, settings=settings)
        return study
    study = opening.study()
    study.sampler = sampler
    store_search_settings(study, settings)
    _set_target(study, spec, options)
    _optimize(study, space, settings, options, timeout=timeout)
    return study


def _create(storage: StorageSource, spec: StudySpec, spec_text: str) -> optuna.Study:
    """The study of the spec's name, created or continued (its target kept)."""
    return create_or_continue(storage_of(storage), spec, spec_text,
                              directions=[DIRECTIONS[o] for o in spec.objective],
                              target_trials=None)


def _decide(space: Space, options: SearchOptions
            ) -> tuple[dict[str, Any], float | None, AutoChoice | None]:
    """How to search: the settings to store (sampler, seed, ...), the timeout (seconds or
    None) and `auto`'s choice (None when a sampler was named); `auto` counts the space and
    measures the model's rate on it (a second or so)."""
    spec = space.spec
    requested = options.sampler or spec.search.sampler
    seed = options.seed if options.seed is not None else spec.search.seed
    timeout = options.timeout if options.timeout is not None else spec.search.timeout
    choice = None
    if requested == "auto":
        budget = spec.search.exhaustive_budget if timeout is None else \
            min(spec.search.exhaustive_budget, timeout)
        try:
            choice = choose(space, budget_s=budget, stop=options.stop)
        except Interrupted as err:
            err.detail = ("while counting the space's plans, before any trial: nothing "
                          "searched yet; run the same command again")
            raise
    settings = _settings(space, requested, choice, seed=seed, sweep_inner=options.sweep_inner)
    return settings, timeout, choice


def prepare_search(spec: StudySpec, spec_text: str, storage: optuna.storages.BaseStorage,
                   options: SearchOptions) -> optuna.Study:
    """A study made ready for workers to run, running nothing: created (or continued, as
    run_search would), its sampler chosen (`auto` counts and measures the space here: a
    second or so, never the sweep), its settings stored and, for an Optuna sampler, its
    trial target set. `continue_study` (a `tuner worker`) then runs it: the sweep of an
    exhaustive study, or trials to the target. The HTTP API's POST /v1/studies calls it."""
    _check_objectives(spec)
    space = Space.from_spec(spec)
    settings, _, _ = _decide(space, options)
    study = _create(storage, spec, spec_text)
    _begin(study, spec, settings, options)
    return study


def _begin(study: optuna.Study, spec: StudySpec, settings: dict[str, Any],
           options: SearchOptions) -> None:
    """The search settings stored and, for an Optuna sampler, the trial target set; a study
    whose problem is swept already is left as it is for an exhaustive search (it adds
    nothing)."""
    if settings["sampler"] == "exhaustive":
        if swept(study) is None:
            store_search_settings(study, settings)
        return
    store_search_settings(study, settings)
    _set_target(study, spec, options)


def _set_target(study: optuna.Study, spec: StudySpec, options: SearchOptions) -> None:
    """`trials` more than completed; without `trials`: a new study's spec trials, the rest of
    an unfinished target (said), or the spec's trials more."""
    done, target = complete_count(study), target_trials(study)
    name = study.study_name
    if options.trials is not None:
        new = done + options.trials
        if done:
            options.say(f"study {name}: {counted(done, 'completed trial')}; adding "
                        f"{options.trials:,}")
    elif target == 0 and not study.trials:
        new = spec.search.trials
    elif done < target:
        new = target
        options.say(f"study {name}: continuing to its target of {counted(target, 'trial')} "
                    f"({done} completed); --trials N adds N more instead")
    else:
        new = done + spec.search.trials
        options.say(f"study {name}: {counted(done, 'completed trial')}; adding "
                    f"{spec.search.trials}")
    set_target_trials(study, new)


def continue_study(study: optuna.Study, options: SearchOptions) -> optuna.Study:
    """Run a stored study to its target with its stored spec and search settings (the
    sampler it was started with; a worker's unseeded), refusing a problem that changed; a
    study whose search never began (stopped while `auto` counted) begins as `tuner search`."""
    check_problem(study._storage, study)
    if not began(study):  # stopped while `auto` counted: begin as `tuner search` would have
        spec = stored_spec(study)
        _begin(study, spec, _decide(Space.from_spec(spec), options)[0], options)
    settings = search_settings(study)
    space = Space.from_spec(stored_spec(study))
    if settings["sampler"] == "exhaustive":
        _exhaustive(study, space, options)
        return study
    seed = None if options.worker else settings.get("seed")
    study.sampler = make_sampler(settings["sampler"], seed=seed,
                                 objectives=len(study.directions))
    _optimize(study, space, settings, options, timeout=options.timeout)
    return study


def _sweep(space: Space, options: SearchOptions, *, total: int | None,
           skip: Callable[[], bool] | None = None) -> SweepSummary:
    """The exhaustive sweep, with a progress bar of `total` plans when asked for."""
    with plans_bar(total, enabled=options.progress) as advance:
        return sweep(space, stop=options.stop, progress=advance, skip=skip)


def _store(study: optuna.Study, space: Space, result: SweepSummary,
           options: SearchOptions, *, settings: dict[str, Any] | None = None) -> None:
    """Store a sweep's best plans and its search `settings` (None: stored already), unless
    the study holds a sweep of its problem already: then nothing is written (`auto`'s rate,
    measured anew, is not the one the stored sweep was chosen by); an interrupted sweep
    stores its settings only, and says so, and so does one whose stop was asked for as it
    finished (Ctrl-C or SIGTERM before its plans are written: a stop asked for is a stop,
    whichever of the two processes of a forked sweep saw it first)."""
    done = swept(study)
    if done is not None:
        options.say(f"study {study.study_name}: already swept exhaustively "
                    f"({counted(done['evaluated'], 'plan')}); nothing to add")
        return
    if settings is not None:
        store_search_settings(study, settings)
    stopped = options.stop is not None and options.stop.requested is not None
    if not result.complete or stopped:
        signum = options.stop.requested if options.stop and options.stop.requested else 2
        raise Interrupted(signum, f"the exhaustive sweep of study {study.study_name} stopped "
                                  f"after {counted(result.evaluated, 'plan')}; nothing was stored; "
                                  f"`tuner resume {shlex.quote(study.study_name)}` sweeps it again")
    write_sweep(study, space, result)


def _exhaustive(study: optuna.Study, space: Space, options: SearchOptions) -> None:
    """Sweep the space and store its best plans, unless this problem is already swept."""
    if swept(study) is not None:
        _store(study, space, SweepSummary(best=[], evaluated=0, feasible=0, seconds=0.0),
               options)
        return
    auto = study.user_attrs.get("search", {}).get("auto")
    total = int(auto["plans"]) if isinstance(auto, dict) and auto.get("counted_all") else None
    _store(study, space, _sweep(space, options, total=total), options)


_LOG = logging.getLogger(__name__)
_FINISHED_UNDER_US = (optuna.exceptions.UpdateFinishedTrialError, ValueError)


def _stop_callback(stop: Stop | None) -> Callable[[optuna.Study, Any], None]:
    def callback(study: optuna.Study, trial: Any) -> None:
        if stop is not None and stop.requested is not None:
            study.stop()
    return callback


def _requeue(study: optuna.Study, number: int | None) -> None:
    """Put this worker's interrupted trial back in the queue (WAITING, its parameters kept):
    the next run retries it; it is neither complete nor failed."""
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if trial.number == number:
            # another worker may have taken it for dead and failed it: its retry is queued
            with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
                study._storage.set_trial_state_values(trial._trial_id, TrialState.WAITING)


def _interrupted(study: optuna.Study, err: Interrupted) -> Interrupted:
    done, target = complete_count(study), target_trials(study)
    err.detail = (f"{counted(done, 'completed trial')} of a target of {target:,} "
                  f"{'is' if done == 1 else 'are'} stored; "
                  f"`tuner resume {shlex.quote(study.study_name)}` continues")
    return err


def _optimize(study: optuna.Study, space: Space, settings: dict[str, Any],
              options: SearchOptions, *, timeout: float | None) -> None:
    """Optimise until the study has its target of completed trials (over all workers);
    pruned trials (no valid plan) do not count, and a timeout stops early. Trials of workers
    that are gone (studies.recovery) are failed and, as far as the target still needs them,
    retried, at the start and while running. Once the target is reached, the running trials
    of other workers are waited for (a grace period) and those of dead workers failed; if the
    study then falls short, or retries wait, this worker runs them, so that a finished study
    holds no running or waiting trial. A stop request ends it: the running trial goes back to
    the queue and Interrupted says what is stored."""
    resume_collector()  # a trial loop runs as long as the user wants (tuner.collector)
    target = target_trials(study)
    recover_stale_trials(study, target=target)
    objective = PlanObjective(space, sweep_inner=settings.get("sweep_inner", True),
                              swept=settings.get("swept"), stop=options.stop)
    objective.remember(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    if not study.trials:
        for params in warm_start_params(space, objective.knobs)[:target]:
            study.enqueue_trial(params, skip_if_exists=True)
    callbacks: list[Callable[[optuna.Study, optuna.trial.FrozenTrial], None]] = [
        MaxTrialsCallback(target, states=(TrialState.COMPLETE,)), RecoveryCallback(target),
        _stop_callback(options.stop)]
    deadline = None if timeout is None else time.monotonic() + timeout
    stalled = 0
    try:
        while stalled < _STALLED_PASSES:
            if options.stop is not None:
                options.stop.check()
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
    except Interrupted as err:
        _requeue(study, objective.running)
        raise _interrupted(study, err) from None
    if complete_count(study) == 0:
        raise SpecError("no plan of this space is structurally valid (every trial was "
                        "pruned); widen the plan choices", file=space.spec.file, field="plan")


def _evaluated(study: optuna.Study) -> int:
    """Plans the study's trials evaluated (a trial answered from the cache adds none)."""
    return sum(int(t.user_attrs.get("plans_evaluated", 0))
               for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
               if not t.user_attrs.get("cached"))


def summary(study: optuna.Study, *, top: int = 1) -> dict[str, Any]:
    """The `tuner search --json` object of shared/SPEC.md, with the sampler used (and the
    one asked for), the plans evaluated, and `optimal`: true when an exhaustive sweep of the
    study's problem proves the best plan (or front) optimal."""
    settings = study.user_attrs.get("search", {})
    done = swept(study)
    best = best_payload(study, top=top)  # and `nearest` where none is feasible
    out: dict[str, Any] = {
        "study": study.study_name,
        "trials": complete_count(study),
        "completed": complete_count(study),  # `trials`, named as the status and listing name it
        "target": target_trials(study),
        "best": best["best"],
        "sampler": settings.get("sampler"),
        "requested_sampler": settings.get("requested"),
        "optimal": done is not None,
        "evaluated": int(done["evaluated"]) if done is not None else _evaluated(study),
    }
    if "nearest" in best:
        out["nearest"] = best["nearest"]
    if done is not None:
        out["feasible_plans"] = int(done["feasible_plans"])
    elif "feasible_plans" in study.user_attrs:  # a sweep of an earlier tuner
        out["feasible_plans"] = study.user_attrs["feasible_plans"]
    return out
