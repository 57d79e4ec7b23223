"""Where a command reads and writes: the storage (with the note of studies.locate when a study
is found in the earlier default), and files given with --out, whose directory must exist."""

from __future__ import annotations

from pathlib import Path

import click

from studies import directory_problem, locate_storage

from ..errors import TunerError

__all__ = ["out_path", "storage_for"]


def storage_for(cli_value: str | None, *, study: str | None = None) -> str:
    """The storage URL for `study` (or for a listing); its note, if any, on stderr."""
    located = locate_storage(cli_value, study=study)
    if located.note:
        click.echo(located.note, err=True)
    return located.url


def out_path(value: str, *, option: str = "--out") -> Path:
    """The file to write for `option`: its directory must exist (it is not made, so that a
    typo does not put a file far from where the user looks) and it is not a directory."""
    path = Path(value).expanduser()
    problem = directory_problem(path.parent)
    if problem:
        raise TunerError(f"{option} {value}: {problem}, or give a file in an existing "
                         "directory")
    if path.is_dir():
        raise TunerError(f"{option} {value} is a directory; give a file name")
    return path
