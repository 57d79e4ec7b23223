"""A program driving the HTTP API (a scheduler, a portal) stops a study, deletes one, pages
through a study's trials and the storage's studies, and reaches a study whose name holds '/'
(the command line makes such names), against a real `tuner serve` process.

- stop (POST /v1/studies/NAME/stop): the workers stop as Ctrl-C stops `tuner search`: the
  trial that was running goes back in the queue (WAITING), never FAIL; the study stays stopped
  (a server started again does not resume it) until its spec is posted again, which finishes
  it; a study no worker of the server runs is 409;
- delete (DELETE /v1/studies/NAME): 409 while it runs, 404 naming the nearest name, else
  optuna.delete_study, the other studies untouched;
- pages: offset/limit, the count of all in X-Total-Count, the next page in Link."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import optuna
import pytest
import yaml
from click.testing import CliRunner
from optuna.trial import TrialState

from studies import open_storage
from tuner.cli import main
from tuner.serve.models import StudyDeleted, StudyStopped

from .serving import (
    Server,
    alive,
    kill_recorded_workers,
    recorded_workers,
    serving,
    start,
    study,
    wait_for,
)
from .specs import tiny

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


@pytest.fixture(autouse=True)
def _no_stray_workers(tmp_path: Path) -> Iterator[None]:
    yield
    if (tmp_path / "s.db").is_file():
        kill_recorded_workers(f"sqlite:///{tmp_path / 's.db'}")


def _spec(name: str, *, trials: int, sampler: str = "random") -> dict[str, Any]:
    return tiny(name, search={"sampler": sampler, "trials": trials, "seed": 0})


def _wait_complete(client: httpx.Client, name: str, at_least: int) -> None:
    deadline = time.monotonic() + 120
    while client.get(f"/v1/studies/{name}").json()["completed"] < at_least:
        assert time.monotonic() < deadline, f"study {name}: no progress"
        time.sleep(0.05)


def _storage(server: Server) -> str:
    found = re.search(r"storage (\S+);", server.text())
    assert found is not None
    return found.group(1)


def _cli_study(storage: str, tmp_path: Path, name: str, trials: int = 3) -> None:
    """A finished study made by the command line (any name it takes)."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(_spec(name, trials=trials)), encoding="utf-8")
    made = CliRunner().invoke(main, ["search", str(path), "--storage", storage, "--json"])
    assert made.exit_code == 0, made.output


def test_a_stopped_study_keeps_its_trials_and_resumes_when_posted(tmp_path: Path) -> None:
    url, target = f"sqlite:///{tmp_path / 's.db'}", 100
    with serving(tmp_path, url, "--workers", "2", "--heartbeat", "1") as server, \
            server.client() as client:
        assert client.post("/v1/studies", json=_spec("long", trials=target)).status_code == 202
        _wait_complete(client, "long", 5)
        workers = recorded_workers(url, "long")
        answer = client.post("/v1/studies/long/stop")
        assert answer.status_code == 200, answer.text
        stopped = StudyStopped.model_validate(answer.json())
        assert not any(alive(pid) for pid in workers)
        trials = study(url, "long").get_trials()
        states = [t.state for t in trials]
        assert (stopped.study, stopped.state, stopped.workers_stopped, stopped.target) == \
            ("long", "stopped", 2, target)
        assert stopped.completed == states.count(TrialState.COMPLETE) < target
        assert stopped.waiting == states.count(TrialState.WAITING)
        assert TrialState.FAIL not in states and TrialState.RUNNING not in states
        status = client.get("/v1/studies/long").json()
        assert (status["state"], status["workers"], status["error"]) == ("stopped", 0, None)
        assert "stopping 2 worker process(es) on request" in server.text()

        again = client.post("/v1/studies/long/stop")
        assert again.status_code == 409
        assert again.json()["error"] == (
            f"study 'long' is not running on this server (state stopped, {stopped.completed} "
            f"completed trials of a target of {target}); nothing to stop; POST its spec to "
            "/v1/studies to continue it")
    # a server started again leaves a stopped study stopped ...
    with serving(tmp_path, url, "--workers", "1") as server, server.client() as client:
        time.sleep(1.5)  # the resumption runs in the background at start
        assert client.get("/v1/studies/long").json()["state"] == "stopped"
        assert "worker process(es) started" not in server.text()
        # ... until its spec is posted again: it goes on to its target, the queued trials
        # first, with the same parameters; none is lost or failed
        more = client.post("/v1/studies", json=_spec("long", trials=target))
        assert more.status_code == 202 and more.json()["target"] == target
        assert wait_for(client, "long")["completed"] >= target
    after = study(url, "long").get_trials()
    assert not {TrialState.FAIL, TrialState.RUNNING, TrialState.WAITING} & \
        {t.state for t in after}
    for queued in (t for t in trials if t.state == TrialState.WAITING):  # retried, same plan
        assert after[queued.number].state in (TrialState.COMPLETE, TrialState.PRUNED)
        assert after[queued.number].params == queued.params


