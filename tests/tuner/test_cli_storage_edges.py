"""Where studies live (issue 15): the default `studies.db` in the current directory, studies
still found in the earlier default `studies/studies.db` (with a note), no directory made for
--storage or --out, studies read from a directory that cannot be written, and `python -m
tuner` run where a `studies/` folder would shadow the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.readonly import read_only_directory
from tuner.cli import main

from .specs import tiny, write

ROOT = Path(__file__).resolve().parents[2]
_FAST = {"sampler": "random", "trials": 3, "seed": 0}


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh current directory with the default storage."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TUNER_STORAGE", raising=False)
    return tmp_path


def test_the_default_storage_is_studies_db_here(here: Path) -> None:
    code, _, err = _run("search", str(write(here, tiny("a", search=_FAST))), "--json")
    assert code == 0, err
    assert (here / "studies.db").is_file() and not (here / "studies").exists()


def _legacy_study(here: Path, name: str) -> None:
    (here / "studies").mkdir(exist_ok=True)
    spec = write(here, tiny(name, search=_FAST))
    code, _, err = _run("search", str(spec), "--storage", "sqlite:///studies/studies.db",
                        "--json")
    assert code == 0, err


def test_a_study_in_the_earlier_default_is_found_with_a_note(here: Path) -> None:
    _legacy_study(here, "old")
    code, out, err = _run("best", "old", "--json")
    assert code == 0 and json.loads(out)["study"] == "old"
    assert err.strip().splitlines() == [
        "note: study 'old' is in studies/studies.db, the default storage of earlier versions "
        "(now studies.db); give --storage sqlite:///studies/studies.db to use it without this "
        "note"]
    code, out, err = _run("studies", "--json")  # no studies.db yet: the old file is listed
    assert code == 0 and [s["name"] for s in json.loads(out)] == ["old"]
    assert err.startswith("note: listing studies/studies.db")
    code, out, err = _run("search", str(here / "old.yaml"), "--trials", "2", "--json")
    assert code == 0 and json.loads(out)["trials"] == 5  # continued where it is
    assert "note: study 'old' is in studies/studies.db" in err
    assert not (here / "studies.db").exists()


def test_with_both_files_the_listing_is_the_new_one_and_says_the_old_holds_more(
        here: Path) -> None:
    _legacy_study(here, "old")
    code, _, err = _run("search", str(write(here, tiny("new", search=_FAST))), "--json")
    assert code == 0, err
    code, out, err = _run("studies", "--json")
    assert code == 0 and [s["name"] for s in json.loads(out)] == ["new"]
    assert "note: 1 more study is in studies/studies.db" in err
    code, _, err = _run("best", "new")
    assert code == 0 and err == ""
    code, _, err = _run("best", "old", "--storage", "sqlite:///studies/studies.db")
    assert code == 0 and err == ""  # named explicitly: no note


def test_no_directory_is_made_for_storage_or_out(here: Path) -> None:
    spec = write(here, tiny("a", search=_FAST))
    for args in (["search", str(spec), "--storage", "sqlite:///deep/studies.db"],
                 ["search", str(spec), "--storage", "deep/team.log"]):
        code, _, err = _run(*args)
        assert code == 2 and "directory deep does not exist; create it (mkdir -p deep)" in err
    assert _run("search", str(spec), "--json")[0] == 0
    for args in (["export", "a", "--out", "deep/a.csv"], ["report", "a", "--out", "deep/a.html"]):
        code, _, err = _run(*args)
        assert code == 2 and "--out deep/" in err and "does not exist" in err
        assert len(err.strip().splitlines()) == 1
    assert not (here / "deep").exists()


def test_a_study_in_a_read_only_directory_can_be_read(here: Path) -> None:
    shared = here / "shared"
    shared.mkdir()
    url = f"sqlite:///{shared / 'studies.db'}"
    spec = write(here, tiny("ro", objective=["time_to_train", "cost"],
                            cluster={"gpu": "a100-80gb", "nodes": [1, 2], "gpus_per_node": 8},
                            search=_FAST))
    assert _run("search", str(spec), "--storage", url, "--json")[0] == 0
    before = sorted(p.name for p in shared.iterdir())
    with read_only_directory(shared):
        code, out, err = _run("studies", "--storage", url, "--json")
        assert code == 0 and json.loads(out)[0]["name"] == "ro", err
        for args in (["best", "ro"], ["export", "ro", "--json"],
                     ["export", "ro", "--out", str(here / "ro.csv")],
                     ["report", "ro", "--out", str(here / "ro.html")]):
            code, out, err = _run(*args, "--storage", url)
            assert code == 0, (args, err)
        assert (here / "ro.html").is_file() and (here / "ro.csv").read_text().count("\n") > 3
        code, _, err = _run("search", str(spec), "--storage", url)  # writing: a clear error
        assert code == 2 and "is not writable" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in shared.iterdir()) == before


def test_python_m_tuner_works_where_a_studies_folder_would_shadow_the_package(
        here: Path) -> None:
    (here / "studies").mkdir()
    (here / "studies" / "studies.db").write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, "-m", "tuner", "catalog", "--json"], cwd=here,
                          capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert "a100-80gb" in json.loads(done.stdout)["gpus"]


def test_a_database_that_fails_in_use_is_one_line(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A storage whose file is damaged past its opening (SQLite's 'database disk image is
    malformed' while the trials are read) is one line by what the database said, exit 2,
    where it was a traceback under Optuna's guess ('invalid data in the commit')."""
    import sqlite3

    import optuna

    import studies.listing

    url = f"sqlite:///{tmp_path / 'd.db'}"
    made = CliRunner().invoke(main, ["search", str(write(tmp_path, tiny("damaged"))),
                                     "--storage", url, "--json"])
    assert made.exit_code == 0, made.stderr

    def damaged(*args: object, **kwargs: object) -> None:
        try:
            raise sqlite3.DatabaseError("database disk image is malformed")
        except sqlite3.DatabaseError as err:
            raise optuna.exceptions.StorageInternalError(
                "An exception is raised during the commit. This typically happens due to "
                "invalid data in the commit, e.g. exceeding max length.") from err

    monkeypatch.setattr(studies.listing, "load_study", damaged)
    result = CliRunner().invoke(main, ["studies", "--storage", url])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: the storage's database failed: database disk image is malformed "
        "(DatabaseError); check the database (a damaged SQLite file: restore it from a "
        "copy) or give another --storage (`tuner --debug ...` shows the traceback)"]
    debug = CliRunner().invoke(main, ["--debug", "studies", "--storage", url])
    assert isinstance(debug.exception, optuna.exceptions.StorageInternalError)


