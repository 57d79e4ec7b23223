"""`tuner`: the group of shared/SPEC.md's commands, its one error path, and the two commands
that need no storage (evaluate, catalog). Errors of the library's packages become one line on
stderr with exit code 2 (tracebacks only with --debug)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click
import optuna

import cost
from search_spaces import (
    SpecError,
    SpecErrors,
    gpu_catalog,
    gpu_info,
    load_spec,
    model_catalog,
    model_info,
)
from studies import StudyError

from ..engine.limits import with_spec_limits
from ..errors import TunerError
from ..views import text as render
from . import calibrate, search, worker
from .explain import explain
from .options import json_option
from .report import dashboard, report
from .studies import best, export, studies

__all__ = ["main"]

_USER_ERRORS = (SpecError, cost.CostModelError, StudyError, TunerError, OSError)
_FILE_ERRORS = {FileNotFoundError: "no such file; check the path",
                IsADirectoryError: "is a directory; give a file",
                PermissionError: "permission denied; check the file's permissions"}


def _lines(err: BaseException) -> list[str]:
    """The error as one line, or one line per error of a spec with several (SpecErrors)."""
    if isinstance(err, SpecErrors):
        return [_one_line(e) for e in err.errors]
    return [_one_line(err)]


def _one_line(err: BaseException) -> str:
    """The error as one line; a file error names the file and what to do."""
    if isinstance(err, OSError):
        what = next((text for kind, text in _FILE_ERRORS.items() if isinstance(err, kind)),
                    f"{err.strerror or type(err).__name__}; check the file and the disk")
        return f"{err.filename}: {what}" if err.filename else what
    return " ".join(str(err).split())


class _Group(click.Group):
    """Turns the library's user errors into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _USER_ERRORS as err:
            if ctx.params.get("debug"):
                raise
            for line in _lines(err):
                click.echo(f"error: {line}", err=True)
            sys.exit(2)
        except click.UsageError as err:  # a command's options: one line, not click's banner
            if ctx.params.get("debug"):
                raise
            where = err.ctx.command_path if err.ctx is not None else ctx.command_path
            message = " ".join(err.format_message().split()).replace(". (", " (").rstrip(".")
            message = message[:1].lower() + message[1:]
            click.echo(f"error: {where}: {message}; see `{where} --help`", err=True)
            sys.exit(2)


@click.group(cls=_Group)
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
def main(debug: bool) -> None:
    """Find the fastest parallel strategy and the right cluster for training large models."""
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    optuna.logging.set_verbosity(optuna.logging.INFO if debug else optuna.logging.WARNING)


@main.command()
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
@json_option
def evaluate(specs: tuple[str, ...], as_json: bool) -> None:
    """The cost model on fixed specs: step time, memory, breakdown."""
    results = []
    for path in specs:
        spec = load_spec(path)
        inputs = spec.to_cost_inputs()
        report = cost.evaluate(*inputs, efficiency=spec.efficiency())
        results.append((spec, with_spec_limits(spec, report, cost.plan_result(*inputs, report))))
    if as_json:
        payload = [r.as_dict() for _, r in results]
        click.echo(render.to_json(payload[0] if len(payload) == 1 else payload))
        return
    texts = [render.evaluation_text(s.name, r, tokens=s.training.tokens) for s, r in results]
    click.echo("\n\n".join(texts))


@main.command()
@json_option
def catalog(as_json: bool) -> None:
    """Built-in models and GPUs with their key figures."""
    models, gpus = model_catalog(), gpu_catalog()
    if as_json:
        sources = {n: str(i.get("source", "")) for n, i in model_info().items()}
        descriptions = {n: str(i.get("description", "")) for n, i in gpu_info().items()}
        click.echo(render.to_json(render.catalog_json(
            models, gpus, sources=sources, descriptions=descriptions)))
        return
    click.echo(render.catalog_text(models, gpus))


main.add_command(studies)
main.add_command(best)
main.add_command(export)
main.add_command(search.search)
main.add_command(search.resume)
main.add_command(worker.worker)
main.add_command(report)
main.add_command(explain)
main.add_command(dashboard)
main.add_command(calibrate.calibrate)
