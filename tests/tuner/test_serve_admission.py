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

from tuner.serve.config import ServeConfig
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
