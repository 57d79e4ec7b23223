"""Studies over HTTP: posted, run in the background by worker processes, read back; and the
server's crashes. The semantics tested (tuner.serve.runner):

- a machine crash (the server and its workers killed with SIGKILL): a server started again
  on the storage starts new workers; the trial that was running is failed once its
  heartbeat is stale and retried, and the study ends with exactly its target of completed
  trials (one worker per study here: with several, up to one trial per worker may go past
  the target, as with `tuner worker`), none lost, duplicated, running or waiting;
- the server alone killed: its workers go on; the next server adopts them (it starts none);
- the server stopped (SIGTERM): it stops its workers, which queue their running trial
  again; the next server resumes the study."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from optuna.trial import TrialState

from tuner.serve.models import StudyCreated, StudyStatus

from .serving import (
    Server,
    alive,
    kill,
    kill_recorded_workers,
    recorded_workers,
    serving,
    start,
    study,
    wait_for,
)
from .specs import tiny
from .workers import check_integrity, record

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

HEARTBEAT = ("--heartbeat", "1")


@pytest.fixture(autouse=True)
def _no_stray_workers(tmp_path: Path) -> Iterator[None]:
    yield
    if (tmp_path / "s.db").is_file():
        kill_recorded_workers(f"sqlite:///{tmp_path / 's.db'}")


def _spec(name: str, *, trials: int, sampler: str = "tpe") -> dict[str, Any]:
    return tiny(name, search={"sampler": sampler, "trials": trials, "seed": 0})


def _post(client: httpx.Client, data: dict[str, Any]) -> StudyCreated:
    answer = client.post("/v1/studies", json=data)
    assert answer.status_code == 202, answer.text
    made = StudyCreated.model_validate(answer.json())
    assert answer.headers["location"] == made.location == f"/v1/studies/{made.study}"
    return made


def _wait_complete(client: httpx.Client, name: str, at_least: int) -> None:
    deadline = time.monotonic() + 120
    while client.get(f"/v1/studies/{name}").json()["completed"] < at_least:
        assert time.monotonic() < deadline, f"study {name}: no progress"
        time.sleep(0.05)


def _workers_gone(client: httpx.Client, name: str) -> None:
    """Wait until no worker of the study runs: "done" says nothing is left to run, read at one
    moment; a worker that saw the study one trial short just before may still start a trial
    (at most one per worker past the target), which shows as running until it ends."""
    deadline = time.monotonic() + 60
    while client.get(f"/v1/studies/{name}").json()["workers"]:
        assert time.monotonic() < deadline, f"study {name}: workers still running"
        time.sleep(0.1)


def test_a_posted_study_runs_in_the_background_and_reads_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with serving(tmp_path, url, "--workers", "2", *HEARTBEAT) as server, \
            server.client() as client:
        made = _post(client, _spec("posted", trials=12))
        assert (made.sampler, made.requested_sampler, made.target, made.workers) == \
            ("tpe", "tpe", 12, 2)
        done = StudyStatus.model_validate(wait_for(client, "posted"))
        assert 12 <= done.completed <= 13 and done.optimal is False and done.error is None
        _workers_gone(client, "posted")  # the other worker may start its one extra trial
        check_integrity(study(url, "posted").get_trials(), target=12, extra=1)

        best = client.get("/v1/studies/posted/best").json()
        assert best["study"] == "posted" and len(best["best"]) == 1
        rows = client.get("/v1/studies/posted/trials").json()
        assert len(rows) == len(study(url, "posted").trials)
        for fmt, words in (("spec", "plan:"), ("megatron", "--tensor-model-parallel-size"),
                           ("nemo", "tensor_model_parallel_size"),
                           ("torchtitan", "[parallelism]")):
            plan = client.get("/v1/studies/posted/plan", params={"as": fmt})
            assert plan.status_code == 200 and words in plan.text, fmt
        trial = best["best"][0]["trial"]
        assert f"trial {trial}" in client.get("/v1/studies/posted/plan",
                                              params={"as": "megatron", "trial": trial}).text
        report = client.get("/v1/studies/posted/report")
        assert report.status_code == 200 and report.text.lstrip().startswith("<!DOCTYPE html")

        again = _post(client, _spec("posted", trials=12))  # as `tuner search` again: 12 more
        assert again.target >= done.completed + 12  # N more than complete when posted
        assert wait_for(client, "posted")["completed"] >= again.target


def test_a_small_space_is_swept_and_proven_optimal(tmp_path: Path) -> None:
    """On the default storage, relative to the server's directory (workers run `tuner`, not
    `python -m`, so nothing in that directory shadows a package)."""
    with serving(tmp_path, "sqlite:///studies.db") as server, \
            server.client() as client:
        made = _post(client, _spec("swept", trials=20, sampler="auto"))
        assert (made.sampler, made.requested_sampler, made.workers) == ("exhaustive", "auto", 1)
        done = wait_for(client, "swept")
        assert done["optimal"] is True and done["evaluated"] > 0 and done["feasible_plans"] > 0
        again = _post(client, _spec("swept", trials=20, sampler="auto"))
        assert again.sampler == "exhaustive"  # swept already: nothing to run, none started
        assert server.text().count("worker process(es) started") == 1


def test_study_requests_that_cannot_run_are_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with serving(tmp_path, url, "--max-studies", "1") as server, server.client() as client:
        nameless = {k: v for k, v in _spec("x", trials=5).items() if k != "name"}
        answer = client.post("/v1/studies", json=nameless)
        assert answer.status_code == 422 and answer.json()["error"].startswith("request: name")
        assert client.post("/v1/studies", json=_spec("a/b", trials=5)).status_code == 422
        assert client.post("/v1/studies", json=[_spec("x", trials=5)]).status_code == 422

        _post(client, _spec("long", trials=400, sampler="random"))
        busy = client.post("/v1/studies", json=_spec("other", trials=5))
        assert busy.status_code == 429 and "--max-studies" in busy.json()["error"]
        changed = _spec("long", trials=400, sampler="random")
        changed["training"] = {**changed["training"], "global_batch": 64}
        conflict = client.post("/v1/studies", json=changed)
        assert conflict.status_code == 409 and "holds another problem" in conflict.text
        workers = recorded_workers(url, "long")
        # SIGTERM: the server stops (uvicorn exits by the signal once shut down) and stops its
        # workers first, each queueing its running trial again
        assert server.stop() in (0, -signal.SIGTERM)
    assert not any(alive(pid) for pid in workers)
    left = study(url, "long").get_trials()
    assert not [t for t in left if t.state == TrialState.RUNNING]


@pytest.mark.slow
def test_a_machine_crash_loses_no_trial(tmp_path: Path) -> None:
    """The server and its worker killed with SIGKILL mid-study; a new server finishes it."""
    url, target = f"sqlite:///{tmp_path / 's.db'}", 60
    server = start(tmp_path, url, "--workers", "1", *HEARTBEAT)
    with server.client() as client:
        _post(client, _spec("crash", trials=target))
        _wait_complete(client, "crash", 10)
    workers = recorded_workers(url, "crash")
    kill([server.proc.pid, *workers])
    server.proc.wait(timeout=30)
    before = study(url, "crash").get_trials()
    done = record(before)
    running = [t.number for t in before if t.state == TrialState.RUNNING]
    assert 10 <= len(done) < target and len(running) <= 1

    _finish(start(tmp_path, url, "--workers", "1", *HEARTBEAT), "crash")
    after = study(url, "crash").get_trials()
    states = check_integrity(after, target=target, extra=0)
    assert states["COMPLETE"] == target
    kept = record(after)
    assert all(kept[n] == r for n, r in done.items()), "a completed trial changed"
    for number in running:  # failed, and retried once
        assert after[number].state == TrialState.FAIL
        assert [t.system_attrs.get("failed_trial") for t in after].count(number) == 1


@pytest.mark.slow
def test_workers_outlive_a_killed_server_and_are_adopted(tmp_path: Path) -> None:
    """The worker must still run when the new server is up: it is held (SIGSTOP) from the
    kill until the new server says it adopted it, then let go (SIGCONT). Unheld, it raced
    the new server's start: a worker runs 5-10 trials in each second a server takes to start
    (some 2 s, far more on a loaded machine), and one that finished the 80 first was never
    adopted."""
    url, target = f"sqlite:///{tmp_path / 's.db'}", 80
    server = start(tmp_path, url, "--workers", "1", *HEARTBEAT)
    with server.client() as client:
        _post(client, _spec("orphan", trials=target, sampler="random"))
        _wait_complete(client, "orphan", 5)
    workers = recorded_workers(url, "orphan")
    server.stop(signal.SIGKILL)
    assert all(alive(pid) for pid in workers), "the workers died with the server"
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)

    restarted = start(tmp_path, url, "--workers", "1", *HEARTBEAT)
    try:
        deadline = time.monotonic() + 60
        while "running worker(s) adopted" not in restarted.text():
            assert time.monotonic() < deadline, restarted.text()
            time.sleep(0.1)
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
        with restarted.client() as client:
            status = wait_for(client, "orphan", state="done")
    finally:
        for pid in workers:  # let go whatever happened: the stop below ends it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        restarted.stop()
    assert "1 running worker(s) adopted" in restarted.text()
    assert "worker process(es) started" not in restarted.text()
    assert status["completed"] == target
    check_integrity(study(url, "orphan").get_trials(), target=target, extra=0)


def _finish(server: Server, name: str) -> dict[str, Any]:
    """Wait for the study on `server`, then stop the server; the final status."""
    try:
        with server.client() as client:
            return wait_for(client, name)
    finally:
        server.stop()


def test_a_stopped_server_closes_its_database(tmp_path: Path) -> None:
    """SIGTERM: uvicorn ends the process by the signal once it has shut down, without
    Python's exit; the app's shutdown has closed the server's connections by then, and its
    workers close theirs, so SQLite checkpoints its write-ahead log and removes the -wal and
    -shm files. (Watched over HTTP only: a connection of this test's would be the last.)"""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    server = start(tmp_path, url, "--workers", "1")
    with server.client() as client:
        _post(client, _spec("closing", trials=8))
        wait_for(client, "closing")
    assert server.stop() in (0, -signal.SIGTERM)
    assert sorted(p.name for p in tmp_path.glob("c.db*")) == ["c.db"]
