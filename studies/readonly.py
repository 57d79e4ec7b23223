"""Reading a study whose file this process may not write (a colleague's directory, a read-only
mount, an archive): listing, best plans, export and reports need no write.

A SQLite database in write-ahead-log mode needs its `-shm` index file beside it even to read,
and SQLite cannot create it in a directory it may not write ("unable to open database file").
Opened as `immutable` it reads the database file alone, which holds every committed
transaction once the write-ahead log has been checkpointed (as the last connection to close
does, and then removes the log): https://www.sqlite.org/uri.html#uriimmutable. A log left
beside the file (a writer still open, or killed) is read through `mode=ro`, which SQLite
allows when the -shm and -wal files exist (https://www.sqlite.org/wal.html, sec. 5, since
3.22.0). A journal file is read without a lock (Optuna's JournalFileBackend locks only to
write)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

__all__ = ["read_only_uri", "read_only_url", "writable"]


def writable(path: Path) -> bool:
    """Whether this process may write the storage file at `path` and its directory (SQLite
    and the journal's lock both create files beside it)."""
    parent_ok = os.access(path.parent, os.W_OK | os.X_OK)
    return parent_ok and (not path.exists() or os.access(path, os.W_OK))


def _mode(path: Path) -> str:
    wal = path.with_name(path.name + "-wal")
    return "mode=ro" if wal.is_file() and wal.stat().st_size > 0 else "mode=ro&immutable=1"


def read_only_uri(path: Path) -> str:
    """SQLite's URI (for sqlite3.connect(..., uri=True)) that opens the file at `path` for
    reading only, the path percent-encoded (' ' -> %20, '#' -> %23)."""
    return f"file:{quote(str(path.resolve()), safe='/')}?{_mode(path)}"


def read_only_url(path: Path) -> str:
    """A SQLAlchemy URL that opens the SQLite file at `path` for reading only (the path
    percent-encoded for SQLite's URI, and once more for SQLAlchemy, which decodes it)."""
    once = quote(str(path.resolve()), safe="/")  # for SQLite's URI: ' ' -> %20, '#' -> %23
    return f"sqlite:///file:{quote(once, safe='/')}?{_mode(path)}&uri=true"  # SQLAlchemy unquotes
