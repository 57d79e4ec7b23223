"""The tuner package's one exception type, and the one-line form of any user error that the
command line (tuner.cli.main) and the HTTP API (tuner.serve) show."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["InputErrors", "TunerError", "one_line"]

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
