"""A new SQLite storage copied from the empty database Optuna made once (studies.template): the
copy is byte for byte the file Optuna makes itself (tables, version row, alembic stamp,
write-ahead-log mode), Optuna opens it with all its checks, studies live in it as in any other,
and an existing file (even an empty one) is never replaced."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from studies import open_storage
from studies.identity import CACHE_ENV
from studies.template import template_path


def _made(path: Path, monkeypatch: pytest.MonkeyPatch, cache: str) -> Path:
    with monkeypatch.context() as m:
        m.setenv(CACHE_ENV, cache)
        storage = open_storage(f"sqlite:///{path}")
        storage.engine.dispose()  # type: ignore[attr-defined]
    return path


def _dump(path: Path) -> tuple[list[str], str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return list(conn.iterdump()), conn.execute("PRAGMA journal_mode").fetchone()[0]


def test_the_copy_is_the_file_optuna_makes(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cache = str(tmp_path / "cache")
    own = _made(tmp_path / "own.db", monkeypatch, "off")
    first = _made(tmp_path / "first.db", monkeypatch, cache)  # makes the template
    with monkeypatch.context() as m:
        m.setenv(CACHE_ENV, cache)
        template = template_path()
    assert template is not None and template.is_file()
    copied = _made(tmp_path / "copied.db", monkeypatch, cache)
    assert own.read_bytes() == copied.read_bytes() == first.read_bytes()
    tables, mode = _dump(copied)
    assert mode == "wal" and (tables, mode) == _dump(own)
    assert any("alembic_version" in line for line in tables)
    assert any("INSERT INTO \"version_info\"" in line for line in tables)
    assert (copied.stat().st_mode & 0o777) == (own.stat().st_mode & 0o777)


def test_optuna_opens_the_copy_with_its_checks(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.db"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    storage = open_storage(f"sqlite:///{path}")
    study = optuna.create_study(storage=storage, study_name="one")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    checked = optuna.storages.RDBStorage(f"sqlite:///{path}")  # tables and schema checked
    assert checked.get_current_version() == checked.get_head_version()
    assert len(optuna.load_study(study_name="one", storage=checked).trials) == 3
    optuna_cli = Path(sys.executable).with_name("optuna")  # the `optuna` command, as installed
    listed = subprocess.run([str(optuna_cli), "studies", "--storage",
                             f"sqlite:///{path}", "-f", "json"],
                            capture_output=True, text=True, check=True)
    assert '"one"' in listed.stdout


def test_an_existing_file_is_never_replaced(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    path = tmp_path / "s.db"
    optuna.create_study(storage=open_storage(f"sqlite:///{path}"), study_name="kept")
    reopened = open_storage(f"sqlite:///{path}")
    assert optuna.get_all_study_names(reopened) == ["kept"]
    empty = tmp_path / "empty.db"
    empty.touch()
    storage = open_storage(f"sqlite:///{empty}")  # made the usual way, in place
    assert optuna.get_all_study_names(storage) == [] and empty.stat().st_size > 0


def test_a_damaged_template_is_made_again(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cache = str(tmp_path / "cache")
    own = _made(tmp_path / "own.db", monkeypatch, "off")
    _made(tmp_path / "first.db", monkeypatch, cache)
    with monkeypatch.context() as m:
        m.setenv(CACHE_ENV, cache)
        template = template_path()
    assert template is not None
    template.write_bytes(template.read_bytes()[:4096])
    again = _made(tmp_path / "again.db", monkeypatch, cache)
    assert again.read_bytes() == own.read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_no_cache_folder_is_the_usual_path(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    path = _made(tmp_path / "s.db", monkeypatch, str(blocked))
    assert _dump(path) == _dump(_made(tmp_path / "own.db", monkeypatch, "off"))
    assert os.path.isfile(blocked)


def test_a_copy_is_opened_without_importing_alembic(tmp_path: Path) -> None:
    """Optuna reads a database's alembic stamp on opening it, importing alembic and with it
    four SQLAlchemy dialects; a copy's stamp is the template's, at the head revision, so it
    is not read (studies.retry). The file still passes Optuna's own checks (above)."""
    code = ("import sys; from studies import open_storage; "
            "open_storage(sys.argv[1]); print('alembic' in sys.modules)")
    env = {**os.environ, CACHE_ENV: str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-c", code, f"sqlite:///{tmp_path / name}"],
                           capture_output=True, text=True, check=True, env=env).stdout.split()
            for name in ("first.db", "second.db")]
    assert runs == [["True"], ["False"]]  # the first makes the template with Optuna's own
