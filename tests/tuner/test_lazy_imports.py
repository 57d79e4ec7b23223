"""What a command imports before it needs it, and the exhaustive sweep in a forked process.

`tuner --help` and `tuner evaluate` import neither Optuna, SQLAlchemy nor plotly (they start
fast); `tuner search` imports Optuna and SQLAlchemy only after an exhaustive sweep has been
forked (tuner.engine.forked), so the child sweeps while this process imports and opens the
storage. The forked sweep gives the summary of the sweep in this process; a child that fails
gives None, and the caller then sweeps here (raising what the sweep raises)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import tuner.engine.forked as forked_module
from search_spaces import Space, parse_spec
from tuner.engine.evaluation import result_of
from tuner.engine.exhaustive import sweep
from tuner.engine.forked import ForkedSweep
from tuner.engine.interrupt import Stop

from .specs import EXAMPLES, tiny

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("optuna", "sqlalchemy", "plotly")
FIXED = EXAMPLES / "gpt3-175b-a100-fixed.yaml"
fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")


def _imported_after(code: str) -> list[str]:
    """The heavy packages in sys.modules after `code` runs in a new interpreter."""
    probe = (f"import sys\n{code}\n"
             f"print(__import__('json').dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [["--help"], ["evaluate", str(FIXED)], ["search", "--help"]])
def test_help_and_evaluate_import_no_storage_or_plotting(args: list[str]) -> None:
    code = ("from tuner.cli import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit:\n    pass")
    assert _imported_after(code) == []


def test_the_search_command_and_the_forked_sweep_import_no_storage() -> None:
    code = "import tuner.cli.search, tuner.engine.forked, tuner.engine.options"
    assert _imported_after(code) == []


def _space() -> Space:
    return Space.from_spec(parse_spec(tiny(), name="tiny"))


@fork_only
def test_the_forked_sweep_gives_the_sweep_of_this_process() -> None:
    space = _space()
    here = sweep(space)
    there = ForkedSweep(space, stop=None, progress=False).result()
    assert there is not None and there.complete
    assert (there.evaluated, there.feasible) == (here.evaluated, here.feasible)
    assert there.best == here.best
    assert here.results is None  # worked out when stored (tuner.engine.stored_sweep)
    assert there.results == [result_of(space, c).as_dict() for c, _ in here.best]


@fork_only
def test_a_stop_request_reaches_the_child() -> None:
    stop = Stop()
    stop.request()
    there = ForkedSweep(_space(), stop=stop, progress=False).result()
    assert there is not None and not there.complete and there.evaluated == 0


@fork_only
def test_a_failing_child_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("broken sweep")

    monkeypatch.setattr(forked_module, "sweep", broken)
    assert ForkedSweep(_space(), stop=None, progress=False).result() is None


def test_an_exhaustive_search_forks_its_sweep_and_says_nothing_on_stderr(tmp_path: Path
                                                                         ) -> None:
    """A real process (the fork and Optuna's log level, set once Optuna is imported late):
    the JSON of the sweep, and no log line of Optuna's on stderr. The process closes its
    storage before it freezes its objects for a quick exit (tuner.cli.leaving): SQLite's
    write-ahead log is checkpointed into the file and its -wal and -shm files are gone, and
    the file holds the sweep's trials."""
    spec = tmp_path / "tiny.yaml"
    spec.write_text(yaml.safe_dump(tiny()), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "tuner", "search", str(spec), "--sampler",
                           "exhaustive", "--storage", f"sqlite:///{tmp_path / 's.db'}",
                           "--json"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stderr == ""
    out = json.loads(done.stdout)
    assert out["optimal"] and out["evaluated"] == sweep(_space()).evaluated
    assert sorted(p.name for p in tmp_path.glob("s.db*")) == ["s.db"]
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == out["trials"] > 0
