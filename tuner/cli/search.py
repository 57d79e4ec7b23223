"""`tuner search SPEC` and `tuner resume NAME`: run a study to its trial target."""

from __future__ import annotations

import shlex
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from search_spaces import Space, StudySpec
from search_spaces.fields import MAX_SEED
from search_spaces.wording import counted

from ..engine.forked import forked_sweep
from ..engine.interrupt import Stop
from ..engine.options import SearchOptions, check_objectives
from ..engine.samplers import SAMPLERS
from ..views import text as render
from .advice import advised
from .leaving import leave
from .options import (
    check_sampler_flags,
    heartbeat_option,
    json_option,
    storage_option,
    timeout_option,
    top_option,
)
from .spec_input import load_given, read_given
from .stopping import NOTHING_STORED, Said, as_it_was, finished

if TYPE_CHECKING:
    import optuna

__all__ = ["resume", "search"]

def _headline(out: dict[str, Any], seconds: float, auto: dict[str, Any] | None) -> str:
    """'study NAME: ...': how it was searched, what it evaluated, and whether it is optimal."""
    name, used = out["study"], out.get("sampler")
    if out.get("optimal"):
        chosen = " (auto)" if out.get("requested_sampler") == "auto" else ""
        found = out.get("feasible_plans", 0)
        verdict = f"{found:,} feasible: optimal" if found else "none feasible"
        return (f"study {name}: exhaustive sweep{chosen}, "
                f"{counted(out['evaluated'], 'plan')} evaluated, {verdict} ({seconds:.1f} s)")
    how = f" with {used}" if used else ""
    if used and auto:
        more = "" if auto["counted_all"] else "more than "
        how += (f" (auto: sweeping {more}{counted(auto['plans'], 'plan')} at "
                f"{auto['plans_per_s']:,.0f} plans/s takes {more}{auto['estimate_s']:,.0f} s, "
                f"over the {auto['budget_s']:g} s budget)")
    evaluated = f", {counted(out['evaluated'], 'plan')} evaluated" if out.get("evaluated") else ""
    return (f"study {name}: {counted(out['trials'], 'completed trial')}{how}{evaluated} "
            f"({seconds:.1f} s)")


def _report(study: optuna.Study, seconds: float, as_json: bool, top: int) -> None:
    from studies import best_results, stored_spec

    from ..engine.search import summary
    from ..views import studies as studies_view

    out = summary(study, top=top)
    if as_json:
        click.echo(render.to_json(out))
        return
    best = best_results(study, top=top)
    pareto = len(study.directions) > 1
    auto = study.user_attrs.get("search", {}).get("auto")
    click.echo(_headline(out, seconds, auto if out.get("requested_sampler") == "auto" else None)
               + "\n")
    if not out["trials"]:
        name = shlex.quote(out["study"])
        click.echo(advised(f"no trial has run yet: `tuner worker {name}` (from any process "
                           f"or machine) or `tuner resume {name}` runs them"))
    elif not best:
        click.echo(advised(studies_view.no_feasible_note(study)))
    elif pareto:
        click.echo(studies_view.best_text(out["study"], best, pareto=True))
    else:
        tokens = stored_spec(study).training.tokens
        click.echo(render.evaluation_text(out["study"], best[0].result, tokens=tokens))


def _options(as_json: bool, stop: Stop, **given: Any) -> SearchOptions:
    return SearchOptions(progress=not as_json and sys.stderr.isatty(), stop=stop,
                         notify=lambda line: click.echo(advised(line), err=True), **given)


@click.command()
@click.argument("spec_path", metavar="SPEC")  # a directory: one line (tuner.errors)
@click.option("--sampler", type=click.Choice(SAMPLERS), default=None,
              help="Override search.sampler.")
@click.option("--trials", type=click.IntRange(min=1), default=None,
              help="Override search.trials (trials to add).")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=None,
              help="Override search.seed.")
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
    said = Said(lambda: NOTHING_STORED)  # and once the spec is read, its study `finished`
    with said.around():  # a signal at any moment: one line, exit 130 (tuner.cli.stopping)
        _search(said, spec_path, sampler, trials, seed, timeout, sweep_inner, top, storage,
                heartbeat, as_json)


def _search(said: Said, spec_path: str, sampler: str | None, trials: int | None,
            seed: int | None, timeout: float | None, sweep_inner: bool, top: int,
            storage: str | None, heartbeat: int, as_json: bool) -> None:
    content = read_given(spec_path)  # once: a pipe (`<(command)`, `-`) gives it once
    spec = load_given(spec_path, content)
    said.after = lambda: finished(spec.name)
    check_sampler_flags(spec, sampler=sampler, trials=trials, timeout=timeout,
                        sweep_inner=sweep_inner)
    started = time.perf_counter()
    text = content.decode("utf-8")  # load_spec refused any other encoding

    opened: list[optuna.storages.BaseStorage] = []

    def work(stop: Stop) -> optuna.Study:
        options = _options(as_json, stop, sampler=sampler, trials=trials, seed=seed,
                           timeout=timeout, sweep_inner=sweep_inner)
        return _run(spec, text, storage, heartbeat, options, opened)

    try:
        study = said.run(work)
        _report(study, time.perf_counter() - started, as_json, top)
    finally:  # interrupted or failed too: the connections closed, the WAL checkpointed
        leave(opened)


def _run(spec: StudySpec, text: str, storage: str | None, heartbeat: int,
         options: SearchOptions, opened: list[optuna.storages.BaseStorage]) -> optuna.Study:
    """Run the search; an exhaustive one starts sweeping in a child process before Optuna
    and SQLAlchemy are imported and the storage opened here (tuner.engine.forked). The
    storage, once open, is appended to `opened`."""
    exhaustive = (options.sampler or spec.search.sampler) == "exhaustive"
    if exhaustive:
        check_objectives(spec)
    with forked_sweep(lambda: Space.from_spec(spec), enabled=exhaustive,
                      options=options) as forked:
        from studies import open_storage

        from ..engine.search import run_search
        from .main import optuna_verbosity
        from .paths import storage_for

        optuna_verbosity()
        url = storage_for(storage, study=spec.name)

        def open_it() -> optuna.storages.BaseStorage:
            opened.append(open_storage(url, heartbeat_interval_s=heartbeat))
            return opened[-1]

        return run_search(spec, text, open_it, options,  # it opens beside the sweep
                          forked=forked)


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
    from studies import load_study, open_storage

    from ..engine.search import continue_study
    from .main import optuna_verbosity
    from .paths import storage_for

    said = Said(lambda: as_it_was(name), lambda: finished(name))
    with said.around():  # a signal at any moment: one line, exit 130 (tuner.cli.stopping)
        optuna_verbosity()
        started = time.perf_counter()
        store = open_storage(storage_for(storage, study=name), heartbeat_interval_s=heartbeat,
                             create=False)
        try:
            study = load_study(store, name)
            said.run(lambda stop: continue_study(study, _options(as_json, stop,
                                                                 timeout=timeout)))
            _report(study, time.perf_counter() - started, as_json, top)
        finally:
            leave([store])
