"""Helpers for the HTTP API tests: a real `python -m tuner serve` process on a free loopback
port (its log in a file), an httpx client on it, waiting for a study, and the worker
processes a server recorded in its storage."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import optuna

from studies import open_storage

ROOT = Path(__file__).resolve().parents[2]
_ADDRESS = re.compile(r"tuner serve: (http://\S+) ")


@dataclass
class Server:
    """A running `tuner serve`: its process, base URL and log file."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, timeout=60, headers=headers)

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Signal the server and wait for it; its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        return self.proc.wait(timeout=60)


def start(tmp: Path, storage: str, *args: str, env: dict[str, str] | None = None,
          name: str = "server") -> Server:
    """`python -m tuner serve --port 0 --storage URL ARGS` in `tmp`; returns once it answers."""
    log = tmp / f"{name}-{time.monotonic_ns()}.log"
    command = [sys.executable, "-m", "tuner", "serve", "--port", "0", "--storage", storage,
               *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=tmp, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=out,
                                env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 60
    url = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"tuner serve exited {proc.returncode}: {log.read_text()}")
        found = url or _ADDRESS.search(log.read_text(encoding="utf-8", errors="replace"))
        url = found if isinstance(found, str) else found.group(1) if found else None
        if url is not None and _answers(url):
            return Server(proc=proc, url=url, log=log)
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"tuner serve did not answer within 60 s: {log.read_text()}")


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/openapi.json", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def wait_for(client: httpx.Client, name: str, state: str = "done", timeout_s: float = 120
             ) -> dict[str, Any]:
    """Poll GET /v1/studies/NAME until its state is `state`; the status."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = client.get(f"/v1/studies/{name}").json()
        if status.get("state") == state:
            return dict(status)
        assert not status.get("error"), f"study {name}: {status}"
        assert time.monotonic() < deadline, f"study {name} not {state}: {status}"
        time.sleep(0.2)


def study(url: str, name: str) -> optuna.Study:
    store = open_storage(url, heartbeat_interval_s=None, create=False)
    return optuna.load_study(study_name=name, storage=store)


def recorded_workers(url: str, name: str) -> list[int]:
    """The worker pids the server recorded on the study (its `serve` attribute)."""
    record = study(url, name).user_attrs.get("serve") or {}
    return [int(p["pid"]) for p in record.get("processes", [])]


def kill(pids: list[int]) -> None:
    """SIGKILL each process still there (the workers are not our children: not reaped)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@contextlib.contextmanager
def serving(tmp: Path, storage: str, *args: str, env: dict[str, str] | None = None
            ) -> Iterator[Server]:
    """A server for the block; stopped (SIGTERM, then its workers) afterwards."""
    server = start(tmp, storage, *args, env=env)
    try:
        yield server
    finally:
        server.stop()


def kill_recorded_workers(url: str) -> None:
    """SIGKILL the workers a server recorded on any study of the storage (a test's cleanup:
    they are in sessions of their own and outlive a failed test's server)."""
    store = open_storage(url, heartbeat_interval_s=None, create=False)
    for summary in optuna.study.get_all_study_summaries(store, include_best_trial=False):
        record = summary.user_attrs.get("serve") or {}
        kill([int(p["pid"]) for p in record.get("processes", []) if alive(int(p["pid"]))])
