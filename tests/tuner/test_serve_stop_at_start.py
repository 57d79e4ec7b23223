"""A stop that arrives while a server just started is about to resume the study (its
background resumption has not reached it yet) stops it for good: it answered 409 "not
running", then the resumption started the study anyway, so a program that had asked to stop
it saw it run. The resumption is held here in its first read of the storage (no sleeps), the
stop is asked, then the resumption goes on; worker processes are recorded, not spawned."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import optuna
import pytest

from studies import SEARCH_ATTR, process_identity
from tuner.serve import runner as runner_module
from tuner.serve.config import ServeConfig
from tuner.serve.models import StudyStopped
from tuner.serve.progress import SERVE_ATTR
from tuner.serve.runner import Runner
from tuner.serve.service import RequestError, Service

_HOLD_S = 30.0
"""The most a test waits on the held resumption (it answers at once unless it hangs)."""


class _RecordingRunner(Runner):
    """The server's runner with launches recorded, not spawned; `done` once resumed."""

    def __init__(self, storage: optuna.storages.BaseStorage) -> None:
        super().__init__(storage, "sqlite://", workers=2, heartbeat_s=60, max_studies=4)
        self.launched: list[str] = []
        self.done = threading.Event()

    def launch(self, study: optuna.Study, *, count: int, deadline: float | None,
               requested: str | None = None) -> None:
        self.launched.append(study.study_name)

    def resume(self) -> None:
        try:
            super().resume()
        finally:
            self.done.set()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """(reached, release): the resumption's reading of each study waits for `release`;
    `reached` is set once it waits. Released at the end whatever happened."""
    reached, release = threading.Event(), threading.Event()
    load = runner_module.load_study

    def holding(storage: optuna.storages.BaseStorage, name: str) -> optuna.Study:
        reached.set()
        assert release.wait(_HOLD_S), "the test never released the resumption"
        return load(storage, name)

    monkeypatch.setattr(runner_module, "load_study", holding)
    yield reached, release
    release.set()


def _unfinished(storage: optuna.storages.BaseStorage, processes: list[dict[str, Any]]
                ) -> None:
    """Study `s` as a stopped (or crashed) server left it: run by the server, unfinished."""
    study = optuna.create_study(study_name="s", storage=storage)
    study.set_user_attr("target_trials", 10)
    study.set_user_attr(SEARCH_ATTR, {"sampler": "random"})
    study.set_user_attr(SERVE_ATTR, {"workers": 2, "requested": "2026-01-01T00:00:00+00:00",
                                     "deadline": None, "processes": processes})


def _service(runner: Runner) -> Service:
    return Service(config=ServeConfig(storage_url="sqlite://"), storage=runner.storage,
                   runner=runner, admission=runner.admission)


def _stop_while_held(runner: _RecordingRunner, held: tuple[threading.Event, threading.Event]
                     ) -> StudyStopped:
    """Start the runner, stop study `s` while its resumption waits, then let it go on."""
    reached, release = held
    runner.start()
    try:
        assert reached.wait(_HOLD_S)
        answer = _service(runner).stop("s")
        release.set()
        assert runner.done.wait(_HOLD_S)
    finally:
        runner.stop()
    return StudyStopped.model_validate(answer)


def test_a_stop_before_the_resumption_reaches_the_study_stops_it_for_good(
        held: tuple[threading.Event, threading.Event]) -> None:
    storage = optuna.storages.InMemoryStorage()
    _unfinished(storage, processes=[])
    runner = _RecordingRunner(storage)
    stopped = _stop_while_held(runner, held)
    assert (stopped.study, stopped.state, stopped.workers_stopped, stopped.completed,
            stopped.target) == ("s", "stopped", 0, 0, 10)
    assert runner.launched == []  # the resumption skipped it
    assert optuna.load_study(study_name="s", storage=storage).user_attrs[SERVE_ATTR]["stopped"]

    again = _RecordingRunner(storage)  # a server started again leaves it stopped
    again.resume()
    assert again.launched == []


def test_a_stop_before_the_resumption_adopts_a_crashed_server_s_worker_stops_it(
        held: tuple[threading.Event, threading.Event]) -> None:
    """A worker a crashed server left running, which the resumption would adopt, is stopped
    by the stop (it was left running while the stop said 409, then adopted)."""
    worker = subprocess.Popen(["sleep", "60"])
    try:
        storage = optuna.storages.InMemoryStorage()
        _unfinished(storage, processes=[process_identity(worker.pid)])
        runner = _RecordingRunner(storage)
        stopped = _stop_while_held(runner, held)
        assert (stopped.state, stopped.workers_stopped) == ("stopped", 1)
        assert worker.wait(timeout=_HOLD_S) == -15  # SIGTERM, as the server stops its own
        assert runner.launched == [] and runner.live("s") == 0
    finally:
        worker.kill()
        worker.wait()


def test_a_stop_at_start_of_a_study_outside_workers_run_says_they_go_on(
        held: tuple[threading.Event, threading.Event], monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers this server did not start run the study while its resumption is held: the stop
    keeps the server from adding its own (the study is marked, nothing launched) but answers
    409 naming them, as a stop at any other time does, not 200 'stopped' while they run on."""
    storage = optuna.storages.InMemoryStorage()
    _unfinished(storage, processes=[])
    monkeypatch.setattr(Service, "outside", lambda self, study, *, looks: 2)
    runner = _RecordingRunner(storage)
    reached, release = held
    runner.start()
    try:
        assert reached.wait(_HOLD_S)
        with pytest.raises(RequestError) as refused:
            _service(runner).stop("s")
        release.set()
        assert runner.done.wait(_HOLD_S)
    finally:
        runner.stop()
    assert refused.value.status_code == 409
    assert "is run by 2 live workers this server did not start" in str(refused.value)
    assert runner.launched == []
