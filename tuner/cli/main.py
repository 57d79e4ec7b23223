"""`tuner`: the group of shared/SPEC.md's commands and its one error path. Errors of the
library's packages become one line on stderr with exit code 2 (tracebacks only with --debug);
a command stopped by Ctrl-C or SIGTERM exits with 130 and one line.

Each command's module is imported only when that command runs (`tuner --help` and
`tuner evaluate` never import Optuna, SQLAlchemy or plotly): the group lists the commands
with their one-line help from the table below."""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Any, NoReturn

import click

from ..engine.interrupt import EXIT_INTERRUPTED, Interrupted
from ..errors import InputErrors, TunerError
from ..errors import one_line as _one_line

__all__ = ["COMMANDS", "NOTHING_CHANGED", "main", "optuna_verbosity", "user_error"]

COMMANDS: dict[str, tuple[str, str]] = {
    "evaluate": ("evaluate", "The cost model on fixed specs: step time, memory, breakdown."),
    "search": ("search", "A new study, or more trials of the study of that name."),
    "resume": ("search", "Continue an interrupted study to its trial target."),
    "worker": ("worker", "Join study NAME and run trials until it has its target."),
    "studies": ("studies", "List the studies in a storage: trials by state and best values."),
    "best": ("studies", "The best plan(s) of study NAME, or its Pareto front."),
    "export": ("studies", "The trials of study NAME as CSV or JSON, one row per trial."),
    "explain": ("explain", "Why a plan takes the time it does, and what would change it."),
    "plan": ("plan", "A study's best plan as a fixed spec or a framework's settings."),
    "catalog": ("evaluate", "Built-in models and GPUs with their key figures."),
    "calibrate": ("calibrate", "Fit the model's efficiency to measured runs."),
    "report": ("report", "An HTML report of study NAME."),
    "dashboard": ("report", "optuna-dashboard on the storage of study NAME."),
    "serve": ("serve", "The HTTP API: evaluate specs and run studies over the network."),
}
"""Command name -> (module of tuner.cli that defines it, one-line help)."""

_LOG_FREE = frozenset({"evaluate", "catalog"})
"""Commands whose code logs nothing and imports no `logging` (tests/tuner/test_evaluate_imports.py):
without --debug they leave logging unconfigured, as it would stay unused, and unimported
(4-5 ms of a start; `tuner --help` configures nothing either)."""

EXIT_USER_ERROR = 2
EXIT_READER_LEFT = 141
"""The reader of stdout left (`tuner best NAME | head`): 128 + SIGPIPE, the status a shell
shows for a Unix tool that its pipe's reader ended (`yes | head`), not 1 (a bug)."""
_ERROR_TYPES = (("search_spaces.errors", "SpecError"), ("cost.errors", "CostModelError"),
                ("studies.errors", "StudyError"))


def _user_errors() -> tuple[type[BaseException], ...]:
    """The library's user-error types among the modules imported so far (an error type of a
    package that was never imported cannot have been raised), and a storage whose database
    fails while in use (a damaged file: optuna's StorageInternalError)."""
    found: list[type[BaseException]] = [TunerError, OSError]
    for module, name in _ERROR_TYPES:
        if module in sys.modules:
            found.append(getattr(sys.modules[module], name))
    if "optuna" in sys.modules:
        found.append(sys.modules["optuna"].exceptions.StorageInternalError)
    return tuple(found)


def user_error(err: BaseException) -> bool:
    """Whether `err` is a user's error (one line, exit 2), not a bug (a traceback)."""
    return isinstance(err, _user_errors())


def _lines(err: BaseException) -> list[str]:
    """The error as one line, or one line per error of a spec with several (SpecErrors) or
    of several inputs (InputErrors)."""
    if isinstance(err, InputErrors):
        return [line for e in err.errors for line in _lines(e)]
    errors = sys.modules.get("search_spaces.errors")
    if errors is not None and isinstance(err, errors.SpecErrors):
        return [_one_line(e) for e in err.errors]
    optuna = sys.modules.get("optuna")
    if optuna is not None and isinstance(err, optuna.exceptions.StorageInternalError):
        return [_database_line(err)]
    return [_one_line(err)]


