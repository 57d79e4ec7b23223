"""The API's work as plain functions over the library, as thin as the command line's: the
routes (tuner.serve.app) read the request and call these in a worker thread; each answer is
the JSON or text the matching command prints. Errors are the library's (SpecError, ...) or a
RequestError carrying its HTTP status."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import optuna

from cost import CostModelError
from search_spaces import Space, SpecError, StudySpec, parse_spec
from search_spaces.wording import counted
from studies import (
    best_payload,
    export_page,
    load_study,
    nearest_name,
    search_settings,
    studies_page,
    target_trials,
)

from ..engine.auto import count_plans
from ..engine.limits import fixed_result
from ..engine.search import SearchOptions, prepare_search
from ..engine.trial_spec import chosen_plan
from ..errors import each_or_errors
from ..export import render
from ..views.report import build_report
from ..views.text import to_json
from .body import REQUEST, documents, label
from .config import ServeConfig
from .progress import finished, status
from .runner import Runner, outside_run_it

__all__ = ["COUNT_LIMIT", "COUNT_S", "STUDY_NAME", "RequestError", "Service"]

STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A study name the API accepts (it is part of the study's URLs)."""
_T = TypeVar("_T")
_LOG = logging.getLogger(__name__)
_CHANGING_LOOKS = 10
"""Looks (studies.LOOK_EVERY_S apart: 1 s in all) for workers outside this server before a
DELETE deletes a study or a stop says none runs it; a status looks 3 times."""
_POST_LOOKS = 3
"""Looks for workers outside this server when a study is posted (its answer counts them)."""
COUNT_LIMIT = 1_000_000
"""Counting the plans of a search space sent to /v1/evaluate stops past this many."""
COUNT_S = 1.0
"""...or after this many seconds: a space of many clusters with few plans each (nodes 1 to
125,000 over a dozen GPUs) took 8 minutes to count before its 422, holding one of the two
evaluation slots (ServeConfig.evaluations) all along."""


