"""`tuner studies`, `tuner best NAME` and `tuner export NAME`: reading stored studies back."""

from __future__ import annotations

from pathlib import Path

import click
from optuna.storages import BaseStorage

from studies import (
    best_results,
    export_trials,
    list_studies,
    load_study,
    open_storage,
    redact_url,
    storage_url,
)

from ..views import studies as studies_view
from ..views import text as render
from .options import json_option, storage_option, top_option

__all__ = ["best", "export", "studies"]


def _read_only(url: str) -> BaseStorage:
    """The storage at `url` for reading: no heartbeat, no new SQLite file."""
    return open_storage(url, heartbeat_interval_s=None, create=False)


@click.command()
@storage_option
@json_option
def studies(storage: str | None, as_json: bool) -> None:
    """List the studies in a storage: trials by state and best values."""
    url = storage_url(storage)
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
    study = load_study(_read_only(storage_url(storage)), name)
    results = best_results(study, top=top)
    if as_json:
        click.echo(render.to_json({"study": name, "best": [r.as_dict() for r in results]}))
        return
    pareto = len(study.directions) > 1
    click.echo(studies_view.best_text(name, results, pareto=pareto))


@click.command()
@click.argument("name")
@click.option("--csv", "fmt", flag_value="csv", default=True, help="CSV (the default).")
@click.option("--json", "fmt", flag_value="json", help="A JSON list of rows.")
@click.option("--out", "out", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to FILE instead of stdout.")
@storage_option
def export(name: str, fmt: str, out: str | None, storage: str | None) -> None:
    """The trials of study NAME as CSV or JSON, one row per trial."""
    study = load_study(_read_only(storage_url(storage)), name)
    text = export_trials(study, "json" if fmt == "json" else "csv")
    if out is None:
        click.echo(text, nl=not text.endswith("\n"))
        return
    Path(out).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
