"""What `tuner evaluate` does to its own process (issue 14). It leaves the objects alive at exit to
the operating system: the command registers gc.freeze (tuner.cli.leaving) as an exit handler, so
the interpreter's finalization does not collect the cycles of the modules it imported; a real
process still prints its whole answer and caches it, and every other exit handler runs. And it
asks OpenBLAS for one thread before numpy's first import (a user's choice kept): the process
runs no thread but its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tuner.cli import main

from .specs import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
FIXED = EXAMPLES / "gpt3-175b-a100-fixed.yaml"


def test_a_real_process_prints_and_caches_its_whole_answer(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tuner", "evaluate", str(FIXED), "--json"],
                          cwd=ROOT, capture_output=True, text=True, check=True,
                          env={**os.environ, "TUNER_CACHE_DIR": str(tmp_path)})
    here = CliRunner().invoke(main, ["evaluate", str(FIXED), "--json"],
                              env={"TUNER_CACHE_DIR": "off"})
    assert json.loads(done.stdout) == json.loads(here.stdout)
    assert len(list((tmp_path / "evaluate").glob("*.json"))) == 1


def test_the_objects_are_frozen_after_the_other_exit_handlers_ran() -> None:
    """atexit runs its handlers in reverse: one registered after the command ran runs before
    the command's handler and finds nothing frozen; one registered before the command runs
    after it and finds the objects frozen."""
    frozen = "print({!r}, gc.get_freeze_count() > 0)"
    probe = ("import atexit, gc\n"
             f"atexit.register(lambda: {frozen.format('before:')})\n"
             "from tuner.cli import main\n"
             f"try:\n    main(['evaluate', {str(FIXED)!r}])\nexcept SystemExit:\n    pass\n"
             f"atexit.register(lambda: {frozen.format('after:')})\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "TUNER_CACHE_DIR": "off"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["after: False", "before: True"]


def _after_evaluate(env: dict[str, str]) -> list[str]:
    """OPENBLAS_NUM_THREADS and the number of the process's threads (Linux's /proc) after
    `tuner evaluate SPEC` in a new process with `env`."""
    probe = ("import os\nfrom tuner.cli import main\n"
             f"try:\n    main(['evaluate', {str(FIXED)!r}])\nexcept SystemExit:\n    pass\n"
             "print(os.environ.get('OPENBLAS_NUM_THREADS'), len(os.listdir('/proc/self/task')))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True, env={**env, "TUNER_CACHE_DIR": "off"})
    return done.stdout.splitlines()[-1].split()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux's /proc")
def test_numpy_starts_no_blas_threads() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _after_evaluate(env) == ["1", "1"]


def test_a_users_blas_threads_are_kept() -> None:
    assert _after_evaluate({**os.environ, "OPENBLAS_NUM_THREADS": "2"})[0] == "2"


def test_a_reader_that_leaves_is_not_a_bug(tmp_path: Path) -> None:
    """`tuner catalog | true`: the reader of the command's stdout leaves before the command
    writes (it closes at once; the command takes ~0.1 s to start); it ends silently with 141
    (128 + SIGPIPE, as `yes | true` does), where it ended with 1, the status of a bug."""
    reader = subprocess.Popen([sys.executable, "-m", "tuner", "catalog"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, "TUNER_CACHE_DIR": str(tmp_path)})
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.close()
    err = reader.stderr.read()
    assert reader.wait(timeout=60) == 141 and err == b""
