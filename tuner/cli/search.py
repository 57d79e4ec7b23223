"""`tuner search SPEC` and `tuner resume NAME`: run a study to its trial target."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
import optuna

from search_spaces import load_spec
from studies import best_results, load_study, open_storage, stored_spec

from ..engine.samplers import SAMPLERS
from ..engine.search import SearchOptions, continue_study, run_search, summary
from ..views import studies as studies_view
from ..views import text as render
from .options import (
    check_sampler_flags,
    heartbeat_option,
    json_option,
    storage_option,
    timeout_option,
    top_option,
)
from .paths import storage_for

__all__ = ["resume", "search"]


def _report(study: optuna.Study, seconds: float, as_json: bool, top: int) -> None:
    out = summary(study, top=top)
    if as_json:
        click.echo(render.to_json(out))
        return
    best = best_results(study, top=top)
    pareto = len(study.directions) > 1
    extra = (f", {out['evaluated']:,} plans evaluated, {out['feasible_plans']:,} feasible"
             if "evaluated" in out else "")
    click.echo(f"study {out['study']}: {out['trials']} completed trials{extra} "
               f"({seconds:.1f} s)\n")
    if not out["trials"]:
        click.echo(f"no trial has run yet: `tuner worker {out['study']}` (from any process or "
                   f"machine) or `tuner resume {out['study']}` runs them")
    elif not best:
        click.echo("no feasible plan: every plan exceeds memory or a constraint; "
                   "`tuner export` shows how far off each was")
    elif pareto:
        click.echo(studies_view.best_text(out["study"], best, pareto=True))
    else:
        tokens = stored_spec(study).training.tokens
        click.echo(render.evaluation_text(out["study"], best[0].result, tokens=tokens))


def _options(as_json: bool, **given: Any) -> SearchOptions:
    return SearchOptions(progress=not as_json and sys.stderr.isatty(), **given)


@click.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("--sampler", type=click.Choice(SAMPLERS), default=None,
              help="Override search.sampler.")
@click.option("--trials", type=click.IntRange(min=1), default=None,
              help="Override search.trials (trials to add).")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Override search.seed.")
@timeout_option
@click.option("--sweep/--no-sweep", "sweep_inner", default=True, show_default=True,
              help="Sweep the cheap knobs (micro-batch, virtual stages, recompute, sequence "
                   "parallelism, ZeRO, offload) in one vectorised call per trial.")
@top_option()
@storage_option
@heartbeat_option
@json_option
def search(spec_path: str, sampler: str | None, trials: int | None, seed: int | None,
           timeout: float | None, sweep_inner: bool, top: int, storage: str | None,
           heartbeat: int, as_json: bool) -> None:
    """A new study, or more trials of the study of that name."""
    spec = load_spec(spec_path)
    check_sampler_flags(spec, sampler=sampler, trials=trials, timeout=timeout,
                        sweep_inner=sweep_inner)
    started = time.perf_counter()
    store = open_storage(storage_for(storage, study=spec.name), heartbeat_interval_s=heartbeat)
    options = _options(as_json, sampler=sampler, trials=trials, seed=seed, timeout=timeout,
                       sweep_inner=sweep_inner)
    study = run_search(spec, Path(spec_path).read_text(encoding="utf-8"), store, options)
    _report(study, time.perf_counter() - started, as_json, top)


@click.command()
@click.argument("name")
@timeout_option
@top_option()
@storage_option
@heartbeat_option
@json_option
def resume(name: str, timeout: float | None, top: int, storage: str | None, heartbeat: int,
           as_json: bool) -> None:
    """Continue an interrupted study to its trial target (its stored spec)."""
    started = time.perf_counter()
    store = open_storage(storage_for(storage, study=name), heartbeat_interval_s=heartbeat,
                         create=False)
    study = continue_study(load_study(store, name), _options(as_json, timeout=timeout))
    _report(study, time.perf_counter() - started, as_json, top)
