"""A new SQLite storage copied from an empty one Optuna made, instead of made anew each time.

Optuna's RDBStorage makes a new database's tables, its version row and its alembic stamp
(reading alembic's revision scripts to find the head) every time a storage file is new: a
tenth of a second on the critical path of a short search. The database it makes is the same
each time for one version of Optuna (its tables, its version row and the alembic revisions it
ships), SQLAlchemy (which writes the tables' SQL) and SQLite, so the first one is kept
in the user's cache (`sqlite-template/`, one file per version set, made by Optuna's own
RDBStorage in write-ahead-log mode as studies.storage makes every new file) and a new storage
file is a copy of it, opened with RDBStorage's `skip_table_creation` and
`skip_compatibility_check` (what Optuna's documentation offers for a database whose schema is
known to be current). Only a file that does not exist yet is made so: the copy is linked into
place (os.link fails if the name exists), so that two processes making the same file cannot
overwrite each other; an existing file, even an empty one, is opened the usual way.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import tempfile
from pathlib import Path

import optuna
import sqlalchemy

from .identity import cache_root

__all__ = ["copy_template", "template_path"]


def template_path() -> Path | None:
    """The template of this set of versions in the cache folder, or None without a cache."""
    root = cache_root()
    if root is None:
        return None
    versions = (f"optuna-{optuna.__version__}_sqlalchemy-{sqlalchemy.__version__}_"
                f"sqlite-{sqlite3.sqlite_version}")
    return root / "sqlite-template" / f"{versions}.db"


def make_template(path: Path) -> None:
    """An empty storage made by Optuna's RDBStorage at `path` (written whole: made beside it,
    then renamed into place), in write-ahead-log mode with its log checkpointed into the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(handle)
    try:
        with contextlib.closing(sqlite3.connect(temporary)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
        storage = optuna.storages.RDBStorage(f"sqlite:///{temporary}")
        storage.engine.dispose()
        with contextlib.closing(sqlite3.connect(temporary)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        os.replace(temporary, path)
    finally:
        for leftover in (temporary, f"{temporary}-wal", f"{temporary}-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def _sound(template: Path) -> bool:
    """The template is a whole SQLite file: its header's magic, and its size the page size
    times the page count the header gives (https://www.sqlite.org/fileformat.html, 1.3)."""
    data = template.read_bytes()
    if len(data) < 100 or data[:16] != b"SQLite format 3\x00":
        return False
    page = int.from_bytes(data[16:18], "big")
    page = 65536 if page == 1 else page
    return len(data) == page * int.from_bytes(data[28:32], "big")


def copy_template(target: Path) -> bool:
    """Make the new storage file `target` as a copy of the template (made first if the cache
    has none); True if it did, False where it did not (no cache, the cache not writable,
    `target` exists already, no hard links there): the caller then opens it the usual way.
    The copy is made beside `target` with the permissions a new file gets (0666 less the
    umask), then linked into place."""
    template = template_path()
    if template is None or target.exists():
        return False
    try:
        if not template.is_file() or not _sound(template):
            make_template(template)
        data = template.read_bytes()
    except Exception:  # no usable cache: Optuna makes the file as without one
        return False
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())  # as durable as a database SQLite made and committed
        os.link(temporary, target)  # fails if `target` appeared meanwhile
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