def test_a_storage_that_is_no_url_names_both_kinds() -> None:
    """`journal:` (a journal file meant, its path left out) is told the journal form too."""
    code, _, err = _run("studies", "--storage", "journal:")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "sqlite:///studies.db" in err and "journal:///PATH.log" in err, err


def test_advised_commands_run_as_typed_under_another_storage(here: Path) -> None:
    """A line printed under --storage URL advises commands with that --storage (they looked
    in the default storage, which has no such study), and quotes a study's name for the
    shell: the advised `tuner resume ...`, split as a shell splits it, continues the study."""
    import shlex

    url = f"sqlite:///{here / 'elsewhere.db'}"
    data = tiny("my study", search=_FAST)
    spec = write(here, data)
    assert _run("search", str(spec), "--storage", url)[0] == 0
    code, _, err = _run("best", "nope", "--storage", url)
    assert code == 2 and f"`tuner studies --storage {url}` lists" in err
    data["training"]["global_batch"] *= 2  # another problem under the same name
    code, _, err = _run("search", str(write(here, data)), "--storage", url)
    assert code == 2 and "holds another problem" in err
    advice = err.split("or run `", 1)[1].split("`", 1)[0]
    assert advice == f"tuner resume 'my study' --storage {url}"
    code, _, err = _run(*shlex.split(advice)[1:])
    assert code == 0, err
    assert not (here / "studies.db").exists()


def test_advised_commands_never_print_the_storage_password() -> None:
    """A line printed under `--storage postgresql://user:PASSWORD@host/db` advises its
    commands with the password as *** (it printed the URL whole, password included)."""
    import click

    from tuner.cli.advice import advised

    url = "postgresql+psycopg://tuner:s3cret-pass@db.example:5432/tuner"
    ctx = click.Context(click.Command("studies"))
    ctx.meta["tuner.storage"] = url
    line = advised("error: no study 'x'; `tuner studies` lists the studies there", ctx)
    assert "s3cret-pass" not in line
    assert "`tuner studies --storage 'postgresql+psycopg://tuner:***@db.example:5432/tuner'`" \
        in line


@pytest.mark.parametrize("command", [["search", "SPEC"], ["studies"], ["best", "a"],
                                     ["resume", "a"], ["worker", "a"], ["plan", "a"],
                                     ["explain", "a"], ["export", "a"], ["report", "a"]])
def test_an_empty_storage_is_one_line_not_the_default(here: Path, command: list[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`--storage ""` (or an empty $TUNER_STORAGE) used ./studies.db, unannounced."""
    spec = str(write(here, tiny("a", search=_FAST)))
    args = [spec if a == "SPEC" else a for a in command]
    code, out, err = _run(*args, "--storage", "")
    assert (code, out) == (2, "") and err.splitlines() == [
        "error: --storage is empty; give a storage URL (e.g. sqlite:///studies.db), or leave "
        "--storage out for $TUNER_STORAGE or the default sqlite:///studies.db"], err
    monkeypatch.setenv("TUNER_STORAGE", "")
    code, out, err = _run(*args)
    assert (code, out) == (2, "") and err.splitlines() == [
        "error: $TUNER_STORAGE is set but empty; set it to a storage URL (e.g. "
        "sqlite:///studies.db), or unset it for the default sqlite:///studies.db"], err
    assert not (here / "studies.db").exists()


def test_another_programs_sqlite_file_is_one_line_and_left_as_it_was(here: Path) -> None:
    """Every command that opens a storage used to add Optuna's tables to it."""
    import hashlib
    import sqlite3

    spec = str(write(here, tiny("a", search=_FAST)))
    path = here / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER, body TEXT)")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    for command in (["search", spec], ["studies"], ["best", "a"], ["resume", "a"],
                    ["worker", "a"], ["plan", "a"], ["explain", "a"], ["export", "a"],
                    ["report", "a"]):
        code, out, err = _run(*command, "--storage", "sqlite:///app.db")
        assert (code, out) == (2, "") and err.splitlines() == [
            "error: storage sqlite:///app.db: app.db holds another program's tables (notes) "
            "and none of Optuna's; give --storage (or TUNER_STORAGE) a new file or an "
            "existing study database"], (command, err)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in here.iterdir()) == ["a.yaml", "app.db"]