def test_stopping_what_does_not_run_is_refused(client: httpx.Client, server: Server,
                                              tmp_path: Path) -> None:
    _cli_study(_storage(server), tmp_path, "finished")
    done = client.post("/v1/studies/finished/stop")
    assert done.status_code == 409
    assert done.json()["error"] == (
        "study 'finished' is not running on this server (state done, 3 completed trials of "
        "a target of 3); nothing to stop; nothing is left to run")
    unknown = client.post("/v1/studies/finishd/stop")
    assert unknown.status_code == 404
    assert unknown.json()["error"] == ("no study named 'finishd' (did you mean 'finished'?); "
                                       "GET /v1/studies lists the studies")


def test_a_study_is_deleted_and_only_it(client: httpx.Client, server: Server,
                                        tmp_path: Path) -> None:
    storage = _storage(server)
    _cli_study(storage, tmp_path, "doomed", trials=4)
    _cli_study(storage, tmp_path, "kept", trials=3)
    store = open_storage(storage, heartbeat_interval_s=None, create=False)
    others = {s.study_name: len(s.get_trials()) for s in
              (optuna.load_study(study_name=n, storage=store)
               for n in optuna.study.get_all_study_names(store)) if s.study_name != "doomed"}

    trials = len(optuna.load_study(study_name="doomed", storage=store).trials)
    answer = client.delete("/v1/studies/doomed")
    assert answer.status_code == 200, answer.text
    assert StudyDeleted.model_validate(answer.json()) == StudyDeleted(study="doomed",
                                                                      deleted_trials=trials)
    assert client.get("/v1/studies/doomed").status_code == 404
    left = {s.study_name: len(s.get_trials()) for s in
            (optuna.load_study(study_name=n, storage=store)
             for n in optuna.study.get_all_study_names(store))}
    assert left == others and "kept" in left

    again = client.delete("/v1/studies/doomed")
    assert again.status_code == 404 and again.json()["error"].startswith(
        "no study named 'doomed'")
    typo = client.delete("/v1/studies/kep")
    assert typo.status_code == 404
    assert typo.json()["error"] == ("no study named 'kep' (did you mean 'kept'?); GET "
                                    "/v1/studies lists the studies")


