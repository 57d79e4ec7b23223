"""A password inside a storage URL appears in no output and no log line, on a live PostgreSQL
server (debug logging of SQLAlchemy, Optuna and the tuner on), nor in errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import make_url

from .specs import tiny, write
from .workers import ROOT, postgres_url


def _tuner(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_password_stays_out_of_debug_logs_and_output(tmp_path: Path) -> None:
    url = postgres_url()
    password = make_url(url).password
    assert password
    spec = write(tmp_path, tiny("secret-check", search={"sampler": "random", "trials": 3}))
    runs = [_tuner("--debug", "search", str(spec), "--storage", url),
            _tuner("--debug", "studies", "--storage", url),
            _tuner("--debug", "worker", "secret-check", "--storage", url, "--json"),
            _tuner("best", "no-such-study", "--storage", url)]
    assert [r.returncode for r in runs] == [0, 0, 0, 2]
    assert "A new study created" in runs[0].stderr  # the logs were on
    for run in runs:
        assert password not in run.stdout + run.stderr
    wrong = url.replace(password, "not-the-password")
    refused = _tuner("studies", "--storage", wrong)
    assert refused.returncode == 2 and "not-the-password" not in refused.stderr
    assert "***" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
