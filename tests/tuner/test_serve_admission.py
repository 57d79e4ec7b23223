"""POST /v1/studies admits at most --max-studies running studies, however many requests
arrive at once (tuner.serve.service.Service.create_study): the routes call it from several
threads of the thread pool, so the count of running studies and the start of a study's
workers are one step. Here the runner is a stand-in that records launches (no processes)."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import optuna

from studies import SEARCH_ATTR
from tuner.serve.config import ServeConfig
from tuner.serve.progress import SERVE_ATTR
from tuner.serve.runner import Runner
from tuner.serve.service import RequestError, Service

from .specs import tiny


@dataclass
class _Runner:
    """A runner whose workers never end; launching takes a while, as spawning processes does."""

    launched: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def launch(self, study: optuna.Study, *, count: int, deadline: float | None) -> None:
        time.sleep(0.05)
        with self.lock:
            self.launched.append(study.study_name)

    def running(self) -> set[str]:
        with self.lock:
            return set(self.launched)

    def live(self, name: str) -> int:
        with self.lock:
            return self.launched.count(name)

    def outside(self, study: optuna.Study, *, looks: int) -> int:
        return 0  # no worker outside the server


def _post(service: Service, name: str) -> Any:
    body = json.dumps(tiny(name, search={"sampler": "random", "trials": 50})).encode()
    try:
        return service.create_study(body, "application/json")["study"]
    except RequestError as err:
        return err.status_code


def _service(runner: _Runner, max_studies: int) -> Service:
    storage = optuna.storages.InMemoryStorage()
    return Service(config=ServeConfig(storage_url="sqlite://", max_studies=max_studies),
                   storage=storage, runner=runner)  # type: ignore[arg-type]


def test_concurrent_posts_start_no_more_studies_than_max_studies() -> None:
    runner = _Runner()
    service = _service(runner, max_studies=2)
    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(lambda i: _post(service, f"s{i}"), range(6)))
    assert len(runner.running()) == 2, runner.launched
    assert sorted(a for a in answers if isinstance(a, int)) == [429] * 4


def test_one_study_posted_at_once_twice_starts_its_workers_once() -> None:
    runner = _Runner()
    service = _service(runner, max_studies=4)
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda _: _post(service, "same"), range(4)))
    assert answers == ["same"] * 4
    assert runner.launched == ["same"]


class _RecordingRunner(Runner):
    """The server's runner with launches recorded, not spawned (and never ending)."""

    def __init__(self, storage: optuna.storages.BaseStorage, max_studies: int) -> None:
        super().__init__(storage, "sqlite://", workers=2, heartbeat_s=60,
                         max_studies=max_studies)
        self.launched: list[str] = []

    def launch(self, study: optuna.Study, *, count: int, deadline: float | None,
               requested: str | None = None) -> None:
        self.launched.append(study.study_name)

    def running(self) -> set[str]:
        return set(self.launched)


def test_a_restarted_server_resumes_no_more_studies_than_max_studies() -> None:
    """Three unfinished studies a stopped server ran (their workers gone): a server started
    again with --max-studies 2 resumes the two requested first and leaves the third for a
    POST of its spec."""
    storage = optuna.storages.InMemoryStorage()
    for name, requested in (("late", "2026-01-03T00:00:00+00:00"),
                            ("first", "2026-01-01T00:00:00+00:00"),
                            ("second", "2026-01-02T00:00:00+00:00")):
        study = optuna.create_study(study_name=name, storage=storage)
        study.set_user_attr("target_trials", 10)
        study.set_user_attr(SEARCH_ATTR, {"sampler": "random"})
        study.set_user_attr(SERVE_ATTR, {"workers": 2, "requested": requested,
                                         "deadline": None, "processes": []})
    runner = _RecordingRunner(storage, max_studies=2)
    runner.resume()
    assert runner.launched == ["first", "second"]
