"""A SQLite file of another program given as a storage: Optuna would add its twenty-odd tables
to it beside the program's own, unasked. A file is refused when it holds tables and none of
them is Optuna's; an empty file, a file with no table yet and a study database (Optuna's
tables, with others beside them or not) are opened as before. The tables are read without
writing the file or anything beside it (studies.readonly's read-only URI)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from .readonly import read_only_uri

__all__ = ["OPTUNA_TABLES", "foreign_tables"]

OPTUNA_TABLES = frozenset({
    "studies", "study_directions", "study_user_attributes", "study_system_attributes",
    "trials", "trial_params", "trial_values", "trial_intermediate_values",
    "trial_user_attributes", "trial_system_attributes", "trial_heartbeats", "version_info",
    "alembic_version"})
"""The tables of Optuna's RDB storage (optuna.storages._rdb.models) and alembic's stamp."""


def _tables(path: Path) -> list[str] | None:
    """The tables and views of the SQLite file at `path`, sorted; None when it cannot be read
    as one (not SQLite, unreadable: opening it the usual way says so)."""
    try:
        with contextlib.closing(sqlite3.connect(read_only_uri(path), uri=True)) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type IN "
                                "('table', 'view') AND name NOT LIKE 'sqlite\\_%' "
                                "ESCAPE '\\'").fetchall()
    except sqlite3.Error:
        return None
    return sorted(str(name) for (name,) in rows)


def foreign_tables(path: Path) -> list[str]:
    """The tables of another program in the SQLite file at `path` when it holds tables and
    none of Optuna's; [] for a study database, an empty or missing file, or one that is not
    SQLite."""
    if not path.is_file() or path.stat().st_size == 0:
        return []
    tables = _tables(path)
    if not tables or OPTUNA_TABLES.intersection(tables):
        return []
    return tables
