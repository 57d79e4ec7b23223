"""Studies run in the background by worker processes, the same `tuner worker NAME` a person
starts by hand, each in a session of its own (a signal to the server's terminal does not
reach it). The storage is the truth: a study launched here carries the user attribute
`serve` (SERVE_ATTR) = {workers, requested, deadline, processes: [{host, pid, start}]}, so
that a server started again on the storage picks up what was left:

- workers a crashed server left running (a recorded process alive on this host) are adopted:
  watched, not started twice;
- a study whose recorded workers are all gone (a machine crash, a stopped server) and that is
  not finished gets new workers; its trials left RUNNING are failed and retried by the
  workers' heartbeat recovery (studies.recovery), so no trial is lost or counted twice;
- a study past its deadline (search.timeout from its request) is left as it is, and so is one
  stopped by a request (Runner.stop_study: `stopped` in SERVE_ATTR) until its spec is posted
  again; a stop that comes while the resumption is under way (the study queued for it, or
  its workers starting) stops it the same way, and the resumption skips it;
- a study that live workers outside this server run (`tuner worker`/`tuner search` by hand,
  another server: studies.liveness) is left to them, with a line in the log; a POST of its
  spec still adds this server's workers.

A server stopped with Ctrl-C or SIGTERM stops its workers with SIGTERM: each puts its running
trial back in the queue and exits; the next server resumes the study."""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import optuna

from search_spaces.wording import counted
from studies import (
    ENV_VAR,
    LIVE_GRACE_S,
    StudyError,
    live_workers,
    load_study,
    process_gone,
    process_identity,
)

from .auth import TOKEN_ENV
from .progress import SERVE_ATTR, finished

__all__ = ["SERVE_ATTR", "Runner", "outside_run_it"]

WATCH_S = 0.5
"""Seconds between looks at the worker processes."""
RESUME_LOOKS = 10
"""Looks (studies.LOOK_EVERY_S apart: 1 s in all while none shows) for workers outside this
server before the resumption starts a study's own: a look may fall between two trials."""
STOP_WAIT_S = 20.0
"""Seconds stopped workers get to put their trial back before they are killed."""
_LOG = logging.getLogger(__name__)
_CODE_ROOT = str(Path(__file__).resolve().parents[2])
_BOOT = (f"import sys; sys.path[0] = {_CODE_ROOT!r}; sys.argv[0] = 'tuner'; "
         "from tuner import main; main()")
"""A worker's start: the `tuner` command (its entry point: a SIGTERM while it starts or
opens the storage is one line in its log and exit 130, as at any other moment) from the
directory this server's code came from, not from the working directory, which `python -m`
would put first on sys.path (the default storage makes a `studies/` folder there, which
would shadow the `studies` package)."""


@dataclass
class _Child:
    """A worker started by this server, its stderr kept in an unnamed file."""

    study: str
    proc: subprocess.Popen[bytes]
    log: IO[bytes]


