"""The crash test: `tuner search` killed with SIGKILL mid-run, then `tuner resume`. Completed
trials survive unchanged, the stale running trial is failed and retried, the study reaches its
target and finds what an uninterrupted run finds."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from click.testing import CliRunner
from optuna.trial import TrialState

from studies import set_target_trials
from tuner.cli import main

from .specs import gpt3_narrow, write

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

N = 40
KILL_AFTER = 15  # completed trials before the kill
HEARTBEAT_S = 1
GRACE_S = 2 * HEARTBEAT_S
ROOT = Path(__file__).resolve().parents[2]


def _count(db: Path, query: str) -> int:
    """A count from the SQLite file, read-only (no Optuna: opening an RDBStorage would create
    tables beside the running search); 0 while the tables are not made yet."""
    if not db.is_file():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute(query).fetchone()[0])
    except sqlite3.OperationalError:  # tables not made yet, or locked for a moment
        return 0


COMPLETE = "SELECT count(*) FROM trials WHERE state = 'COMPLETE'"
BEATING = ("SELECT count(*) FROM trials JOIN trial_heartbeats USING (trial_id) "
           "WHERE trials.state = 'RUNNING'")
"""Running trials that have sent a heartbeat: their worker is inside the objective."""


def _record(trials: list[optuna.trial.FrozenTrial]) -> dict[int, tuple[Any, ...]]:
    return {t.number: (t.params, t.values, t.user_attrs) for t in trials
            if t.state == TrialState.COMPLETE}


def _kill_mid_run(spec_path: Path, db: Path) -> None:
    """Start `tuner search` in a subprocess and SIGKILL it inside a trial (one that beats)
    once KILL_AFTER trials are done."""
    command = [sys.executable, "-m", "tuner", "search", str(spec_path), "--trials", str(N),
               "--heartbeat", str(HEARTBEAT_S), "--storage", f"sqlite:///{db}", "--json"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while _count(db, COMPLETE) < KILL_AFTER or _count(db, BEATING) == 0:
            assert proc.poll() is None, f"search ended before the kill: {proc.communicate()}"
            assert time.monotonic() < deadline, "no progress within 60 s"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:  # an assertion above failed: do not leave it running
            proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert _count(db, COMPLETE) < N, "the kill came after the search finished"


def _cli(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_a_killed_search_resumes_to_its_target(tmp_path: Path) -> None:
    spec_path = write(tmp_path, gpt3_narrow(name="kill"))
    db = tmp_path / "k.db"
    url = f"sqlite:///{db}"

    _kill_mid_run(spec_path, db)
    before = optuna.load_study(study_name="kill", storage=url).get_trials()
    done = _record(before)
    running = {t.number for t in before if t.state == TrialState.RUNNING}
    assert KILL_AFTER <= len(done) < N
    assert len(running) <= 1

    time.sleep(GRACE_S + 0.5)  # the running trial's heartbeat is now stale
    resumed = _cli("resume", "kill", "--heartbeat", str(HEARTBEAT_S), "--storage", url,
                   "--json")

    after = optuna.load_study(study_name="kill", storage=url).get_trials()
    by_number = {t.number: t for t in after}
    for number, recorded in done.items():  # completed trials are untouched
        assert by_number[number].state == TrialState.COMPLETE
        assert _record([by_number[number]])[number] == recorded
    complete = [t for t in after if t.state == TrialState.COMPLETE]
    assert len(complete) == N == resumed["trials"]
    assert not [t for t in after if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    for number in running:  # the stale trial was failed, and retried with its params
        stale = by_number[number]
        assert stale.state == TrialState.FAIL
        retries = [t for t in complete if t.system_attrs.get("failed_trial") == number]
        assert len(retries) == 1
        assert stale.params.items() <= retries[0].params.items()  # none if killed in ask()

    reference = _cli("search", str(spec_path), "--trials", str(N), "--storage",
                     f"sqlite:///{tmp_path / 'reference.db'}", "--json")
    assert reference["trials"] == N
    best, expected = resumed["best"][0], reference["best"][0]
    assert best["tokens_per_s"] == pytest.approx(expected["tokens_per_s"], rel=1e-12)
    assert best["plan"] == expected["plan"] and best["cluster"] == expected["cluster"]


def test_a_trial_killed_before_its_first_heartbeat_is_failed_and_retried(
        tmp_path: Path) -> None:
    """The window Optuna's heartbeat misses: a trial created (the sampler proposing) whose
    worker dies before the first beat. Resume must not leave it running for ever."""
    spec_path = write(tmp_path, gpt3_narrow(name="silent"))
    url = f"sqlite:///{tmp_path / 's.db'}"
    _cli("search", str(spec_path), "--trials", "3", "--storage", url, "--json")
    study = optuna.load_study(study_name="silent", storage=url)
    set_target_trials(study, 5)  # as if the killed search had been asked for 5
    orphan = study.ask()  # no heartbeat, ever
    time.sleep(GRACE_S + 0.5)

    resumed = _cli("resume", "silent", "--heartbeat", str(HEARTBEAT_S), "--storage", url,
                   "--json")

    trials = optuna.load_study(study_name="silent", storage=url).get_trials()
    assert trials[orphan.number].state == TrialState.FAIL
    assert [t.state for t in trials if t.system_attrs.get("failed_trial") == orphan.number] \
        == [TrialState.COMPLETE]
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    assert resumed["trials"] == 5
