"""tuner.collector: the entry points pause the garbage collector while a command starts; a
trial loop resumes it (after freezing what the start made); importing the package as a
library pauses nothing."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuner import collector

ROOT = Path(__file__).resolve().parents[2]
FIXED = ROOT / "search_spaces" / "examples" / "gpt3-175b-a100-fixed.yaml"
SEARCHED = ROOT / "search_spaces" / "examples" / "llama3-70b-64-h100.yaml"


@pytest.fixture()
def restored() -> Iterator[None]:
    """The test process's collector as it was (enabled, nothing frozen by the test)."""
    frozen = gc.get_freeze_count()
    yield
    collector.resume()
    gc.enable()
    if gc.get_freeze_count() != frozen:
        gc.unfreeze()


def test_pause_then_resume_freezes_and_collects_again(restored: None) -> None:
    collector.pause()
    assert not gc.isenabled() and collector.paused()
    made = [[] for _ in range(1000)]  # objects of the start
    collector.resume()
    assert gc.isenabled() and not collector.paused()
    assert gc.get_freeze_count() >= len(made)
    collector.resume()  # a second resume changes nothing
    assert gc.isenabled()


def test_a_collector_turned_off_by_its_owner_stays_off(restored: None) -> None:
    gc.disable()
    collector.pause()
    assert not collector.paused()
    collector.resume()
    assert not gc.isenabled()


def _collecting_at_exit(argv: list[str], cwd: Path) -> str:
    """How the collector stood when a `tuner` process (the script's entry point) exited."""
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('collecting', gc.isenabled(), file=sys.stderr))\n"
            f"sys.argv = ['tuner', *{argv!r}]\n"
            "import tuner\n"
            "tuner.main()\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, check=True)
    return done.stderr.strip().splitlines()[-1]


def test_a_command_starts_paused_and_a_trial_loop_resumes(tmp_path: Path) -> None:
    assert _collecting_at_exit(["evaluate", str(FIXED)], ROOT) == "collecting False"
    storage = f"sqlite:///{tmp_path / 's.db'}"
    searched = ["search", str(SEARCHED), "--sampler", "tpe", "--trials", "2",
                "--storage", storage, "--json"]
    assert _collecting_at_exit(searched, ROOT) == "collecting True"


def test_importing_the_package_pauses_nothing() -> None:
    code = ("import gc, tuner, tuner.cli, tuner.cli.main, tuner.engine.search\n"
            "print(gc.isenabled())\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "True"
