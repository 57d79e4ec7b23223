"""A small finished study to point hostile commands at, and what its database holds."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from tuner.cli import main

from .specs import tiny, write

__all__ = ["database_digest", "stored_study"]


def stored_study(folder: Path) -> tuple[Path, str]:
    """A study database in `folder` holding one small finished study 'kept': (its file, its
    URL)."""
    url = f"sqlite:///{folder / 'studies.db'}"
    data = tiny("kept", search={"sampler": "random", "trials": 3, "seed": 0})
    result = CliRunner().invoke(main, ["search", str(write(folder, data)), "--storage", url,
                                       "--json"])
    assert result.exit_code == 0, result.stderr
    return folder / "studies.db", url


def database_digest(path: Path) -> str:
    """What the database stores (its SQL dump), not its bytes: SQLite may checkpoint its
    write-ahead log into the file whenever a connection closes, which moves bytes and no data."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return hashlib.sha256("\n".join(db.iterdump()).encode()).hexdigest()
