"""Options shared by several commands, each defined once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["heartbeat_option", "json_option", "storage_option", "timeout_option", "top_option"]

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
timeout_option = click.option(
    "--timeout", type=click.FloatRange(min=0), default=None, metavar="S",
    help="Stop after S seconds even if the trial target is not reached.")


def top_option(default: int = 1) -> Callable[[F], F]:
    """--top K: how many distinct plans to show (single objective; a Pareto front shows all
    its plans)."""
    return click.option("--top", default=default, show_default=True,
                        type=click.IntRange(min=1),
                        help="How many distinct plans to show (single objective).")
