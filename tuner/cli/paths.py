"""Where a command reads and writes: the storage (with the note of studies.locate when a study
is found in the earlier default), and files given with --out, whose directory must exist."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import click

from studies import directory_problem, locate_storage

from ..errors import TunerError

__all__ = ["out_path", "storage_for", "write_whole"]


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


def write_whole(path: Path, text: str, *, what: str, option: str = "--out") -> None:
    """`text` into `path` whole: written to a temporary file beside it and renamed over it, so
    that a signal, a full disk or an error mid-write leaves the file as it was (a cut
    calibration profile would be read by every study that names it). TunerError, one line,
    when it cannot be written. A path that is there and is no regular file (/dev/stdout, a
    named pipe) is written as it is: nothing could be renamed over it; a link to a file
    writes the file it links to, as writing through it did."""
    if path.is_symlink() and path.is_file():
        path = path.resolve()
    if path.exists() and not path.is_file():
        try:
            with path.open("w", encoding="utf-8") as out:
                out.write(text)
        except OSError as err:
            raise TunerError(f"{path}: cannot write {what} ({err.strerror}); give {option} "
                             "a writable file") from err
        return
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                             suffix=".tmp")
    except OSError as err:
        raise TunerError(f"{path}: cannot write {what} ({err.strerror}); give {option} a "
                         "writable file") from err
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        with contextlib.suppress(OSError):  # a new file gets the permissions open() gives
            mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask()
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as err:
        raise TunerError(f"{path}: cannot write {what} ({err.strerror}); give {option} a "
                         "writable file") from err
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
