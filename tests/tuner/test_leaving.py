"""tuner.cli.leaving: a command done with its storages closes them at once and has the
garbage collector's objects frozen at exit, not before (a caller in the same process keeps
its collector until then)."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import optuna

from studies import open_storage
from tuner.cli.leaving import leave

ROOT = Path(__file__).resolve().parents[2]


def test_leave_closes_the_storage_now_and_freezes_nothing_yet(tmp_path: Path) -> None:
    storage = open_storage(f"sqlite:///{tmp_path / 'l.db'}")
    optuna.create_study(storage=storage, study_name="l").set_user_attr("k", 1)
    frozen = gc.get_freeze_count()
    leave([storage])
    assert gc.get_freeze_count() == frozen
    assert sorted(p.name for p in tmp_path.glob("l.db*")) == ["l.db"]


def test_the_objects_are_frozen_at_exit_before_the_handlers_registered_earlier() -> None:
    """atexit runs its handlers last registered first: a handler registered before leave()
    runs after the freeze, and sees it."""
    code = ("import atexit, gc\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
            "from tuner.cli.leaving import leave\n"
            "leave([])\nleave([])\n"
            "print('before exit', gc.get_freeze_count() > 0)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["before exit False", "frozen True"]