@dataclass
class _Study:
    """What this server knows of a study's workers: its children, adopted processes (worker
    records of a previous server) and the last error a worker exited with."""

    children: list[_Child] = field(default_factory=list)
    adopted: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def _zombie(pid: int) -> bool:
    """True for a process that exited and was never reaped (state Z in /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _alive(record: dict[str, Any]) -> bool:
    return not process_gone(record) and not _zombie(int(record.get("pid", 0)))


def _requested(study: optuna.Study) -> str:
    """When the study was first requested (SERVE_ATTR's ISO time; sorts in time order)."""
    record = study.user_attrs.get(SERVE_ATTR)
    return str(record.get("requested") or "") if isinstance(record, dict) else ""


def _last_line(log: IO[bytes]) -> str:
    log.seek(0)
    lines = [line for line in log.read().decode("utf-8", "replace").splitlines() if line]
    return lines[-1] if lines else ""


class Runner:
    """Worker processes of the studies this server runs (see the module's docstring)."""

    def __init__(self, storage: optuna.storages.BaseStorage, url: str, *, workers: int,
                 heartbeat_s: int, max_studies: int | None = None) -> None:
        self.storage = storage
        self.url = url
        self.max_studies = max_studies
        self.admission = threading.Lock()
        """Held from counting the running studies to starting a study's workers, by the
        resumption here and by POST /v1/studies (tuner.serve.service.Service.admission)."""
        self.workers = workers
        self.heartbeat_s = heartbeat_s
        self._studies: dict[str, _Study] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._resuming = threading.Event()
        """Set from `start` until `resume` has gone through the storage's studies: a stop
        meanwhile marks a study the resumption would run (stop_study)."""
        self._watcher = threading.Thread(target=self._watch, name="serve-watch", daemon=True)

    def start(self) -> None:
        """Watch the workers, and resume the unfinished studies of the storage (in the
        background: the server answers meanwhile)."""
        self._watcher.start()
        self._resuming.set()
        threading.Thread(target=self.resume, name="serve-resume", daemon=True).start()

    def launch(self, study: optuna.Study, *, count: int, deadline: float | None,
               requested: str | None = None) -> None:
        """Start `count` workers on `study` and record them in its SERVE_ATTR."""
        name = study.study_name
        children = [self._spawn(name, deadline) for _ in range(count)]
        with self._lock:
            known = self._studies.setdefault(name, _Study())
            known.children.extend(children)
            known.error = None
            processes = [process_identity(c.proc.pid) for c in known.children
                         if c.proc.poll() is None] + known.adopted
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        study.set_user_attr(SERVE_ATTR, {
            "workers": count, "requested": requested or now, "started": now,
            "deadline": deadline, "processes": processes})
        _LOG.info("study %s: %d worker process(es) started (pids %s)", name, count,
                  ", ".join(str(c.proc.pid) for c in children))

    def _spawn(self, name: str, deadline: float | None) -> _Child:
        """`tuner worker NAME` (_BOOT) in a session of its own; the storage URL goes in the
        environment (never on a command line that `ps` shows), the token not at all."""
        command = [sys.executable, "-c", _BOOT, "worker", name,
                   "--heartbeat", str(self.heartbeat_s)]
        if deadline is not None:
            command += ["--timeout", f"{max(0.0, deadline - time.time()):.1f}"]
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        env[ENV_VAR] = self.url
        log = tempfile.TemporaryFile()  # noqa: SIM115 (kept open until the worker exits)
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=log, env=env, start_new_session=True)
        return _Child(study=name, proc=proc, log=log)

    def _alive_now(self, name: str) -> tuple[list[_Child], list[dict[str, Any]]]:
        """The study's worker processes alive now: those this server started, and the worker
        records of those it adopted."""
        with self._lock:
            known = self._studies.get(name, _Study())
            return ([c for c in known.children if c.proc.poll() is None],
                    [r for r in known.adopted if _alive(r)])

    def live(self, name: str) -> int:
        """The study's worker processes alive now (started or adopted by this server)."""
        children, adopted = self._alive_now(name)
        return len(children) + len(adopted)

    def processes(self, name: str) -> list[dict[str, Any]]:
        """The study's live worker processes of this server (started or adopted), as worker
        records (host, pid, start)."""
        children, adopted = self._alive_now(name)
        return [process_identity(c.proc.pid) for c in children] + adopted

    def running(self) -> set[str]:
        """The studies with a live worker."""
        with self._lock:
            names = list(self._studies)
        return {name for name in names if self.live(name)}

    def forget(self, name: str) -> None:
        """Drop what this server knows of study `name` (deleted; none of its workers runs),
        so that a new study of the name starts with no error of the old one's."""
        with self._lock:
            known = self._studies.pop(name, None)
        for child in known.children if known is not None else []:
            child.log.close()  # exited (a live worker's study is not deleted), not reaped yet

    def outside(self, study: optuna.Study, *, looks: int,
                known: list[dict[str, Any]] | None = None) -> int:
        """The study's live workers that this server neither started nor adopted (`tuner
        worker` by hand, another server), by what the storage records (studies.liveness),
        looked at up to `looks` times while none shows (a worker between two trials has none
        running, longer on a loaded machine); none for a finished study (no trial runs or
        waits). `known`: worker records of this server's, gone or not (a study's recorded
        workers, whose last trial may still look alive a while after a crash), not counted."""
        if finished(study):
            return 0
        ours = self.processes(study.study_name) + (known or [])
        own = {(r.get("host"), r.get("pid")) for r in ours}
        grace_s = max(LIVE_GRACE_S, 2.0 * self.heartbeat_s)
        found = live_workers(study, grace_s=grace_s, looks=looks)
        named = [r for r in found if r is not None and (r.get("host"), r.get("pid")) not in own]
        return len(named) + max(0, sum(r is None for r in found) - len(ours))

    def error(self, name: str) -> str | None:
        """The last line of the last worker of the study that failed, if any."""
        with self._lock:
            known = self._studies.get(name)
            return known.error if known is not None else None

    def _watch(self) -> None:
        while not self._stopping.wait(WATCH_S):
            self._reap()

    def _reap(self) -> None:
        """Collect the workers that exited; a failure is logged and kept for the status."""
        with self._lock:
            exited = [(s, c) for s in self._studies.values() for c in s.children
                      if c.proc.poll() is not None]
            for known, child in exited:
                known.children.remove(child)
                code = child.proc.returncode
                if code not in (0, 130, -signal.SIGTERM, -signal.SIGKILL):
                    known.error = f"a worker exited with code {code}: {_last_line(child.log)}"
                    _LOG.warning("study %s: %s", child.study, known.error)
                child.log.close()
            for known in self._studies.values():
                known.adopted = [r for r in known.adopted if _alive(r)]

    def resume(self) -> None:
        """Adopt or restart the workers of every unfinished study this server's storage
        holds with a SERVE_ATTR (see the module's docstring): first adopt the workers still
        alive, then start workers for the rest, the earliest requested first, while fewer
        than `max_studies` studies run (those left wait for a POST of their spec). Each step
        holds `admission`, as a request's stop does (stop_study)."""
        try:
            studies = []
            for name in sorted(optuna.study.get_all_study_names(self.storage)):
                try:
                    studies.append(load_study(self.storage, name))
                except StudyError as err:
                    _LOG.warning("study %s is not resumed: %s", name, err)
            left = []
            for study in studies:
                with self.admission:
                    if not self._adopted(study):
                        left.append(study)
            for study in sorted(left, key=_requested):
                if self._stopping.is_set():
                    return
                if self._run_outside(study):  # looked at without `admission`: a second
                    continue
                with self.admission:
                    self._restart(study)
        finally:
            self._resuming.clear()

    def _unfinished(self, study: optuna.Study) -> dict[str, Any] | None:
        """The study's SERVE_ATTR where this server should run it: ours, unfinished, not
        running here already, before its deadline; else None."""
        record = study.user_attrs.get(SERVE_ATTR)
        if not isinstance(record, dict) or finished(study) or self.live(study.study_name):
            return None  # not ours, nothing to run, or posted again meanwhile (running)
        if record.get("stopped"):  # stopped by a request (POST .../stop): it waits for a POST
            return None
        deadline = record.get("deadline")
        if deadline is not None and deadline <= time.time():
            return None
        return record

    def _adopted(self, study: optuna.Study) -> bool:
        """Adopt the recorded workers of the study still alive; True if it has any."""
        record = self._unfinished(study)
        if record is None:
            return False
        alive = [r for r in record.get("processes", []) if isinstance(r, dict) and _alive(r)]
        if not alive:
            return False
        with self._lock:
            self._studies.setdefault(study.study_name, _Study()).adopted = alive
        _LOG.info("study %s: %d running worker(s) adopted", study.study_name, len(alive))
        return True

    def _run_outside(self, study: optuna.Study) -> bool:
        """True, with a line in the log, for a study the resumption would restart that live
        workers outside this server run (the module's docstring): it is left to them. The
        study's recorded workers of a server are not counted: after a crash, the trial one
        left running looks alive for a while (its last heartbeat is recent)."""
        record = self._unfinished(study)
        if record is None:
            return False
        recorded = [r for r in record.get("processes", []) if isinstance(r, dict)]
        outside = self.outside(study, looks=RESUME_LOOKS, known=recorded)
        if outside:
            _LOG.warning("study %s: unfinished, not resumed: %s (`tuner worker` or `tuner "
                         "search` by hand, another server; its status counts them in "
                         "outside_workers); POST its spec to add workers of this server",
                         study.study_name, outside_run_it(outside))
        return outside > 0

    def _restart(self, study: optuna.Study) -> None:
        record = self._unfinished(study)
        if record is None:
            return
        name, running = study.study_name, self.running()
        if self.max_studies is not None and len(running) >= self.max_studies:
            _LOG.warning("study %s: unfinished, not resumed: %d studies run, the most "
                         "--max-studies allows; POST its spec again to resume it", name,
                         len(running))
            return
        _LOG.info("study %s: unfinished and no worker runs it; resuming", name)
        self.launch(study, count=int(record.get("workers", self.workers)),
                    deadline=record.get("deadline"), requested=record.get("requested"))

    def stop(self) -> None:
        """SIGTERM every worker (each requeues its running trial and exits), SIGKILL those
        still there after STOP_WAIT_S; the studies stay unfinished for the next server."""
        self._stopping.set()
        with self._lock:
            children = [c for s in self._studies.values() for c in s.children]
            adopted = [r for s in self._studies.values() for r in s.adopted if _alive(r)]
        alive = sum(c.proc.poll() is None for c in children) + len(adopted)
        if alive:
            _LOG.info("stopping %d worker process(es); a server started again on this "
                      "storage resumes their studies", alive)
        _terminate(children, adopted)

    def stop_study(self, study: optuna.Study) -> int | None:
        """Stop the study's workers as `stop` stops them all (each puts its running trial
        back in the queue and exits), marking it `stopped` in its SERVE_ATTR first, so that
        no server resumes it before its spec is posted again (`launch` clears the mark); the
        number of worker processes stopped. A study the resumption at start has yet to run
        (`resume` not through) is marked too, and the workers a crashed server left on it
        (not adopted yet) are stopped: the resumption skips it, where it started it after
        the stop said it was not running. None where nothing runs it here, nor is about to:
        nothing is marked. The caller holds `admission` (no resumption step meanwhile)."""
        name = study.study_name
        children, adopted = self._alive_now(name)
        record = study.user_attrs.get(SERVE_ATTR)
        if not children and not adopted:
            if not self._resuming.is_set() or self._unfinished(study) is None:
                return None
            assert isinstance(record, dict)  # _unfinished: a SERVE_ATTR
            adopted = [r for r in record.get("processes", []) if isinstance(r, dict)
                       and _alive(r)]
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        study.set_user_attr(SERVE_ATTR, {**(record if isinstance(record, dict) else {}),
                                         "stopped": now})
        _LOG.info("study %s: stopping %d worker process(es) on request; POSTing its spec "
                  "again resumes it", name, len(children) + len(adopted))
        stopped = _terminate(children, adopted)
        self._reap()
        return stopped


def outside_run_it(count: int) -> str:
    """'1 live worker outside this server runs it', '2 live workers ... run it'."""
    runs = "runs" if count == 1 else "run"
    return f"{counted(count, 'live worker')} outside this server {runs} it"


def _terminate(children: list[_Child], adopted: list[dict[str, Any]]) -> int:
    """SIGTERM the workers, wait for them up to STOP_WAIT_S, SIGKILL those left; how many
    were alive."""
    pids = [c.proc.pid for c in children if c.proc.poll() is None]
    pids += [int(r["pid"]) for r in adopted]
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    for child in children:
        try:
            child.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.proc.kill()
            child.proc.wait()
    while adopted and time.monotonic() < deadline:
        adopted = [r for r in adopted if _alive(r)]
        time.sleep(0.1)
    for record in adopted:
        _signal(int(record["pid"]), signal.SIGKILL)
    return len(pids)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # gone meanwhile
        os.kill(pid, signum)
