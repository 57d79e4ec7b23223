"""The tuner package's one exception type, and the one-line form of any user error that the
command line (tuner.cli.main) and the HTTP API (tuner.serve) show."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

__all__ = ["InputErrors", "TunerError", "each_or_errors", "one_line"]

_In = TypeVar("_In")
_Out = TypeVar("_Out")

_FILE_ERRORS = {FileNotFoundError: "no such file; check the path",
                IsADirectoryError: "is a directory; give a file",
                PermissionError: "permission denied; check the file's permissions"}


class TunerError(Exception):
    """A command that cannot do what was asked; the message says what to change."""


class InputErrors(TunerError):
    """The errors of several inputs given at once (specs evaluated together), each naming its
    input: the command line prints a line each, the HTTP API joins them with "; "."""

    def __init__(self, errors: Sequence[BaseException]) -> None:
        self.errors = tuple(errors)
        super().__init__("\n".join(one_line(e) for e in self.errors))


def each_or_errors(items: Iterable[_In], do: Callable[[_In], _Out],
                   caught: Callable[[BaseException], bool]) -> list[_Out]:
    """`do` of every item; where some fail with an error `caught` takes for the user's (any
    other is raised as it is), that error alone, or InputErrors of them all, so that one run
    names every input to fix."""
    done: list[_Out] = []
    errors: list[BaseException] = []
    for item in items:
        try:
            done.append(do(item))
        except Exception as err:
            if not caught(err):
                raise
            errors.append(err)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise InputErrors(errors) from errors[0]
    return done


def one_line(err: BaseException) -> str:
    """The error as one line; a file error names the file and what to do; an error of
    several lines (search_spaces.SpecErrors: one per thing wrong) has them joined by "; ",
    each still starting with its file and field."""
    if isinstance(err, OSError):
        what = next((text for kind, text in _FILE_ERRORS.items() if isinstance(err, kind)),
                    f"{err.strerror or type(err).__name__}; check the file and the disk")
        return f"{err.filename}: {what}" if err.filename else what
    lines = [" ".join(line.split()) for line in str(err).splitlines()]
    return "; ".join(line for line in lines if line)