def test_a_running_study_is_not_deleted_until_stopped(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with serving(tmp_path, url, "--workers", "1") as server, server.client() as client:
        assert client.post("/v1/studies", json=_spec("busy", trials=3000)).status_code == 202
        _wait_complete(client, "busy", 2)
        refused = client.delete("/v1/studies/busy")
        assert refused.status_code == 409
        assert refused.json()["error"] == ("study 'busy' is running (1 worker of this server); "
                                           "stop it first: POST /v1/studies/busy/stop, then "
                                           "DELETE it")
        assert client.get("/v1/studies/busy").json()["state"] == "running"
        assert client.post("/v1/studies/busy/stop").status_code == 200
        assert client.delete("/v1/studies/busy").status_code == 200
        assert client.get("/v1/studies/busy").status_code == 404
        # the name is free: a new study of it starts afresh, with no error of the old one
        made = client.post("/v1/studies", json=_spec("busy", trials=4)).json()
        assert made["target"] == 4 and made["workers"] == 1
        server.stop()
    assert "busy" in optuna.study.get_all_study_names(
        open_storage(url, heartbeat_interval_s=None, create=False))


def test_trials_come_in_pages(client: httpx.Client, server: Server, tmp_path: Path) -> None:
    _cli_study(_storage(server), tmp_path, "paged", trials=7)
    everything = client.get("/v1/studies/paged/trials")
    rows = everything.json()
    assert everything.headers["x-total-count"] == str(len(rows)) and "link" not in \
        everything.headers
    assert [r["number"] for r in rows] == list(range(len(rows)))
    first = client.get("/v1/studies/paged/trials", params={"limit": 3})
    assert first.json() == rows[:3] and first.headers["x-total-count"] == str(len(rows))
    assert first.headers["link"] == '</v1/studies/paged/trials?offset=3&limit=3>; rel="next"'
    pages, link = [], "/v1/studies/paged/trials?limit=3"
    while link:
        answer = client.get(link)
        pages += answer.json()
        found = re.match(r'<([^>]+)>; rel="next"', answer.headers.get("link", ""))
        link = found.group(1) if found else ""
    assert pages == rows
    assert client.get("/v1/studies/paged/trials", params={"offset": 99}).json() == []
    for bad in ({"limit": -1}, {"limit": 10_001}, {"offset": -1}):
        answer = client.get("/v1/studies/paged/trials", params=bad)
        assert answer.status_code == 422, bad
        assert answer.json()["error"].startswith(f"query.{next(iter(bad))}: ")


def test_a_study_s_trials_are_one_page_of_at_most_the_default(tmp_path: Path) -> None:
    """A study of 100k trials answered them all at once: a page is 1,000 unless asked."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_storage(url, heartbeat_interval_s=None, create=True)
    many = optuna.create_study(study_name="many", storage=store)
    many.add_trials([optuna.trial.create_trial(value=float(i)) for i in range(1005)])
    with serving(tmp_path, url) as server, server.client() as client:
        page = client.get("/v1/studies/many/trials")
        assert len(page.json()) == 1000 and page.headers["x-total-count"] == "1005"
        rest = client.get("/v1/studies/many/trials", params={"offset": 1000})
        assert [r["number"] for r in rest.json()] == list(range(1000, 1005))


def test_studies_come_in_pages(client: httpx.Client, server: Server, tmp_path: Path) -> None:
    for name in ("paged-a", "paged-b", "paged-c"):  # whatever the module's other tests made
        _cli_study(_storage(server), tmp_path, name)
    names = [s["name"] for s in client.get("/v1/studies").json()]
    assert len(names) >= 3
    answer = client.get("/v1/studies", params={"offset": 1, "limit": 1})
    assert [s["name"] for s in answer.json()] == names[1:2]
    assert answer.headers["x-total-count"] == str(len(names))
    assert ("link" in answer.headers) == (len(names) > 2)


@pytest.mark.parametrize("name", ["team/llama 70b", "a/b/c", "x/best"])
def test_a_study_named_with_a_slash_is_reached(client: httpx.Client, server: Server,
                                               tmp_path: Path, name: str) -> None:
    """The command line takes any visible name, '/' included; such a study was listed by
    GET /v1/studies and 404 'no route' everywhere else. Its name goes in the path as it is or
    with '/' as %2F; only a name ending in a route's word (x/best) has no status route."""
    _cli_study(_storage(server), tmp_path, name)
    stored = len(study(_storage(server), name).trials)
    encoded = name.replace("/", "%2F").replace(" ", "%20")
    for path in (name, encoded):
        best = client.get(f"/v1/studies/{path}/best")
        assert best.status_code == 200 and best.json()["study"] == name, best.text
        trials = client.get(f"/v1/studies/{path}/trials")
        assert trials.status_code == 200 and trials.headers["x-total-count"] == str(stored)
        assert client.get(f"/v1/studies/{path}/plan").status_code == 200
        assert client.post(f"/v1/studies/{path}/stop").status_code == 409
    if name.endswith("/best"):  # the best route of study 'x', which does not exist
        assert client.get(f"/v1/studies/{name}").json()["error"].startswith(
            "no study named 'x'")
        assert client.delete(f"/v1/studies/{name}").status_code == 405
        assert client.delete(f"/v1/studies/{encoded}").status_code == 405
        return
    status = client.get(f"/v1/studies/{encoded}")
    assert status.status_code == 200 and status.json()["study"] == name
    assert client.delete(f"/v1/studies/{name}").json() == {"study": name,
                                                            "deleted_trials": stored}
    assert client.get(f"/v1/studies/{encoded}").status_code == 404


def test_a_name_with_a_slash_is_refused_over_http(client: httpx.Client) -> None:
    """Names made over HTTP are plain URL segments (what a scheduler fills into a URL
    template), so none can be shadowed by a route ('x/best')."""
    answer = client.post("/v1/studies", json=_spec("team/llama", trials=3))
    assert answer.status_code == 422
    assert answer.json()["error"].startswith("request: name: a study needs a name of letters")


def test_the_new_routes_need_the_token(tmp_path: Path) -> None:
    token = "a-test-token-of-32-characters-xx"
    with serving(tmp_path, f"sqlite:///{tmp_path / 't.db'}",
                 env={"TUNER_TOKEN": token}) as server, \
            server.client() as anonymous, server.client(token) as right:
        for method, path in (("POST", "/v1/studies/x/stop"), ("DELETE", "/v1/studies/x"),
                             ("GET", "/v1/studies/x/trials?limit=5"),
                             ("GET", "/v1/studies?offset=1")):
            answer = anonymous.request(method, path)
            assert answer.status_code == 401, (method, path)
            assert answer.headers["www-authenticate"] == "Bearer"
            assert right.request(method, path).status_code != 401, (method, path)


def test_a_killed_server_s_adopted_workers_are_stopped(tmp_path: Path) -> None:
    """Workers a server adopted (left running by a server killed with SIGKILL) are stopped
    too: they are no children of the new server."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    first = start(tmp_path, url, "--workers", "1", "--heartbeat", "1")
    with first.client() as client:
        assert client.post("/v1/studies", json=_spec("orphan", trials=3000)).status_code == 202
        _wait_complete(client, "orphan", 2)
    workers = recorded_workers(url, "orphan")
    first.stop(signal.SIGKILL)
    assert all(alive(pid) for pid in workers)
    with serving(tmp_path, url, "--workers", "1") as second, second.client() as client:
        deadline = time.monotonic() + 60
        while "running worker(s) adopted" not in second.text():
            assert time.monotonic() < deadline, second.text()
            time.sleep(0.1)
        answer = client.post("/v1/studies/orphan/stop")
        assert answer.status_code == 200 and answer.json()["workers_stopped"] == 1
        assert not any(alive(pid) for pid in workers)
    states = [t.state for t in study(url, "orphan").get_trials()]
    assert TrialState.RUNNING not in states and TrialState.FAIL not in states


def test_every_route_s_404_names_the_nearest_study(client: httpx.Client, server: Server,
                                                   tmp_path: Path) -> None:
    """The status, best, trials, plan and report of a mistyped name said only 'no study
    named ...', where stop and DELETE named the nearest stored name."""
    _cli_study(_storage(server), tmp_path, "nearby-study")
    for method, suffix in (("GET", ""), ("GET", "/best"), ("GET", "/trials"),
                           ("GET", "/plan"), ("GET", "/report"), ("POST", "/stop"),
                           ("DELETE", "")):
        answer = client.request(method, f"/v1/studies/nearby-studi{suffix}")
        assert answer.status_code == 404, (method, suffix)
        assert answer.json()["error"] == (
            "no study named 'nearby-studi' (did you mean 'nearby-study'?); GET /v1/studies "
            "lists the studies"), (method, suffix)


def test_a_page_of_none_is_the_count(client: httpx.Client, server: Server,
                                     tmp_path: Path) -> None:
    """`limit=0` (how a program asks how many rows there are) was 422; it answers no row
    and the count, with no Link (a Link to the same page of none would never end); a page
    past the end is empty, with the count and no Link."""
    _cli_study(_storage(server), tmp_path, "counted", trials=5)
    for path in ("/v1/studies/counted/trials", "/v1/studies"):
        total = len(client.get(path).json())
        for offset in (0, 2, total + 10):
            answer = client.get(path, params={"offset": offset, "limit": 0})
            assert answer.status_code == 200, answer.text
            assert answer.json() == [] and answer.headers["x-total-count"] == str(total)
            assert "link" not in answer.headers
        past = client.get(path, params={"offset": total + 10, "limit": 2})
        assert past.json() == [] and "link" not in past.headers


def test_the_next_page_is_reached_behind_a_proxy_s_prefix(
        client: httpx.Client, server: Server, tmp_path: Path) -> None:
    """Behind a reverse proxy serving the API under /tuner (it strips the prefix and says so
    in X-Forwarded-Prefix, as Traefik and nginx set it), the Link named /v1/...: a client
    following it left the proxy's prefix. The other query parameters are kept."""
    _cli_study(_storage(server), tmp_path, "proxied", trials=5)
    answer = client.get("/v1/studies/proxied/trials?limit=2&extra=kept",
                        headers={"X-Forwarded-Prefix": "/tuner/"})
    assert answer.headers["link"] == \
        '</tuner/v1/studies/proxied/trials?extra=kept&offset=2&limit=2>; rel="next"'
    for odd in ("tuner", "/a b", "/x>, <http://elsewhere/", "/x?y=1"):  # not a plain path
        link = client.get("/v1/studies/proxied/trials?limit=2",
                          headers={"X-Forwarded-Prefix": odd}).headers["link"]
        assert link == '</v1/studies/proxied/trials?offset=2&limit=2>; rel="next"', odd
