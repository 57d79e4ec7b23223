"""`tuner report NAME` (a self-contained HTML report) and `tuner dashboard NAME`
(optuna-dashboard on the study's storage)."""

from __future__ import annotations

import click

from studies import load_study, name_metrics, open_storage, redact_url

from ..engine.interrupt import default_signals
from ..errors import TunerError
from ..views import text as render
from ..views.report import build_report
from .dashboard import (
    INSTALL_HINT,
    dashboard_installed,
    server_arguments,
    start_server,
    study_address,
)
from .options import storage_option, top_option
from .paths import out_path, storage_for, write_whole

__all__ = ["dashboard", "report"]


def _file_name(study: str) -> str:
    """A study name as a file name in the current directory: path separators (and a leading
    dot, which would hide the file) replaced by '_'."""
    safe = study.replace("/", "_").replace("\\", "_")
    return "_" + safe[1:] if safe.startswith(".") else safe


@click.command()
@click.argument("name")
@click.option("--out", default=None, metavar="FILE",
              help="Where to write the HTML, in an existing directory (default NAME.html, a / in "
                   "NAME written _).")
@top_option(5)
@storage_option
@click.option("--json", "as_json", is_flag=True, help='Print {"report": PATH} only.')
def report(name: str, out: str | None, top: int, storage: str | None, as_json: bool) -> None:
    """An HTML report of study NAME: best plans with their breakdowns, history, Pareto front,
    parameter importances; one file, viewable without a network."""
    path = out_path(out if out is not None else _file_name(name) + ".html")
    store = open_storage(storage_for(storage, study=name), heartbeat_interval_s=None,
                         create=False, read_only=True)
    text = build_report(load_study(store, name), top=top)
    write_whole(path, text, what="the report")
    click.echo(render.to_json({"report": str(path)}) if as_json else str(path))


@click.command()
@click.argument("name")
@storage_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
def dashboard(name: str, storage: str | None, host: str, port: int) -> None:
    """optuna-dashboard on the storage of study NAME (needs the `dashboard` extra)."""
    if not dashboard_installed():
        raise TunerError(f"optuna-dashboard is not installed; {INSTALL_HINT}")
    url = storage_for(storage, study=name)
    store = open_storage(url, heartbeat_interval_s=None, create=False, read_only=True)
    name_metrics(load_study(store, name))
    address = study_address(host=host, port=port,
                            study_id=store.get_study_id_from_name(name))
    click.echo(f"optuna-dashboard on {redact_url(url)}: {address} (Ctrl-C stops)", err=True)
    default_signals()  # the server stops on Ctrl-C (KeyboardInterrupt), as it always did
    start_server(server_arguments(url, host=host, port=port))
