"""Storage URLs: default, environment, redaction; opening SQLite files under tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import optuna
import pytest
import sqlalchemy.event
import sqlalchemy.exc
from optuna.trial import TrialState

from studies import (
    DEFAULT_STORAGE_URL,
    StudyError,
    close_storage,
    one_transaction,
    open_storage,
    redact_url,
    storage_url,
)

SECRET_URL = "postgresql+psycopg://user:secret@db.example:5432/studies"


def test_default_url_is_a_sqlite_file_in_the_current_directory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Not under studies/: a folder named like the `studies` package shadowed it for
    `python -m tuner` run in that directory (issue 15)."""
    monkeypatch.delenv("TUNER_STORAGE", raising=False)
    assert storage_url(None) == DEFAULT_STORAGE_URL == "sqlite:///studies.db"


def test_environment_overrides_default_and_cli_overrides_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TUNER_STORAGE", "sqlite:///env.db")
    assert storage_url(None) == "sqlite:///env.db"
    assert storage_url("sqlite:///cli.db") == "sqlite:///cli.db"


@pytest.mark.parametrize("blank", ["", "  "])
def test_an_empty_url_is_an_error_not_the_default(
        blank: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--storage "$URL"` with URL unset gave the default studies.db, unannounced."""
    monkeypatch.delenv("TUNER_STORAGE", raising=False)
    with pytest.raises(StudyError, match=r"^--storage is empty; give a storage URL"):
        storage_url(blank)
    monkeypatch.setenv("TUNER_STORAGE", blank)
    with pytest.raises(StudyError, match=r"^\$TUNER_STORAGE is set but empty; set it"):
        storage_url(None)
    assert storage_url("sqlite:///cli.db") == "sqlite:///cli.db"


@pytest.mark.parametrize("url", [SECRET_URL, "mysql://root:secret@localhost/optuna",
                                 "not a url://user:secret@host/db"])
def test_redaction_hides_the_password(url: str) -> None:
    shown = redact_url(url)
    assert "secret" not in shown and "***" in shown


def test_redaction_keeps_a_url_without_password() -> None:
    assert redact_url("sqlite:///studies/studies.db") == "sqlite:///studies/studies.db"


def test_a_missing_parent_directory_is_an_error_not_made(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "studies.db"
    for url in (f"sqlite:///{path}", f"journal://{path.with_suffix('.log')}"):
        with pytest.raises(StudyError, match=f"directory {path.parent} does not exist"):
            open_storage(url, heartbeat_interval_s=None)
    assert not (tmp_path / "deep").exists()


def test_heartbeat_retries_stale_trials(tmp_path: Path) -> None:
    storage = open_storage(f"sqlite:///{tmp_path / 'h.db'}", heartbeat_interval_s=5,
                           max_retry=2)
    assert storage.heartbeat_interval == 5
    callback = storage.heartbeat_stale_trial_callback
    assert isinstance(callback, optuna.storages.RetryHeartbeatStaleTrialCallback)


def test_a_parent_that_is_a_file_is_a_study_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(StudyError, match=f"{blocker} is a file, not a directory"):
        open_storage(f"sqlite:///{blocker / 'sub' / 'studies.db'}")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root writes anywhere")
def test_an_unwritable_directory_is_a_study_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(StudyError, match="not writable"):
        open_storage(f"sqlite:///{locked / 'studies.db'}")


def test_read_only_open_does_not_create_a_file(tmp_path: Path) -> None:
    path = tmp_path / "none" / "studies.db"
    with pytest.raises(StudyError, match="no file"):
        open_storage(f"sqlite:///{path}", create=False)
    assert not path.parent.exists()


def test_a_server_that_does_not_answer_names_the_redacted_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(url: str, **kwargs: object) -> None:
        raise sqlalchemy.exc.OperationalError(f"connect {url}", None,
                                              ConnectionRefusedError("refused"))

    monkeypatch.setattr(optuna.storages, "RDBStorage", refuse)
    with pytest.raises(StudyError, match="does not answer") as caught:
        open_storage(SECRET_URL, heartbeat_interval_s=None)
    message = str(caught.value)
    assert "secret" not in message and "db.example" in message
    assert len(message.splitlines()) == 1


@pytest.mark.parametrize("url", ["postgresql+psycopg://user:secret@127.0.0.1:9/studies",
                                 "nosuchdb://user:secret@host/db"])
def test_an_unusable_server_url_is_a_one_line_study_error(url: str) -> None:
    with pytest.raises(StudyError) as caught:
        open_storage(url, heartbeat_interval_s=None)
    message = str(caught.value)
    assert "secret" not in message and "***" in message
    assert len(message.splitlines()) == 1


def test_sqlite_takes_the_write_lock_before_popping_or_finishing_a_trial(tmp_path: Path
                                                                          ) -> None:
    """Taking a queued trial and changing a trial's state read then write: they must hold the
    write lock from their read (BEGIN IMMEDIATE), or two workers can take one trial; plain
    reads must not (they would queue behind every writer)."""
    store = open_storage(f"sqlite:///{tmp_path / 's.db'}", heartbeat_interval_s=None)
    study = optuna.create_study(storage=store, study_name="lock")
    study.enqueue_trial({"x": 0.5})
    statements: list[str] = []
    engine = store.engine
    sqlalchemy.event.listen(engine, "before_cursor_execute",
                            lambda _c, _cur, sql, *_: statements.append(sql))
    trial = study.ask()  # pops the queued trial: set_trial_state_values(RUNNING)
    assert trial.number == 0 and not study.get_trials(states=(TrialState.WAITING,))
    assert "BEGIN IMMEDIATE" in statements
    statements.clear()
    study.tell(trial, 1.0)
    assert "BEGIN IMMEDIATE" in statements
    statements.clear()
    study.get_trials()
    store.get_all_trials(study._study_id)
    assert "BEGIN IMMEDIATE" not in statements and statements


def _commits(storage: optuna.storages.BaseStorage) -> list[int]:
    """A list that grows by one for each commit of `storage`'s connections."""
    commits: list[int] = []
    sqlalchemy.event.listen(storage.engine, "commit", lambda _c: commits.append(1))
    return commits


def _trial(x: int) -> optuna.trial.FrozenTrial:
    return optuna.trial.create_trial(
        params={"x": x}, distributions={"x": optuna.distributions.IntDistribution(0, 9)},
        value=float(x), user_attrs={"r": {"x": x}}, system_attrs={"constraints:m": -1.0})


def test_writes_in_one_transaction_commit_once_and_store_what_each_call_did(
        tmp_path: Path) -> None:
    """Each Optuna call commits, and on SQLite each commit waits for the disk (an exhaustive
    search made 24 on its critical path, 5 ms each); inside one_transaction they are one
    commit, and the study reads back exactly as written call by call, also by a new
    connection once committed."""
    storage = open_storage(f"sqlite:///{tmp_path / 'one.db'}", heartbeat_interval_s=None)
    study = optuna.create_study(storage=storage, study_name="one")
    commits = _commits(storage)
    with one_transaction(study):
        for x in range(3):
            study.add_trial(_trial(x))
        study.set_user_attr("swept", {"evaluated": 3})
        assert len(study.get_trials()) == 3  # its own writes, read inside
    assert len(commits) == 1
    again = optuna.load_study(study_name="one", storage=open_storage(
        f"sqlite:///{tmp_path / 'one.db'}", heartbeat_interval_s=None))
    assert [(t.number, t.params, t.value, t.user_attrs, t.system_attrs, t.state)
            for t in again.trials] == [
        (x, {"x": x}, float(x), {"r": {"x": x}}, {"constraints:m": -1.0},
         TrialState.COMPLETE) for x in range(3)]
    assert again.user_attrs == {"swept": {"evaluated": 3}}
    close_storage(storage)


def test_a_block_that_fails_in_one_transaction_stores_none_of_it(tmp_path: Path) -> None:
    """All or nothing: a sweep's plans are never stored without the study's mark that it was
    swept, nor half of them; the storage stays usable, each call committing again."""
    storage = open_storage(f"sqlite:///{tmp_path / 'none.db'}", heartbeat_interval_s=None)
    study = optuna.create_study(storage=storage, study_name="none")
    with pytest.raises(RuntimeError, match="stopped"), one_transaction(study):
        study.add_trial(_trial(1))
        study.set_user_attr("swept", True)
        raise RuntimeError("stopped")
    fresh = optuna.load_study(study_name="none", storage=open_storage(
        f"sqlite:///{tmp_path / 'none.db'}", heartbeat_interval_s=None))
    assert fresh.trials == [] and fresh.user_attrs == {}
    study.add_trial(_trial(2))
    assert [t.params for t in fresh.get_trials()] == [{"x": 2}]
    close_storage(storage)


def test_closing_a_sqlite_storage_checkpoints_its_log_and_keeps_it_usable(tmp_path: Path
                                                                          ) -> None:
    """close_storage closes the connections now (what the garbage collector did at exit):
    SQLite folds the write-ahead log into the file and removes the -wal and -shm files; a
    call afterwards opens a new connection."""
    storage = open_storage(f"sqlite:///{tmp_path / 'c.db'}")
    study = optuna.create_study(storage=storage, study_name="c")
    study.add_trial(optuna.trial.create_trial(
        params={"x": 1}, distributions={"x": optuna.distributions.IntDistribution(0, 2)},
        value=1.0))
    assert (tmp_path / "c.db-wal").exists()
    close_storage(storage)
    assert sorted(p.name for p in tmp_path.glob("c.db*")) == ["c.db"]
    assert [t.value for t in optuna.load_study(study_name="c", storage=storage).trials] == [1.0]
    close_storage(storage)


def test_a_server_that_refuses_says_what_it_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that answers with a reason (no such database, role, SSL) gives it: the line
    was 'does not answer or refused the connection' whatever the server said."""
    said = ('connection to server at "db.example", port 5432 failed: FATAL:  database '
            '"studies" does not exist (password secret)')

    def refuse(url: str, **kwargs: object) -> None:
        raise sqlalchemy.exc.OperationalError(f"connect {url}", None, Exception(said))

    monkeypatch.setattr(optuna.storages, "RDBStorage", refuse)
    with pytest.raises(StudyError) as caught:
        open_storage(SECRET_URL, heartbeat_interval_s=None)
    message = str(caught.value)
    assert 'FATAL: database "studies" does not exist' in message, message
    assert "secret" not in message and len(message.splitlines()) == 1
