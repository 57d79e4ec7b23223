"""SIGTERM and SIGINT at any moment of `tuner search`, `resume` and `worker`, on real processes:
while they import, while they open the storage or load the study, after the search while they
report. Each leaves with one line (what is stored, how to go on) and exit code 130, never a
traceback or a silent death by the signal (-15), and leaves the stored study whole with its
database closed. Before, only the search itself was covered: a signal outside it killed the
process (SIGTERM, exit -15, no word) or printed a traceback (Ctrl-C while importing).

The moment is made, not timed: the process runs the command through a gate (BOOT) that
stops at the named import or call, touches GATE.ready and waits while GATE.hold exists; the
test sends the signal once GATE.ready is there and then removes GATE.hold."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from studies import close_storage

from .specs import tiny

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

GATE = """
import importlib, pathlib, sys, time
gate, where = pathlib.Path(sys.argv[1]), sys.argv[2]
sys.argv = ["tuner", *sys.argv[3:]]

def hold():
    (gate.parent / (gate.name + ".ready")).touch()
    while (gate.parent / (gate.name + ".hold")).exists():
        time.sleep(0.01)

if where.startswith("import "):
    class Gate:
        done = False
        def find_spec(self, name, path=None, target=None):
            if name == where[len("import "):] and not self.done:
                self.done = True
                hold()
            return None
    sys.meta_path.insert(0, Gate())
else:
    module, name = where.rsplit(".", 1)
    owner = importlib.import_module(module)
    real = getattr(owner, name)
    def gated(*args, **kwargs):
        hold()
        return real(*args, **kwargs)
    setattr(owner, name, gated)
"""
"""`python -c GATE+START GATE_FILE WHERE ARGS...`: START (`tuner ARGS...`) held at WHERE:
'import MODULE' (as the command imports it) or 'MODULE.FUNCTION' (as the command calls it)."""
BOOT = GATE + "from tuner import main\nmain()\n"


def _gated(tmp_path: Path, where: str, signum: int, *args: str, boot: str = BOOT
           ) -> subprocess.CompletedProcess[str]:
    gate = tmp_path / "gate"
    ready, hold = tmp_path / "gate.ready", tmp_path / "gate.hold"
    ready.unlink(missing_ok=True)
    hold.touch()
    proc = subprocess.Popen([sys.executable, "-c", boot, str(gate), where, *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert proc.poll() is None, f"ended before the gate: {proc.communicate()}"
            assert time.monotonic() < deadline, "not at the gate within 120 s"
            time.sleep(0.01)
        proc.send_signal(signum)
        hold.unlink()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _trials(url: str, name: str) -> list[tuple[int, TrialState]]:
    """The study's trials, read through a connection closed at once (an open one would keep
    SQLite's -wal file, which _closed looks at)."""
    storage = optuna.storages.RDBStorage(url)
    try:
        return [(t.number, t.state)
                for t in optuna.load_study(study_name=name, storage=storage).trials]
    finally:
        close_storage(storage)


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "sig.yaml"
    path.write_text(yaml.safe_dump(tiny("sig", search={"sampler": "tpe", "trials": 3,
                                                        "seed": 0})), encoding="utf-8")
    return path


def _one_line(done: subprocess.CompletedProcess[str], signum: int) -> str:
    assert done.returncode == 130, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"interrupted ({signal.Signals(signum).name})")
    return lines[0]


def _closed(tmp_path: Path) -> None:
    """No -wal or -shm file: the connections were closed on the way out."""
    assert sorted(p.name for p in tmp_path.glob("s.db*")) in ([], ["s.db"])


@pytest.mark.parametrize(("where", "words"), [
    ("import tuner.cli.main", "while starting: no stored study was changed; run the same "
                              "command again"),
    ("import tuner.cli.search", "no stored study was changed; run the same command again"),
    ("tuner.cli.search.load_given", "before the search began: nothing was stored; run the same "
                                   "command again"),
])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_search_stopped_before_it_begins_stores_nothing(
        tmp_path: Path, spec: Path, where: str, words: str, signum: int) -> None:
    done = _gated(tmp_path, where, signum, "search", str(spec), "--storage",
                  f"sqlite:///{tmp_path / 's.db'}")
    assert _one_line(done, signum).endswith(words)
    assert not (tmp_path / "s.db").exists()


def test_a_search_stopped_while_its_storage_opens_stops_before_any_trial(
        tmp_path: Path, spec: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    done = _gated(tmp_path, "studies.open_storage", signal.SIGTERM, "search", str(spec),
                  "--storage", url)
    line = _one_line(done, signal.SIGTERM)
    assert line.endswith(f"0 completed trials of a target of 3 are stored; "
                         f"`tuner resume sig --storage {url}` continues")
    _closed(tmp_path)
    assert {state for _, state in _trials(url, "sig")} <= {TrialState.WAITING}  # warm starts


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_search_stopped_after_it_ended_says_the_study_is_stored(
        tmp_path: Path, spec: Path, signum: int) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    done = _gated(tmp_path, "tuner.cli.search._report", signum, "search", str(spec),
                  "--storage", url)
    assert _one_line(done, signum).endswith(
        f"the search had ended: study sig is stored; `tuner best sig --storage {url}` shows it")
    _closed(tmp_path)
    states = [state for _, state in _trials(url, "sig")]
    assert states.count(TrialState.COMPLETE) == 3 and TrialState.RUNNING not in states


@pytest.mark.parametrize(("command", "where", "ended"), [
    ("resume", "import tuner.cli.search", None),
    ("resume", "studies.open_storage", False),
    ("resume", "studies.load_study", False),
    ("resume", "tuner.cli.search._report", True),
    ("worker", "import tuner.cli.worker", None),
    ("worker", "tuner.cli.worker.open_storage", False),
    ("worker", "tuner.cli.worker.load_study", False),
    ("worker", "tuner.cli.worker.summary", True),
])
def test_a_stored_study_is_left_as_it_was(tmp_path: Path, spec: Path, command: str,
                                          where: str, ended: bool | None) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    made = subprocess.run([sys.executable, "-m", "tuner", "search", str(spec), "--trials", "2",
                           "--storage", url], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert made.returncode == 0, made.stderr
    before = _trials(url, "sig")
    done = _gated(tmp_path, where, signal.SIGTERM, command, "sig", "--storage", url)
    line = _one_line(done, signal.SIGTERM)
    if ended is None:
        assert line.endswith("no stored study was changed; run the same command again")
    elif ended:
        assert line.endswith(f"the search had ended: study sig is stored; "
                             f"`tuner best sig --storage {url}` shows it")
    else:
        assert line.endswith(f"before the search began: study sig is as it was; "
                             f"`tuner resume sig --storage {url}` continues it")
    _closed(tmp_path)
    after = _trials(url, "sig")
    if ended is not None and not ended:
        assert after == before
    assert not [n for n, state in after if state in (TrialState.RUNNING, TrialState.FAIL)]


def test_a_server_s_worker_starts_as_the_tuner_command_does(tmp_path: Path, spec: Path) -> None:
    """`tuner serve` starts its workers with runner._BOOT and stops them with SIGTERM: one
    stopped while it starts says so in its log and exits with 130 (it died with -15)."""
    from tuner.serve.runner import _BOOT

    url = f"sqlite:///{tmp_path / 's.db'}"
    done = _gated(tmp_path, "import tuner.cli.worker", signal.SIGTERM, "worker", "sig",
                  "--storage", url, boot=GATE + _BOOT)
    assert _one_line(done, signal.SIGTERM).endswith(
        "no stored study was changed; run the same command again")
