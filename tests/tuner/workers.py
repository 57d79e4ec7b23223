"""Helpers for the multi-worker tests: storages to run on (SQLite, journal, PostgreSQL when
TUNER_TEST_POSTGRES_URL is set), a study made by `tuner search`, worker processes, and the
integrity check of a finished study."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest
from click.testing import CliRunner
from optuna.trial import TrialState

from studies import RESULT_ATTR, open_storage
from tuner.cli import main

from .specs import gpt3_narrow, write

ROOT = Path(__file__).resolve().parents[2]
POSTGRES_VAR = "TUNER_TEST_POSTGRES_URL"
NO_POSTGRES = f"needs a PostgreSQL server: set {POSTGRES_VAR} (.ci/run starts one)"


def postgres_url() -> str:
    """The test server's URL; skips the test when there is none."""
    url = os.environ.get(POSTGRES_VAR)
    if not url:
        pytest.skip(NO_POSTGRES)
    return url


def storage_for(kind: str, tmp_path: Path) -> str:
    """A storage URL of `kind`: sqlite, journal or postgres."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'w.db'}"
    if kind == "journal":
        return f"journal:///{tmp_path / 'w.log'}"
    return postgres_url()


def make_study(tmp_path: Path, url: str, target: int) -> str:
    """A study (random sampler: fast trials) with a trial target of `target` and no trials
    run yet, made by `tuner search --timeout 0`; its unique name."""
    name = f"w-{uuid.uuid4().hex[:10]}"
    data = gpt3_narrow(name=name)
    data["search"] = {"sampler": "random", "trials": target, "seed": 0}
    spec = write(tmp_path, data)
    result = CliRunner().invoke(main, ["search", str(spec), "--timeout", "0", "--storage", url,
                                       "--json"])
    assert result.exit_code == 0, result.stderr
    return name


def start_workers(n: int, name: str, url: str, *, heartbeat: int = 10
                  ) -> list[subprocess.Popen[str]]:
    """`n` processes of `python -m tuner worker NAME`."""
    command = [sys.executable, "-m", "tuner", "worker", name, "--storage", url,
               "--heartbeat", str(heartbeat)]
    return [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(n)]


def finish(workers: list[subprocess.Popen[str]], timeout_s: float = 300) -> list[int]:
    """Wait for the workers; their exit codes (each one's stderr shown on failure)."""
    codes = []
    for proc in workers:
        _, err = proc.communicate(timeout=timeout_s)
        assert proc.returncode in (0, -9), f"worker exited {proc.returncode}: {err}"
        codes.append(proc.returncode)
    return codes


def trials(name: str, url: str) -> list[optuna.trial.FrozenTrial]:
    store = open_storage(url, heartbeat_interval_s=None, create=False)
    return optuna.load_study(study_name=name, storage=store).get_trials(deepcopy=False)


def check_integrity(found: list[optuna.trial.FrozenTrial], *, target: int, extra: int
                    ) -> Counter[str]:
    """The study reached `target` complete trials with at most `extra` more; numbers are
    0..n-1 without duplicates; every complete trial holds its values and result; none is left
    running or waiting. The count of trials per state."""
    states = Counter(t.state.name for t in found)
    numbers = sorted(t.number for t in found)
    assert numbers == list(range(len(found))), "duplicate or missing trial numbers"
    assert target <= states["COMPLETE"] <= target + extra, states
    assert not states["RUNNING"] and not states["WAITING"], states
    for t in found:
        if t.state == TrialState.COMPLETE:
            assert t.values is not None and RESULT_ATTR in t.user_attrs, t.number
    return states


def record(found: list[optuna.trial.FrozenTrial]) -> dict[int, Any]:
    """The completed trials: number -> (params, values, user attributes)."""
    return {t.number: (t.params, t.values, t.user_attrs) for t in found
            if t.state == TrialState.COMPLETE}
