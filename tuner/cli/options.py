"""Options shared by several commands, each defined once."""

from __future__ import annotations

import click

__all__ = ["heartbeat_option", "json_option", "storage_option"]

storage_option = click.option(
    "--storage", "storage", default=None, metavar="URL",
    help="The studies' storage: a SQLAlchemy URL (PostgreSQL for many machines), or "
         "journal:///PATH.log on a shared file system (default $TUNER_STORAGE or "
         "sqlite:///studies/studies.db).")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print JSON only, on stdout.")
heartbeat_option = click.option(
    "--heartbeat", default=10, show_default=True, type=click.IntRange(min=1), metavar="S",
    help="Seconds between a running trial's heartbeats (RDB storages); a trial silent for "
         "2x that is failed and retried.")
