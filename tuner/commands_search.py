"""`tuner search SPEC` and `tuner resume NAME`: run a study to its trial target."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
import optuna

from search_spaces import load_spec
from studies import load_study, open_storage, storage_url, stored_spec

from . import render, render_studies
from .samplers import SAMPLERS
from .search import SearchOptions, continue_study, run_search, summary

__all__ = ["resume", "search"]

_storage_option = click.option(
    "--storage", default=None, metavar="URL",
    help="SQLAlchemy URL of the storage (default $TUNER_STORAGE or "
         "sqlite:///studies/studies.db).")
_heartbeat_option = click.option(
    "--heartbeat", default=10, show_default=True, type=click.IntRange(min=1), metavar="S",
    help="Seconds between a running trial's heartbeats; a trial silent for 2x that is "
         "failed and retried.")


def _report(study: optuna.Study, seconds: float, as_json: bool, top: int) -> None:
    out = summary(study, top=top)
    if as_json:
        click.echo(render.to_json(out))
        return
    pareto = len(study.directions) > 1
    extra = (f", {out['evaluated']:,} plans evaluated, {out['feasible_plans']:,} feasible"
             if "evaluated" in out else "")
    click.echo(f"study {out['study']}: {out['trials']} completed trials{extra} "
               f"({seconds:.1f} s)\n")
    if not out["trials"]:
        click.echo(f"no trial has run yet: `tuner worker {out['study']}` (from any process or "
                   f"machine) or `tuner resume {out['study']}` runs them")
    elif not out["best"]:
        click.echo("no feasible plan: every plan exceeds memory or a constraint; "
                   "`tuner export` shows how far off each was")
    elif pareto:
        click.echo(render_studies.best_text(out["study"], out["best"], pareto=True))
    else:
        tokens = stored_spec(study).training.tokens
        click.echo(render.evaluation_text(out["study"], out["best"][0], tokens=tokens))


def _options(as_json: bool, **given: Any) -> SearchOptions:
    return SearchOptions(progress=not as_json and sys.stderr.isatty(), **given)


@click.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("--sampler", type=click.Choice(SAMPLERS), default=None,
              help="Override search.sampler.")
@click.option("--trials", type=click.IntRange(min=1), default=None,
              help="Override search.trials (trials to add).")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Override search.seed.")
@click.option("--timeout", type=click.FloatRange(min=0), default=None, metavar="S",
              help="Override search.timeout (seconds).")
@click.option("--sweep/--no-sweep", "sweep_inner", default=True, show_default=True,
              help="Sweep the cheap knobs (micro-batch, virtual stages, recompute, sequence "
                   "parallelism, ZeRO, offload) in one vectorised call per trial.")
@click.option("--top", default=1, show_default=True, type=click.IntRange(min=1))
@_storage_option
@_heartbeat_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON only, on stdout.")
def search(spec_path: str, sampler: str | None, trials: int | None, seed: int | None,
           timeout: float | None, sweep_inner: bool, top: int, storage: str | None,
           heartbeat: int, as_json: bool) -> None:
    """A new study, or more trials of the study of that name."""
    spec = load_spec(spec_path)
    started = time.perf_counter()
    store = open_storage(storage_url(storage), heartbeat_interval_s=heartbeat)
    options = _options(as_json, sampler=sampler, trials=trials, seed=seed, timeout=timeout,
                       sweep_inner=sweep_inner)
    study = run_search(spec, Path(spec_path).read_text(encoding="utf-8"), store, options)
    _report(study, time.perf_counter() - started, as_json, top)


@click.command()
@click.argument("name")
@click.option("--timeout", type=click.FloatRange(min=0), default=None, metavar="S")
@click.option("--top", default=1, show_default=True, type=click.IntRange(min=1))
@_storage_option
@_heartbeat_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON only, on stdout.")
def resume(name: str, timeout: float | None, top: int, storage: str | None, heartbeat: int,
           as_json: bool) -> None:
    """Continue an interrupted study to its trial target (its stored spec)."""
    started = time.perf_counter()
    store = open_storage(storage_url(storage), heartbeat_interval_s=heartbeat, create=False)
    study = continue_study(load_study(store, name), _options(as_json, timeout=timeout))
    _report(study, time.perf_counter() - started, as_json, top)
