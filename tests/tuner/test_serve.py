"""`tuner serve` against a real server process on loopback with httpx: every route answers
what the matching command prints; bad specs are 422 with the command line's line; bodies over
the limit 413; search spaces are refused by /v1/evaluate; a token guards every /v1 route; no
traceback and no storage password ever reach a client or the log.

(Studies run in the background, a server killed and restarted: test_serve_studies.py.)"""

from __future__ import annotations

import json
import logging
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import optuna
import pytest
import yaml
from click.testing import CliRunner

from studies import RESULT_ATTR, open_storage
from tuner.cli import main
from tuner.serve.logs import Redact
from tuner.serve.models import PlanResultJSON, StudyStatus, StudySummary

from .serving import Server, serving, start
from .specs import tiny

EXAMPLES = Path(__file__).resolve().parents[2] / "search_spaces" / "examples"
LLAMA = EXAMPLES / "llama3-70b-h100-fixed.yaml"
GPT3 = EXAMPLES / "gpt3-175b-a100-fixed.yaml"
YAML = {"content-type": "application/yaml"}
TOKEN = "a-test-token-of-32-characters-xx"


def _cli_json(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _cli_error(path: Path) -> str:
    """The line `tuner evaluate PATH` prints after `error: `."""
    result = CliRunner().invoke(main, ["evaluate", str(path)])
    assert result.exit_code == 2
    return result.stderr.strip().removeprefix("error: ")


def test_evaluate_answers_what_the_command_prints(client: httpx.Client) -> None:
    one = client.post("/v1/evaluate", content=LLAMA.read_bytes(), headers=YAML)
    assert one.status_code == 200 and one.headers["content-type"] == "application/json"
    assert one.json() == _cli_json("evaluate", "--json", str(LLAMA))
    PlanResultJSON.model_validate(one.json())

    specs = [yaml.safe_load(p.read_text()) for p in (GPT3, LLAMA)]
    both = client.post("/v1/evaluate", json=specs)
    assert both.status_code == 200
    assert both.json() == _cli_json("evaluate", "--json", str(GPT3), str(LLAMA))


def test_the_result_model_declares_every_field_the_answer_has(client: httpx.Client) -> None:
    answer = client.post("/v1/evaluate", content=LLAMA.read_bytes(), headers=YAML).json()
    assert set(answer) <= set(PlanResultJSON.model_fields), "the schema misses a field"


BAD = {  # LLAMA with `old` replaced by `new`
    "unknown field": ("  zero: 1\n", "  zero: 1\n  foo: 3\n"),
    "unit": ("  gpus_per_node: 8\n", "  gpus_per_node: 8\n  expansion: {capacity: 80 GB/s}\n"),
    "heads": ("  tp: 8\n", "  tp: 3\n"),
    "gpu": ("gpu: h100-80gb", "gpu: a100"),
    "yaml": ("model: llama3-70b", "model: [llama3-70b"),
    "tag": ("model: llama3-70b", "model: !!python/object/apply:os.system [ls]"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_spec_is_422_with_the_command_lines_message(
        client: httpx.Client, tmp_path: Path, case: str) -> None:
    old, new = BAD[case]
    text = LLAMA.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    answer = client.post("/v1/evaluate", content=path.read_bytes(), headers=YAML)
    assert answer.status_code == 422
    assert answer.json() == {"error": _cli_error(path).replace(str(path), "request")}


def test_a_bad_spec_in_a_list_is_named_by_its_place(client: httpx.Client) -> None:
    good = yaml.safe_load(LLAMA.read_text())
    bad = {**good, "plan": {**good["plan"], "tp": 3}}
    answer = client.post("/v1/evaluate", json=[good, bad])
    assert answer.status_code == 422 and answer.json()["error"].startswith("request[1]: plan")


def test_every_bad_spec_of_a_list_is_named(client: httpx.Client) -> None:
    good = yaml.safe_load(LLAMA.read_text())
    answer = client.post("/v1/evaluate", json=[good, {**good, "model": "nope"}, good,
                                               {**good, "training": 1}])
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error.startswith("request[1]: model: ") and "; request[3]: training" in error
    assert "request[0]" not in error and "request[2]" not in error


def test_a_spec_with_several_errors_is_one_line_of_each_apart(client: httpx.Client) -> None:
    """The command line prints one line per error; the API's one line keeps them apart."""
    answer = client.post("/v1/evaluate", json={"name": "x"})
    assert answer.status_code == 422
    assert answer.json()["error"].split("; request: ") == [
        "request: model: missing required field 'model'; add it",
        "training: missing required field 'training'; add it",
        "cluster: missing required field 'cluster'; add it"]


@pytest.mark.parametrize(("body", "headers", "words"), [
    (b"", YAML, "the body is empty"),
    (b"{not json", {"content-type": "application/json"}, "malformed JSON"),
    (b"\xff\xfe", YAML, "not UTF-8"),
    (b"a: &x [1, 2]\nb: *x\n", YAML, "aliases"),
    (b"[" * 5000 + b"]" * 5000, {"content-type": "application/json"}, "nested too deeply"),
    (b"[" * 200 + b"]" * 200, YAML, "nested too deeply"),
    (b"[" * 3000, YAML, "(more than 32 lists"),
    (b"- 1\n" * 65, YAML, "at most 64"),
    (b"a: " + b"9" * 5000, YAML, "5,000 digits"),
    (b'{"a": ' + b"9" * 5000 + b"}", {"content-type": "application/json"}, "5,000 digits"),
    (b"just a string", YAML, "a spec is a YAML mapping"),
])
def test_bodies_that_are_no_spec_are_422(client: httpx.Client, body: bytes,
                                         headers: dict[str, str], words: str) -> None:
    answer = client.post("/v1/evaluate", content=body, headers=headers)
    assert answer.status_code == 422 and words in answer.json()["error"], answer.text


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
def test_a_key_given_twice_is_refused_in_json_as_in_yaml(client: httpx.Client,
                                                        content_type: str) -> None:
    """JSON's decoder keeps the last of two equal keys without a word, as PyYAML does: the
    spec file's rule (search_spaces.yaml_io) holds for a JSON body too."""
    body = json.dumps(yaml.safe_load(LLAMA.read_text())).replace(
        '"cluster": {', '"cluster": {"gpu": "a100-80gb", "nodes": 1}, "cluster": {', 1)
    answer = client.post("/v1/evaluate", content=body, headers={"content-type": content_type})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert "key 'cluster' is given twice" in error and error.endswith("keep one"), error


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
def test_a_body_with_a_byte_order_mark_is_read(client: httpx.Client, content_type: str
                                               ) -> None:
    """Windows tools (PowerShell's Get-Content | Invoke-RestMethod, Notepad's files) start
    UTF-8 with a BOM, which JSON allows a reader to ignore (RFC 8259, sec. 8.1) and a spec file
    may hold: it was 'malformed JSON: Unexpected UTF-8 BOM'."""
    body = json.dumps(yaml.safe_load(LLAMA.read_text())).encode()
    answer = client.post("/v1/evaluate", content=b"\xef\xbb\xbf" + body,
                         headers={"content-type": content_type})
    assert answer.status_code == 200, answer.text


def test_a_body_is_read_by_libyaml_where_pyyaml_has_it(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """Pure-Python PyYAML took 15 s of the server's CPU for a 900 kB YAML list; a well-formed
    body is read by libyaml's parser (the pure one reads only a body it refuses, for the
    command line's message)."""
    if not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML built without libyaml")
    from tuner.serve.body import documents

    def pure(*args: Any) -> Any:
        raise AssertionError("the pure-Python parser read a well-formed body")

    monkeypatch.setattr(yaml.parser.Parser, "parse_node", pure)
    items, many = documents(LLAMA.read_bytes(), "application/yaml", max_specs=64)
    assert not many and items[0]["model"] == "llama3-70b"


def test_a_search_space_is_refused_by_evaluate_with_its_size(client: httpx.Client) -> None:
    space = (EXAMPLES / "llama3-70b-64-h100.yaml").read_bytes()
    answer = client.post("/v1/evaluate", content=space, headers=YAML)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error.startswith("request: plan.") and "/v1/studies" in error
    assert re.search(r"search space \([\d,]+ valid plans\)", error), error


def test_a_calibration_file_is_not_read_over_http(client: httpx.Client) -> None:
    data = {**yaml.safe_load(LLAMA.read_text()), "calibration": "/etc/passwd"}
    answer = client.post("/v1/evaluate", json=data)
    assert answer.status_code == 422
    assert answer.json()["error"].startswith("request: calibration: ")


def test_a_body_over_the_limit_is_413(client: httpx.Client) -> None:
    big = b"#" * (1 << 20) + b"\n"
    assert client.post("/v1/evaluate", content=big, headers=YAML).status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(20):
            yield b"#" * 65536

    answer = client.post("/v1/evaluate", content=chunks(), headers=YAML)
    assert answer.status_code == 413 and "over 1,048,576 bytes" in answer.json()["error"]


def test_unknown_studies_are_404_on_every_route(client: httpx.Client) -> None:
    for path in ("", "/best", "/trials", "/plan", "/report"):
        answer = client.get(f"/v1/studies/nothere{path}")
        assert answer.status_code == 404, path
        assert answer.json() == {"error": "no study named 'nothere'; GET /v1/studies lists "
                                          "the studies"}
    assert client.get("/v1/nothing").status_code == 404


def test_unknown_routes_and_methods_say_which_there_are(client: httpx.Client) -> None:
    """A client's typo (a path, or GET for POST) is told the routes, not "Not Found"."""
    unknown = client.get("/v1/evaluations")
    assert unknown.status_code == 404
    assert unknown.json()["error"].startswith("no route GET /v1/evaluations; ")
    assert "/openapi.json" in unknown.json()["error"]
    wrong = client.get("/v1/evaluate")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert wrong.json() == {"error": "GET /v1/evaluate: this route takes POST; "
                                     "/openapi.json lists the routes"}
    assert client.put("/v1/studies/x").json()["error"].startswith(
        "PUT /v1/studies/x: this route takes DELETE, GET, HEAD; ")


def test_bad_parameters_are_422_in_one_line(client: httpx.Client) -> None:
    answer = client.get("/v1/studies/x/best", params={"top": 0})
    assert answer.status_code == 422 and answer.json()["error"].startswith("query.top: ")


def test_the_openapi_schema_and_docs_are_served(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").json()
    paths = set(schema["paths"])
    assert {"/v1/evaluate", "/v1/studies", "/v1/studies/{name}", "/v1/studies/{name}/best",
            "/v1/studies/{name}/trials", "/v1/studies/{name}/plan",
            "/v1/studies/{name}/report", "/v1/studies/{name}/stop"} <= paths
    assert set(schema["paths"]["/v1/studies/{name}"]) == {"get", "delete"}
    components = schema["components"]["schemas"]
    assert {"StudySpec", "PlanSection", "ClusterSection", "StudyStatus"} <= set(components)
    body = schema["paths"]["/v1/studies"]["post"]["requestBody"]["content"]
    assert body["application/json"]["schema"] == {"$ref": "#/components/schemas/StudySpec"}
    docs = client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_a_study_made_by_the_command_line_is_read_over_http(
        server: Server, client: httpx.Client, tmp_path: Path) -> None:
    storage = re.search(r"storage (\S+);", server.text())
    assert storage is not None
    spec = tmp_path / "cli-made.yaml"
    spec.write_text(yaml.safe_dump(tiny("cli-made", search={
        "sampler": "random", "trials": 6, "seed": 0})), encoding="utf-8")
    made = _cli_json("search", str(spec), "--storage", storage.group(1), "--json")
    status = StudyStatus.model_validate(client.get("/v1/studies/cli-made").json())
    assert status.state == "done" and status.completed == made["trials"] == 6
    assert status.sampler == "random" and status.workers == 0
    best = client.get("/v1/studies/cli-made/best", params={"top": 2}).json()
    assert best == _cli_json("best", "cli-made", "--top", "2", "--storage", storage.group(1),
                             "--json")
    listed = client.get("/v1/studies").json()
    assert [StudySummary.model_validate(s).name for s in listed] == \
        [s["name"] for s in _cli_json("studies", "--storage", storage.group(1), "--json")]


def test_advice_names_the_api_not_the_command_line(server: Server, client: httpx.Client,
                                                  tmp_path: Path) -> None:
    """A client of the API is told what to send, not which `tuner` command to run."""
    storage = re.search(r"storage (\S+);", server.text())
    assert storage is not None
    spec = tiny("advised", search={"sampler": "random", "trials": 2, "seed": 0})
    (tmp_path / "advised.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    _cli_json("search", str(tmp_path / "advised.yaml"), "--storage", storage.group(1), "--json")
    missing = client.get("/v1/studies/advised/plan", params={"trial": 999}).json()["error"]
    assert missing.endswith("choose a complete trial (GET /v1/studies/advised/trials lists "
                            "them)"), missing
    changed = client.post("/v1/studies", json={**spec, "training": {
        **spec["training"], "global_batch": 64}}).json()["error"]
    assert "tuner" not in changed and changed.endswith(
        "or POST the spec it was made with to continue it"), changed


@pytest.mark.parametrize(("said", "told"), [
    ("resnet-50 is a layers model; the Megatron-LM, NeMo and torchtitan formats are for "
     "transformers: use --as spec", "... transformers: use as=spec"),
    ("no trial so far fits memory and the constraints; run more trials (`tuner resume x`) or "
     "relax the constraints; the nearest miss is trial 3 (--trial 3)",
     "... run more trials (POST its spec to /v1/studies again) or relax the constraints; the "
     "nearest miss is trial 3 (trial=3)"),
    ("--trial N picks any trial (`tuner export x` lists them)",
     "trial=N picks any trial (GET /v1/studies/x/trials lists them)"),
    ("its stored spec no longer parses (...); start a new study with `tuner search SPEC`",
     "its stored spec no longer parses (...); POST a spec with a new `name:` to /v1/studies"),
    ("tp=3 does not divide heads=8; choose one of [1, 2, 4, 8]",
     "tp=3 does not divide heads=8; choose one of [1, 2, 4, 8]"),
])
def test_command_line_advice_becomes_a_request(said: str, told: str) -> None:
    from tuner.serve.wording import for_http

    found = for_http(said, "x")
    assert "tuner " not in found and "--" not in found
    assert found == told if not told.startswith("...") else found.endswith(told[4:])


def test_a_failure_inside_is_a_generic_500_and_logged(server: Server, client: httpx.Client
                                                      ) -> None:
    """A trial whose stored result is garbage breaks `best`: the client gets one line, the
    traceback goes to the server's log."""
    storage = re.search(r"storage (\S+);", server.text())
    assert storage is not None
    store = open_storage(storage.group(1), heartbeat_interval_s=None, create=False)
    study = optuna.create_study(study_name="broken", storage=store)
    trial = study.ask()
    trial.set_user_attr(RESULT_ATTR, {"step_time_s": "not a number"})
    study.tell(trial, 1.0)
    answer = client.get("/v1/studies/broken/best")
    assert answer.status_code == 500
    assert answer.json() == {"error": "internal error; the server's log has the details"}
    assert "Traceback" in server.text() and "GET /v1/studies/broken/best failed" in server.text()


def test_every_v1_route_needs_the_token_when_one_is_set(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 't.db'}"
    with serving(tmp_path, storage, env={"TUNER_TOKEN": TOKEN}) as server:
        with server.client() as anonymous, server.client("wrong" * 8) as wrong, \
                server.client(TOKEN) as right:
            for method, path in (("POST", "/v1/evaluate"), ("POST", "/v1/studies"),
                                 ("GET", "/v1/studies"), ("GET", "/v1/studies/x"),
                                 ("GET", "/v1/studies/x/plan")):
                for http in (anonymous, wrong):
                    answer = http.request(method, path, content=LLAMA.read_bytes())
                    assert answer.status_code == 401, (method, path)
                    assert answer.headers["www-authenticate"] == "Bearer"
                    assert "Bearer" in answer.json()["error"]
            assert right.get("/v1/studies").status_code == 200
            assert right.post("/v1/evaluate", content=LLAMA.read_bytes(),
                              headers=YAML).status_code == 200
            assert anonymous.get("/openapi.json").status_code == 200
            schemes = anonymous.get("/openapi.json").json()["components"]["securitySchemes"]
            assert next(iter(schemes.values()))["scheme"] == "bearer"
        assert TOKEN not in server.text()


@pytest.mark.parametrize(("args", "words"), [
    (["--host", "0.0.0.0"], "give a token"),
    (["--host", "192.0.2.1", "--token", "short"], "at least 16"),
    (["--host", "127.0.0.1", "--port", "{busy}"], "cannot listen on 127.0.0.1:"),
])
def test_refusals_at_start_are_one_line_exit_2(tmp_path: Path, args: list[str],
                                               words: str) -> None:
    with socket.socket() as taken:  # a port in use
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        given = [a.format(busy=taken.getsockname()[1]) for a in args]
        result = CliRunner().invoke(main, ["serve", "--storage",
                                           f"sqlite:///{tmp_path}/r.db", *given],
                                    env={"TUNER_TOKEN": ""})
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr


def test_a_storage_password_never_shows(tmp_path: Path) -> None:
    url = "postgresql+psycopg://tuner:s3cret-pw@127.0.0.1:9/none"
    with pytest.raises(AssertionError) as failed:  # no database there: exit 2, one line
        start(tmp_path, url)
    assert "s3cret-pw" not in str(failed.value) and "***" in str(failed.value)


def test_the_log_filter_masks_passwords_and_tokens_in_tracebacks() -> None:
    try:
        raise RuntimeError(f"cannot reach postgresql://u:hunter22@db/x with {TOKEN}")
    except RuntimeError:
        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "at %s",
                                   ("mysql://a:pw9@h/d",), sys.exc_info())
    Redact([TOKEN]).filter(record)
    text = logging.Formatter().format(record)
    assert "hunter22" not in text and "pw9" not in text and TOKEN not in text
    assert "postgresql://u:***@db/x" in text and "mysql://a:***@h/d" in text
