"""studies.exclusively: two blocks on one study, each through a storage of its own (as two
processes have), never run at the same time, on SQLite, a journal file and PostgreSQL; blocks
on two different studies of one PostgreSQL database do not wait for each other."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

import optuna
import pytest

from studies import exclusively, open_storage

POSTGRES_VAR = "TUNER_TEST_POSTGRES_URL"
HOLD_S = 0.6


def _url(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'x.db'}"
    if kind == "journal":
        return f"journal:///{tmp_path / 'x.log'}"
    url = os.environ.get(POSTGRES_VAR)
    if not url:
        pytest.skip(f"needs a PostgreSQL server: set {POSTGRES_VAR} (.ci/run starts one)")
    return url


def _study(url: str, name: str) -> optuna.Study:
    storage = open_storage(url, heartbeat_interval_s=None)
    return optuna.create_study(study_name=name, storage=storage, load_if_exists=True)


def _overlap(first: optuna.Study, second: optuna.Study) -> float:
    """Seconds that `second`'s block ran inside `first`'s, `first` entered first and held
    HOLD_S; the second asks while the first holds."""
    held = threading.Event()
    times: dict[str, float] = {}

    def hold() -> None:
        with exclusively(first):
            held.set()
            time.sleep(HOLD_S)
            times["first_left"] = time.monotonic()

    def ask() -> None:
        held.wait(10)
        with exclusively(second):
            times["second_entered"] = time.monotonic()

    threads = [threading.Thread(target=hold), threading.Thread(target=ask)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return times["first_left"] - times["second_entered"]


@pytest.mark.parametrize("kind", ["sqlite", "journal", "postgres"])
def test_a_second_writer_of_a_study_waits_for_the_first(tmp_path: Path, kind: str) -> None:
    url = _url(kind, tmp_path)
    name = f"one-writer-{uuid.uuid4().hex[:8]}"
    one, two = _study(url, name), _study(url, name)
    assert _overlap(one, two) <= 0.0  # before (no lock off SQLite): ~HOLD_S


def test_writers_of_two_studies_do_not_wait_for_each_other(tmp_path: Path) -> None:
    url = _url("postgres", tmp_path)
    one = _study(url, f"one-writer-{uuid.uuid4().hex[:8]}")
    two = _study(url, f"one-writer-{uuid.uuid4().hex[:8]}")
    assert _overlap(one, two) > HOLD_S / 2


def test_a_block_that_raises_lets_the_next_writer_in(tmp_path: Path) -> None:
    url = _url("journal", tmp_path)
    study = _study(url, "raises")
    with pytest.raises(RuntimeError, match="stopped"), exclusively(study):
        raise RuntimeError("stopped")
    entered = threading.Event()

    def enter() -> None:
        with exclusively(_study(url, "raises")):
            entered.set()

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join(10)
    assert entered.is_set()
