"""Ctrl-C and SIGTERM on a real `tuner search` process: it stops inside a trial's evaluation,
puts that trial back in the queue (not FAIL), prints one line (completed trials, how to go on)
and exits with 130, without a traceback; `tuner resume` then runs the requeued trial. An
exhaustive sweep stopped the same way stores nothing. The interrupted process closes its
database connections on the way out (no -wal or -shm file left)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from click.testing import CliRunner
from optuna.trial import TrialState

from tuner.cli import main

from .specs import GPT3_1024

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def heavy(name: str, **search: Any) -> dict[str, Any]:
    """GPT-3 175B on four clusters, each with some 650,000 valid plans: `auto` (with a tiny
    budget) falls back to TPE and each trial sweeps one cluster's plans, a quarter of a
    second of cost model, so that a signal lands inside the evaluation."""
    data = yaml.safe_load(GPT3_1024.read_text(encoding="utf-8"))
    data["name"] = name
    data["cluster"] = {"gpu": ["a100-80gb", "h100-80gb"], "nodes": [64, 128],
                       "gpus_per_node": 8,
                       "expansion": {"capacity": "512 GiB", "bandwidth": "64 GB/s"}}
    data["plan"].update({"cp": [1, 2, 4, 8], "micro_batch": [1, 2, 3, 4, 6, 8, 12, 16],
                         "pp": {"min": 1, "max": 98}, "virtual_stages": [1, 2, 3, 4, 6, 8],
                         "offload": ["none", "optimizer", "optimizer+weights"],
                         "sync": ["ring", "tree", "hierarchical", "direct"]})
    data["search"] = {"sampler": "auto", "trials": 30, "seed": 0, "exhaustive_budget": 0.001,
                      **search}
    return dict(data)


def _query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    if not db.is_file():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return list(conn.execute(sql).fetchall())
    except sqlite3.OperationalError:  # tables not made yet
        return []


BEATING = ("SELECT count(*) FROM trials JOIN trial_heartbeats USING (trial_id) "
           "WHERE trials.state = 'RUNNING'")
"""Running trials that beat: their worker is inside the objective."""
STUDY_MADE = "SELECT count(*) FROM studies"
"""The study exists: it is made beside the sweep (tuner.engine.opening), which then runs."""


def _stop_when(command: list[str], db: Path, ready: str, signum: int
               ) -> subprocess.CompletedProcess[str]:
    """Start `command`, send `signum` once the query `ready` counts something, and wait."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 120
        while not (_query(db, ready) and _query(db, ready)[0][0]):
            assert proc.poll() is None, f"ended before the signal: {proc.communicate()}"
            assert time.monotonic() < deadline, "not ready within 120 s"
            time.sleep(0.01)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _states(url: str, name: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=name, storage=url).get_trials()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_requeues_the_running_trial_and_exits_130(tmp_path: Path,
                                                          signum: int) -> None:
    name = f"sig{int(signum)}"
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(heavy(name)), encoding="utf-8")
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    done = _stop_when([sys.executable, "-m", "tuner", "search", str(spec), "--heartbeat", "1",
                       "--storage", url], db, BEATING, signum)

    assert done.returncode == 130
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"interrupted ({signal.Signals(signum).name}): ")
    assert f"`tuner resume {name} --storage {url}` continues" in lines[0]  # as typed
    assert "Traceback" not in done.stderr
    trials = _states(url, name)
    assert not [t for t in trials if t.state in (TrialState.FAIL, TrialState.RUNNING)]
    waiting = [t for t in trials if t.state == TrialState.WAITING]
    assert len(waiting) == 1 and waiting[0].params  # requeued with its parameters

    resumed = CliRunner().invoke(main, ["resume", name, "--storage", url, "--json"])
    assert resumed.exit_code == 0, resumed.stderr
    after = {t.number: t for t in _states(url, name)}
    again = after[waiting[0].number]
    assert again.state == TrialState.COMPLETE and again.params == waiting[0].params
    assert not [t for t in after.values() if t.state == TrialState.FAIL]
    assert json.loads(resumed.stdout)["trials"] == 30


def test_a_stopped_exhaustive_sweep_stores_nothing(tmp_path: Path) -> None:
    data = heavy("sweep-stop")
    data["cluster"]["nodes"] = [16, 32, 64, 128, 256, 512]  # some ten million plans
    spec = tmp_path / "sweep-stop.yaml"
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    db = tmp_path / "x.db"
    url = f"sqlite:///{db}"
    done = _stop_when([sys.executable, "-m", "tuner", "search", str(spec), "--sampler",
                       "exhaustive", "--storage", url], db, STUDY_MADE, signal.SIGINT)

    assert done.returncode == 130 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "nothing was stored" in done.stderr
    assert _states(url, "sweep-stop") == []


@pytest.mark.parametrize("command", ["search", "resume"])
def test_an_interrupted_command_closes_its_database(tmp_path: Path, command: str) -> None:
    """SQLite removes its -wal and -shm files when the last connection closes; a command
    stopped by Ctrl-C closes its connections itself, as a finished one does (the collector
    is paused from the start, tuner.collector, so nothing else would). Ready is watched on
    the files, not through a connection of this test's, which would be the last one."""
    spec = tmp_path / "closing.yaml"
    spec.write_text(yaml.safe_dump(heavy("closing", trials=300)), encoding="utf-8")
    db = tmp_path / "c.db"
    url = f"sqlite:///{db}"
    if command == "resume":
        made = subprocess.Popen([sys.executable, "-m", "tuner", "search", str(spec),
                                 "--storage", url], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        _interrupt_when_writing(made, db)
        argv = ["resume", "closing"]
    else:
        argv = ["search", str(spec)]
    proc = subprocess.Popen([sys.executable, "-m", "tuner", *argv, "--storage", url], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = _interrupt_when_writing(proc, db)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.glob("c.db*")) == ["c.db"]


def _interrupt_when_writing(proc: subprocess.Popen[str], db: Path
                            ) -> subprocess.CompletedProcess[str]:
    """SIGINT once the process has written to `db` for a second, and wait for it."""
    wal = db.with_name(db.name + "-wal")
    try:
        deadline = time.monotonic() + 120
        while not (wal.is_file() and wal.stat().st_size > 0):
            assert proc.poll() is None, f"ended before the signal: {proc.communicate()}"
            assert time.monotonic() < deadline, "no write within 120 s"
            time.sleep(0.05)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
