"""Options shared by several commands, each defined once."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..errors import TunerError
from .advice import remember_storage

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["NumberRange", "check_sampler_flags", "exclusive", "heartbeat_option", "json_option",
           "storage_option", "timeout_option", "top_option"]


class NumberRange(click.FloatRange):
    """A FloatRange that refuses 'nan' too: click's bounds compare False with NaN, so it
    passed them (a time limit that never stops, a share that cannot be rounded)."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number:  # NaN
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


storage_option = click.option(
    "--storage", "storage", default=None, metavar="URL", callback=remember_storage,
    help="The studies' storage: a SQLAlchemy URL (PostgreSQL for many machines), or "
         "journal:///PATH.log on a shared file system (default $TUNER_STORAGE or "
         "sqlite:///studies.db in the current directory; its directory must exist).")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print JSON only, on stdout.")
heartbeat_option = click.option(
    "--heartbeat", default=10, show_default=True, type=click.IntRange(min=1), metavar="S",
    help="Seconds between a running trial's heartbeats (RDB storages); a trial silent for "
         "2x that is failed and retried.")
timeout_option = click.option(
    "--timeout", type=NumberRange(min=0), default=None, metavar="S",
    help="Stop after S seconds even if the trial target is not reached.")


def top_option(default: int = 1) -> Callable[[F], F]:
    """--top K: how many distinct plans to show (single objective; a Pareto front shows all
    its plans)."""
    return click.option("--top", default=default, show_default=True,
                        type=click.IntRange(min=1),
                        help="How many distinct plans to show (single objective).")


def exclusive(*flags: tuple[str, bool]) -> None:
    """TunerError when more than one of the (name, given) flags is given: they contradict."""
    given = [name for name, on in flags if on]
    if len(given) > 1:
        raise TunerError(f"{' and '.join(given)} contradict each other; give one of them")


def check_sampler_flags(spec: Any, *, sampler: str | None, trials: int | None,
                        timeout: float | None, sweep_inner: bool) -> None:
    """TunerError for `tuner search` flags that the sampler in force would ignore (the
    exhaustive sampler evaluates every plan once, so a trial count, a time limit and
    --no-sweep contradict it), and for the gp sampler without PyTorch, named by where it was
    asked for (the flag, or the spec file's field), before any storage is opened."""
    name = sampler or spec.search.sampler
    source = f"--sampler {name}" if sampler else f"{spec.file}: search.sampler: {name}"
    if name == "gp" and importlib.util.find_spec("torch") is None:
        raise TunerError(f"{source}: Optuna's GPSampler needs PyTorch; pip install torch, "
                         "or choose tpe, nsga2 or random")
    if name != "exhaustive":
        return
    ignored = [flag for flag, given in (("--trials", trials is not None),
                                        ("--timeout", timeout is not None),
                                        ("--no-sweep", not sweep_inner)) if given]
    if ignored:
        verb = "contradicts" if len(ignored) == 1 else "contradict"
        raise TunerError(f"{', '.join(ignored)} {verb} {source}, which evaluates every plan "
                         "once; drop it, or give --sampler tpe (or another) to run trials")
