"""A SQLite file of another program as --storage: refused before anything is written, where
Optuna added its twenty-odd tables beside the program's own; an empty file, a new path and a
study database (with other tables beside Optuna's or not) open as before."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from pathlib import Path

import optuna
import pytest

from studies import StudyError, close_storage, open_storage
from studies.foreign import OPTUNA_TABLES
from tests.readonly import read_only_directory


def _tables(path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return {name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}


def _program_db(path: Path, *tables: str) -> str:
    """A SQLite file of another program with `tables`, in write-ahead-log mode as many
    programs keep theirs; returns the digest of its bytes."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        for table in tables:
            conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, body TEXT)")
            conn.execute(f"INSERT INTO {table} (body) VALUES ('kept')")
        conn.commit()
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("options", [{}, {"create": False, "read_only": True},
                                     {"heartbeat_interval_s": None, "create": False}])
def test_another_programs_database_is_refused_and_left_as_it_was(
        tmp_path: Path, options: dict[str, object]) -> None:
    path = tmp_path / "notes.db"
    digest = _program_db(path, "notes", "users", "tags", "settings")
    with pytest.raises(StudyError) as caught:
        open_storage(f"sqlite:///{path}", **options)  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"storage sqlite:///{path}: {path} holds another program's tables (notes, settings, "
        "tags and 1 more) and none of Optuna's; give --storage (or TUNER_STORAGE) a new file "
        "or an existing study database")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_it_is_refused_in_a_directory_that_cannot_be_written(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir()
    _program_db(folder / "notes.db", "notes")
    with read_only_directory(folder), pytest.raises(StudyError, match=r"\(notes\) and none"):
        open_storage(f"sqlite:///{folder / 'notes.db'}", heartbeat_interval_s=None,
                     create=False, read_only=True)


def test_the_tables_named_are_all_of_optunas(tmp_path: Path) -> None:
    """OPTUNA_TABLES names every table the installed Optuna makes (a study database of a
    newer Optuna is not taken for another program's)."""
    storage = open_storage(f"sqlite:///{tmp_path / 'studies.db'}", heartbeat_interval_s=None)
    close_storage(storage)
    assert _tables(tmp_path / "studies.db") <= OPTUNA_TABLES


def test_an_empty_file_a_new_path_and_a_study_database_still_open(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    schema_only = tmp_path / "no-tables.db"
    _program_db(schema_only)  # a SQLite header, no table yet
    shared = tmp_path / "shared.db"
    close_storage(open_storage(f"sqlite:///{shared}", heartbeat_interval_s=None))
    with contextlib.closing(sqlite3.connect(shared)) as conn:  # a study database with
        conn.execute("CREATE TABLE notes (id INTEGER)")        # a table of its own beside
        conn.commit()
    for path in (empty, schema_only, tmp_path / "new.db", shared):
        storage = open_storage(f"sqlite:///{path}", heartbeat_interval_s=None)
        optuna.create_study(study_name="s", storage=storage, load_if_exists=True)
        assert optuna.study.get_all_study_names(storage) == ["s"]
        close_storage(storage)