class RequestError(Exception):
    """A request the API refuses, with its HTTP status and one line saying what to do."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


def _spec(data: Any, where: str) -> StudySpec:
    """The spec of one body document; a calibration profile, a file on the server, is
    refused (a client could otherwise make the server read any file)."""
    spec = parse_spec(data, file=where, name=where)
    if spec.calibration is not None:
        raise SpecError("a calibration profile is a file on the server, which the HTTP API "
                        "does not read; leave it out, or use the command line",
                        file=where, field="calibration")
    return spec


def _fixed(data: Any, where: str) -> StudySpec:
    """A spec of one plan; a search space is refused with its count of valid plans: it is
    a study's work (POST /v1/studies), not a request's."""
    spec = _spec(data, where)
    if spec.is_fixed:
        return spec
    plans, counted_all, _ = count_plans(Space.from_spec(spec), limit=COUNT_LIMIT,
                                        seconds=COUNT_S)
    size = f"{plans:,}" if counted_all else f"at least {plans:,}"
    raise SpecError(f"this value is a choice, so the spec is a search space ({size} valid "
                    "plans), which one request does not evaluate; POST it to /v1/studies "
                    "to search it, or give one value", file=where,
                    field=spec.choice_fields()[0])


def _study_data(body: bytes, content_type: str) -> dict[str, Any]:
    """The one spec of a study request, with a name fit for a URL."""
    items, many = documents(body, content_type, max_specs=1)
    if many:
        raise SpecError("POST /v1/studies takes one spec (a mapping), not a list",
                        file=REQUEST)
    data = items[0]
    if not isinstance(data, dict):
        parse_spec(data, file=REQUEST)  # raises: a spec is a mapping
    name = data.get("name")
    if not isinstance(name, str) or not STUDY_NAME.fullmatch(name):
        raise SpecError("a study needs a name of letters, digits, '.', '_' and '-' (at most "
                        "128 characters), e.g. name: llama3-70b-h100", file=REQUEST,
                        field="name")
    return dict(data)


def _not_running(name: str, now: dict[str, Any], what: str) -> str:
    """Why there is nothing to `what` (a study this server runs no worker of): its state,
    its progress and how to go on."""
    progress = f"{counted(now['completed'], 'completed trial')} of a target of {now['target']:,}"
    then = "POST its spec to /v1/studies to continue it" if now["state"] != "done" \
        else "nothing is left to run"
    return (f"study '{name}' is not running on this server (state {now['state']}, "
            f"{progress}); nothing to {what}; {then}")


def _outside_run(count: int, verb: str) -> str:
    """`count` live workers outside this server that `verb` (run, run by) the study, and
    how to stop them, in the singular for one."""
    it, runs = ("it", "runs") if count == 1 else ("them", "run")
    stop = (f"stop {it} where {'it' if count == 1 else 'they'} {runs} (Ctrl-C or SIGTERM to "
            "`tuner worker`/`tuner search`: each puts its running trial back in the queue)")
    if verb == "run":
        return f"{outside_run_it(count)}; {stop}"
    return (f"{counted(count, 'live worker')} this server did not start, which it cannot "
            f"stop; {stop}")


def _unknown(storage: optuna.storages.BaseStorage, name: str) -> RequestError:
    """The 404 of a study name the storage does not hold, naming the nearest stored one."""
    near = nearest_name(storage, name)
    hint = f" (did you mean '{near}'?)" if near is not None else ""
    return RequestError(404, f"no study named '{name}'{hint}; GET /v1/studies lists the "
                             "studies")


@dataclass(frozen=True)
class Service:
    """The server's storage (opened once), its worker processes and its settings."""

    config: ServeConfig
    storage: optuna.storages.BaseStorage
    runner: Runner
    admission: threading.Lock = field(default_factory=threading.Lock, compare=False,
                                      repr=False)
    """Held from counting the running studies to starting a study's workers: requests run
    in the thread pool at once, and without it each could count the same studies (more
    than --max-studies started) or start workers for one study posted twice."""

    def evaluate(self, body: bytes, content_type: str) -> str:
        """`tuner evaluate --json` of the body's specs: an object, or a list for a list."""
        items, many = documents(body, content_type, max_specs=self.config.max_specs)

        def one(item: tuple[int, Any]) -> dict[str, Any]:
            return fixed_result(_fixed(item[1], label(item[0], many))).as_dict()

        results = each_or_errors(enumerate(items), one,  # every bad spec of a list at once
                                 lambda err: isinstance(err, (SpecError, CostModelError)))
        return to_json(results if many else results[0])

    def create_study(self, body: bytes, content_type: str) -> dict[str, Any]:
        """Make the study ready (prepare_search: a second at most) and start its workers:
        one for an exhaustive sweep, `workers` for an Optuna sampler; none when it is
        finished or has workers of this server already (a study posted again joins them).
        Workers outside this server running it (`tuner worker` by hand) are joined, as a
        `tuner worker` joins, and counted in the answer's `outside_workers`."""
        data = _study_data(body, content_type)
        spec = _spec(data, REQUEST)
        with self.admission:
            return self._admit(spec, body)

    def _admit(self, spec: StudySpec, body: bytes) -> dict[str, Any]:
        running = self.runner.running()
        if spec.name not in running and len(running) >= self.config.max_studies:
            are = "study is" if len(running) == 1 else "studies are"
            raise RequestError(429, f"{len(running)} {are} running, the most this "
                                    "server runs at once (--max-studies); retry later")
        study = prepare_search(spec, body.decode("utf-8"), self.storage, SearchOptions())
        settings = search_settings(study)
        outside = self.outside(study, looks=_POST_LOOKS)
        if not finished(study) and not self.runner.live(spec.name):
            count = 1 if settings["sampler"] == "exhaustive" else self.config.workers
            timeout = spec.search.timeout
            self.runner.launch(study, count=count,
                               deadline=None if timeout is None else time.time() + timeout)
            if outside:  # joining them is legitimate, as `tuner worker NAME` is
                _LOG.info("study %s: %s too; this server's workers join", spec.name,
                          outside_run_it(outside))
        return {"study": spec.name, "location": f"/v1/studies/{spec.name}",
                "sampler": settings.get("sampler"),
                "requested_sampler": settings.get("requested"),
                "target": target_trials(study), "workers": self.runner.live(spec.name),
                "outside_workers": outside}

    def stop(self, name: str) -> dict[str, Any]:
        """Stop the study's workers (tuner.serve.runner.Runner.stop_study) and wait for them:
        each puts its running trial back in the queue; a study the server is about to resume
        is stopped before it starts (`workers_stopped` 0); a 409 when none runs it here nor
        is about to (saying so where workers this server did not start run it)."""
        with self.admission:  # no POST nor the resumption starts workers of it meanwhile
            study = self.study(name)
            stopped = self.runner.stop_study(study)
            if not stopped:  # none of this server's: None, or marked before its resumption
                outside = self.outside(study, looks=_CHANGING_LOOKS)
                if outside:  # they go on whatever this server marks
                    raise RequestError(409, f"study '{name}' is run by "
                                            f"{_outside_run(outside, 'run by')}")
            if stopped is None:
                raise RequestError(409, _not_running(name, self.status(name), "stop"))
            now = self.status(name)
        return {"study": name, "state": now["state"], "workers_stopped": stopped,
                "completed": now["completed"], "target": now["target"],
                "waiting": now["waiting"]}

    def delete(self, name: str) -> dict[str, Any]:
        """Delete the study with Optuna's own API (optuna.delete_study: nothing else of the
        storage is touched); a 409 while workers run it, this server's or others'."""
        with self.admission:  # no POST starts workers of the study meanwhile
            study = self.study(name)
            live = self.runner.live(name)
            if live:
                raise RequestError(409, f"study '{name}' is running ({counted(live, 'worker')} "
                                        "of this server); stop it first: POST "
                                        f"/v1/studies/{name}/stop, then DELETE it")
            outside = self.outside(study, looks=_CHANGING_LOOKS)
            if outside:
                raise RequestError(409, f"study '{name}' is running: "
                                        f"{_outside_run(outside, 'run')}, then DELETE it")
            trials = len(study.get_trials(deepcopy=False))
            optuna.delete_study(study_name=name, storage=self.storage)
            self.runner.forget(name)
        return {"study": name, "deleted_trials": trials}

    def outside(self, study: optuna.Study, *, looks: int) -> int:
        """The study's live workers that this server neither started nor adopted
        (tuner.serve.runner.Runner.outside)."""
        return self.runner.outside(study, looks=looks)

    def study(self, name: str) -> optuna.Study:
        """The study `name`; a 404 naming the nearest stored name when there is none."""
        try:
            self.storage.get_study_id_from_name(name)
        except KeyError:
            raise _unknown(self.storage, name) from None
        return load_study(self.storage, name)

    def studies(self, *, offset: int, limit: int) -> tuple[str, int]:
        """`tuner studies --json` of the studies `offset` to `offset + limit` by name; how
        many there are."""
        rows, total = studies_page(self.storage, offset=offset, limit=limit)
        return to_json(rows), total

    def status(self, name: str) -> dict[str, Any]:
        """The StudyStatus of study `name`."""
        def now(study: optuna.Study) -> dict[str, Any]:
            outside = self.outside(study, looks=3)
            return status(study, live=self.runner.live(name), outside=outside,
                          error=self.runner.error(name))
        return self._read(name, now)

    def best(self, name: str, *, top: int) -> str:
        """`tuner best NAME --top K --json`."""
        return self._read(name, lambda study: to_json(best_payload(study, top=top)))

    def trials(self, name: str, *, offset: int, limit: int) -> tuple[str, int]:
        """`tuner export NAME --json` of the trials `offset` to `offset + limit` by number;
        how many trials the study holds."""
        rows, total = self._read(name, lambda study: export_page(study, offset=offset,
                                                                 limit=limit))
        return json.dumps(rows, indent=2), total

    def plan(self, name: str, *, fmt: str, trial: int | None) -> str:
        """`tuner plan NAME [--trial N] --as FMT`."""
        return self._read(name, lambda study: render(fmt, chosen_plan(study, trial)))

    def report(self, name: str, *, top: int) -> str:
        """`tuner report NAME --top K`: the HTML."""
        return self._read(name, lambda study: build_report(study, top=top))

    def _read(self, name: str, work: Callable[[optuna.Study], _T]) -> _T:
        """`work` on study `name`; a 404 when the study is deleted (DELETE, or `tuner` on the
        storage) while `work` reads it, where it was a 500 'internal error'. A deletion met
        halfway fails in more ways than Optuna's KeyError ('Record does not exist.'): SQLite
        reads a trial and its values in separate statements, so a trial read COMPLETE can
        come back with no values (a TypeError in the ranking). So any failure is a 404 once
        the study is gone, and stays what it was while the study is there."""
        study = self.study(name)
        try:
            return work(study)
        except RequestError:
            raise
        except Exception:
            try:
                there = self.storage.get_study_id_from_name(name) == study._study_id
            except KeyError:
                there = False
            if there:
                raise
            raise RequestError(404, f"study '{name}' was deleted while this request read "
                                    "it; GET /v1/studies lists the studies") from None