def _database_line(err: BaseException) -> str:
    """A storage's database failing in use, by what the database itself said (Optuna's own
    message guesses at invalid data): 'the storage's database failed: database disk image is
    malformed (DatabaseError) ...'."""
    root = err
    while root.__cause__ is not None:
        root = root.__cause__
    said = _one_line(root) if root is not err else "no reason given"
    return (f"the storage's database failed: {said} ({type(root).__name__}); check the "
            "database (a damaged SQLite file: restore it from a copy) or give another "
            "--storage (`tuner --debug ...` shows the traceback)")


class _Group(click.Group):
    """Imports a command's module when the command is asked for; turns the library's user
    errors into one line on stderr and exit code 2, an interruption into exit code 130."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(f"{__package__}.{COMMANDS[cmd_name][0]}")
        command: click.Command = getattr(module, cmd_name)
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        """click's, with the command a mistyped or familiar name likely meant (`tuner list`:
        `tuner studies`)."""
        name = args[0] if args else ""
        if name and name not in COMMANDS and not name.startswith("-"):
            import difflib  # only for a command that does not exist

            near = _SYNONYMS.get(name) or next(
                iter(difflib.get_close_matches(name, list(COMMANDS), n=1)), None)
            if near is not None:
                ctx.fail(f"no such command {name!r} (did you mean `tuner {near}`?)")
        return super().resolve_command(ctx, args)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """click's, with an unknown option of `tuner` itself (`tuner --bogus evaluate`) one
        line as a command's is, not click's usage banner."""
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as err:
            _usage_line(err, ctx)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items()])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Interrupted as err:  # a signal at any moment (tuner.engine.interrupt)
            _interrupted_line(err, ctx)
        except KeyboardInterrupt:  # Python's own handler (a server's, a library caller's)
            _interrupted_line(Interrupted(signal.SIGINT), ctx)
        except BrokenPipeError:  # the reader of stdout left (`tuner best NAME | head`)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(EXIT_READER_LEFT)
        except click.UsageError as err:  # a command's options: one line, not click's banner
            if ctx.params.get("debug"):
                raise
            _usage_line(err, ctx)
        except Exception as err:
            if ctx.params.get("debug") or not isinstance(err, _user_errors()):
                raise
            from .advice import advised

            for line in _lines(err):
                click.echo(f"error: {advised(line, ctx)}", err=True)
            sys.exit(EXIT_USER_ERROR)


def _interrupted_line(err: Interrupted, ctx: click.Context) -> NoReturn:
    """A command stopped by a signal: one line on stderr saying what is stored and how to go
    on (the search's own, or the command's), exit code 130."""
    from .advice import advised

    click.echo(advised(err.line if err.detail else f"{err.line}: {NOTHING_CHANGED}", ctx),
               err=True)
    sys.exit(EXIT_INTERRUPTED)


NOTHING_CHANGED = "no stored study was changed; run the same command again"
"""What a command other than a search's says when a signal stops it (it writes no study)."""


def _usage_line(err: click.UsageError, ctx: click.Context) -> NoReturn:
    """A usage error as one line on stderr, exit code 2: 'error: tuner search: invalid value
    for '--trials': ...; see `tuner search --help`'."""
    where = err.ctx.command_path if err.ctx is not None else ctx.command_path
    message = " ".join(err.format_message().split()).replace(". (", " (").rstrip(".")
    message = message[:1].lower() + message[1:]
    click.echo(f"error: {where}: {message}; see `{where} --help`", err=True)
    sys.exit(EXIT_USER_ERROR)


_SYNONYMS = {"list": "studies", "ls": "studies", "show": "best", "run": "search",
             "eval": "evaluate", "open": "dashboard"}
"""Names other tools use for what a tuner command does."""


@click.group(cls=_Group)
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
def main(debug: bool) -> None:
    """Find the fastest parallel strategy and the right cluster for training large models."""
    if debug or click.get_current_context().invoked_subcommand not in _LOG_FREE:
        import logging

        logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
    optuna_verbosity()


def optuna_verbosity() -> None:
    """Optuna's log level by --debug (INFO, else WARNING), once Optuna is imported: by the
    command's module, or later by a command that imports it when it needs it (call this
    then)."""
    if "optuna" in sys.modules:
        ctx = click.get_current_context(silent=True)
        debug = bool(ctx is not None and ctx.find_root().params.get("debug"))
        optuna = sys.modules["optuna"]
        optuna.logging.set_verbosity(optuna.logging.INFO if debug else optuna.logging.WARNING)
