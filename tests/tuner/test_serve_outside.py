"""A study run by workers the server did not start (`tuner worker NAME` by hand, in another
process or on another machine) is seen as running from what the storage records (running
trials and their heartbeats; a journal's worker records), against a real `tuner serve`: its
status says so, DELETE refuses it (it was deleted under them) and stop says it cannot stop
them (it said the study was not running). And a study deleted while a request reads it is
404, not 500."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import optuna
import pytest
import yaml
from click.testing import CliRunner

from studies import StudyError, open_storage
from tuner.cli import main
from tuner.serve.service import _outside_run

from .serving import ROOT, serving, study
from .specs import tiny
from .workers import storage_for

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


@pytest.fixture(params=["sqlite", "journal", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A file storage of the test's own, or the PostgreSQL server .ci/run starts (shared by
    the session: the study there gets a name of its own)."""
    return storage_for(request.param, tmp_path)


@pytest.fixture
def name(url: str) -> str:
    return "long" if not url.startswith("postgresql") else f"long-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def by_hand(url: str, name: str, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`tuner search long.yaml --storage URL` in a process of its own, a target far off (it
    runs for the whole test), as a person starts it (or `tuner worker long`) by hand."""
    spec = tmp_path / "long.yaml"
    spec.write_text(yaml.safe_dump(tiny(name, search={"sampler": "random",
                                                        "trials": 100_000, "seed": 0})),
                    encoding="utf-8")
    worker = subprocess.Popen([sys.executable, "-m", "tuner", "search", str(spec), "--storage",
                               url, "--heartbeat", "1"], cwd=ROOT, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while _trials(url, name) < 10:
            assert worker.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        yield worker
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait()


def _trials(url: str, name: str) -> int:
    try:
        return len(study(url, name).get_trials(deepcopy=False))
    except (StudyError, KeyError):  # not made yet
        return 0


def test_a_study_run_by_workers_started_by_hand_is_running(
        url: str, name: str, tmp_path: Path, by_hand: subprocess.Popen[bytes]) -> None:
    with serving(tmp_path, url, "--workers", "1", "--heartbeat", "1") as server, \
            server.client() as client:
        deadline = time.monotonic() + 10  # a status is a look at one moment: it may
        while True:                         # fall between two trials on a loaded machine
            status = client.get(f"/v1/studies/{name}").json()
            seen = (status["state"], status["workers"], status["outside_workers"])
            if seen == ("running", 0, 1) or time.monotonic() > deadline:
                break
        assert seen == ("running", 0, 1), status
        refused = client.delete(f"/v1/studies/{name}")
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"] == (
            f"study '{name}' is running: 1 live worker outside this server runs it; stop it "
            "where it runs (Ctrl-C or SIGTERM to `tuner worker`/`tuner search`: each puts "
            "its running trial back in the queue), then DELETE it")
        assert name in [s["name"] for s in client.get("/v1/studies").json()]
        stop = client.post(f"/v1/studies/{name}/stop")
        assert stop.status_code == 409, stop.text
        assert stop.json()["error"] == (
            f"study '{name}' is run by 1 live worker this server did not start, which it "
            "cannot stop; stop it where it runs (Ctrl-C or SIGTERM to `tuner worker`/"
            "`tuner search`: each puts its running trial back in the queue)")
        assert by_hand.poll() is None  # left running

        by_hand.send_signal(signal.SIGTERM)  # as the answer says: the trial goes back
        by_hand.wait(timeout=60)
        assert client.get(f"/v1/studies/{name}").json()["outside_workers"] == 0
        assert client.delete(f"/v1/studies/{name}").status_code == 200


def test_a_study_deleted_while_its_report_is_rendered_is_404(tmp_path: Path) -> None:
    """DELETE landing while GET .../report read the study (a portal showing the report as a
    scheduler cleans up) answered 500 'internal error' (Optuna's KeyError 'Record does not
    exist.'); now 404, one line. The report reads the storage throughout its rendering, and
    DELETE takes a moment to make sure no worker runs the study: the report is asked ever
    later after the DELETE until the deletion lands inside it."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    spec = tmp_path / "src.yaml"
    spec.write_text(yaml.safe_dump(tiny("src", search={"sampler": "random", "trials": 40,
                                                       "seed": 0})), encoding="utf-8")
    made = CliRunner().invoke(main, ["search", str(spec), "--storage", url, "--json"])
    assert made.exit_code == 0, made.output
    store = open_storage(url, heartbeat_interval_s=None, create=False)
    answers: list[httpx.Response] = []
    with serving(tmp_path, url) as server, server.client() as client, \
            ThreadPoolExecutor(1) as pool:
        delete_s = 0.4  # what DELETE takes, measured anew each time
        for attempt in range(30):
            optuna.copy_study(from_study_name="src", from_storage=store, to_storage=store,
                              to_study_name="victim")
            deleted = pool.submit(client.delete, "/v1/studies/victim")
            time.sleep(max(0.0, delete_s - 0.25 + 0.02 * (attempt % 15)))
            answers.append(client.get("/v1/studies/victim/report"))
            assert deleted.result().status_code == 200
            delete_s = deleted.result().elapsed.total_seconds()
            if answers[-1].status_code == 404 and "deleted while" in answers[-1].text:
                break
    assert [a.status_code for a in answers if a.status_code not in (200, 404)] == []
    assert answers[-1].json() == {"error": "study 'victim' was deleted while this request "
                                           "read it; GET /v1/studies lists the studies"}


def _long(name: str) -> dict[str, object]:
    """The spec the by_hand fixture runs."""
    return tiny(name, search={"sampler": "random", "trials": 100_000, "seed": 0})


def test_any_failure_of_a_read_that_a_deletion_met_halfway_is_404(tmp_path: Path) -> None:
    """The race above, made certain: a study deleted while a request reads it, the read then
    failing as SQLite's separate statements let it (a trial read COMPLETE whose values were
    already deleted: a TypeError in the ranking, which was a 500 in CI), is a 404; the same
    failure on a study that is still there stays what it is."""
    from tuner.serve.config import ServeConfig
    from tuner.serve.service import RequestError, Service

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_storage(url, heartbeat_interval_s=None)
    for name in ("gone", "kept"):
        optuna.create_study(study_name=name, storage=store)
    service = Service(config=ServeConfig(storage_url=url), storage=store,
                      runner=None)  # type: ignore[arg-type]  # a read starts no worker

    def deleted_then_failed(study: optuna.Study) -> None:
        optuna.delete_study(study_name=study.study_name, storage=store)
        raise TypeError("'NoneType' object is not subscriptable")

    with pytest.raises(RequestError, match="was deleted while this request read it") as err:
        service._read("gone", deleted_then_failed)
    assert err.value.status_code == 404

    def failed(study: optuna.Study) -> None:
        raise TypeError("a defect of the report")

    with pytest.raises(TypeError, match="a defect of the report"):
        service._read("kept", failed)


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_a_server_started_again_leaves_a_study_to_the_workers_outside_it(
        url: str, name: str, tmp_path: Path, by_hand: subprocess.Popen[bytes]) -> None:
    """A study a stopped server ran (its `serve` record: unfinished, not stopped, its workers
    gone), which a person went on with by hand: the next server started its own workers for
    it on top of theirs. Now it leaves the study to them and says so; a POST of the spec
    still adds its workers (a `tuner worker` joining is legitimate) and says they run it."""
    study(url, name).set_user_attr("serve", {
        "workers": 1, "requested": "2026-01-01T00:00:00+00:00", "deadline": None,
        "processes": []})
    with serving(tmp_path, url, "--workers", "1", "--heartbeat", "1") as server, \
            server.client() as client:
        left = (f"study {name}: unfinished, not resumed: 1 live worker outside this server "
                "runs it")
        deadline = time.monotonic() + 30
        while left not in server.text() and "worker process(es) started" not in server.text():
            assert time.monotonic() < deadline, server.text()
            time.sleep(0.1)
        assert left in server.text() and "worker process(es) started" not in server.text()
        deadline = time.monotonic() + 10  # a status is a look at one moment: it may
        while True:                         # fall between two trials on a loaded machine
            status = client.get(f"/v1/studies/{name}").json()
            assert "state" in status, status
            if (status["state"], status["workers"]) == ("running", 0) \
                    or time.monotonic() > deadline:
                break
        assert (status["state"], status["workers"]) == ("running", 0), status

        posted = client.post("/v1/studies", json=_long(name))
        assert posted.status_code == 202, posted.text
        assert (posted.json()["workers"], posted.json()["outside_workers"]) == (1, 1)
        assert "1 live worker outside this server runs it too" in server.text()
    assert by_hand.poll() is None  # left running


def test_workers_outside_the_server_are_counted_in_words() -> None:
    """One worker is "1 live worker ... runs it; stop it", never "1 live worker(s)"."""
    assert _outside_run(1, "run").startswith("1 live worker outside this server runs it; "
                                             "stop it where it runs (")
    assert _outside_run(2, "run by").startswith("2 live workers this server did not start, "
                                                "which it cannot stop; stop them where they "
                                                "run (")
