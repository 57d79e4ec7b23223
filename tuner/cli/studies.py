"""`tuner studies`, `tuner best NAME` and `tuner export NAME`: reading stored studies back."""

from __future__ import annotations

import click
from optuna.storages import BaseStorage

from studies import (
    best_payload,
    best_results,
    complete_count,
    export_trials,
    list_studies,
    load_study,
    nearest_result,
    open_storage,
    redact_url,
    swept,
)

from ..views import studies as studies_view
from ..views import text as render
from .advice import advised
from .options import exclusive, json_option, storage_option, top_option
from .paths import out_path, storage_for, write_whole

__all__ = ["best", "export", "studies"]


def _read_only(url: str) -> BaseStorage:
    """The storage at `url` for reading: no heartbeat, no new SQLite file, read-only where
    the file may not be written."""
    return open_storage(url, heartbeat_interval_s=None, create=False, read_only=True)


@click.command()
@storage_option
@json_option
def studies(storage: str | None, as_json: bool) -> None:
    """List the studies in a storage: trials by state and best values."""
    url = storage_for(storage)
    summaries = list_studies(_read_only(url))
    if as_json:
        click.echo(render.to_json(summaries))
        return
    click.echo(studies_view.studies_text(summaries, storage=redact_url(url)))


@click.command()
@click.argument("name")
@top_option()
@storage_option
@json_option
def best(name: str, top: int, storage: str | None, as_json: bool) -> None:
    """The best plan(s) of study NAME, or its Pareto front."""
    study = load_study(_read_only(storage_for(storage, study=name)), name)
    if as_json:
        click.echo(render.to_json(best_payload(study, top=top)))
        return
    results = best_results(study, top=top)
    nearest = None if results else nearest_result(study)
    pareto = len(study.directions) > 1
    click.echo(advised(studies_view.best_text(name, results, pareto=pareto, nearest=nearest,
                                              swept=swept(study) is not None,
                                              completed=complete_count(study))))


@click.command()
@click.argument("name")
@click.option("--csv", "as_csv", is_flag=True, help="CSV (the default).")
@click.option("--json", "as_json", is_flag=True, help="A JSON list of rows.")
@click.option("--out", "out", default=None, metavar="FILE",
              help="Write to FILE (in an existing directory) instead of stdout.")
@storage_option
def export(name: str, as_csv: bool, as_json: bool, out: str | None, storage: str | None
           ) -> None:
    """The trials of study NAME as CSV or JSON, one row per trial."""
    exclusive(("--csv", as_csv), ("--json", as_json))
    path = out_path(out) if out is not None else None
    study = load_study(_read_only(storage_for(storage, study=name)), name)
    text = export_trials(study, "json" if as_json else "csv")
    if path is None:
        click.echo(text, nl=not text.endswith("\n"))
        return
    write_whole(path, text if text.endswith("\n") else text + "\n", what="the export")
