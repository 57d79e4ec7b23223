"""The HTTP API as a demanding client sees it, beyond what each route answers
(test_serve.py): HEAD wherever GET (RFC 9110, sec. 9.3.2), a 405's `Allow` naming every
method of the path, a 401 saying what was wrong with the credentials, a client that leaves
before its body is read (not the server's failure), and connections that trickle a request
(headers or body) closed or answered 408 rather than holding the server's slots."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml
from fastapi import Depends, FastAPI

from tuner.serve.auth import bearer_guard
from tuner.serve.guard import Guard
from tuner.serve.server import head_deadline_protocol

from .serving import wait_for
from .specs import tiny

TOKEN = "a-test-token-of-32-characters-xx"
LLAMA = Path(__file__).resolve().parents[2] / "search_spaces" / "examples" / \
    "llama3-70b-h100-fixed.yaml"


def test_head_answers_as_get_without_a_body(client: httpx.Client) -> None:
    """A monitor or `curl -I` asks HEAD: it was 405 ('this route takes GET') on every route
    of the API."""
    for path, status in (("/v1/studies", 200), ("/v1/studies/nothere", 404),
                         ("/v1/studies/nothere/best", 404)):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == status, (path, head.text)
        assert head.content == b"" and head.headers["content-type"] == "application/json"
        assert head.headers["content-length"] == str(len(got.content))


@pytest.mark.parametrize("path", ["/v1/evaluate", "/v1/studies"])
def test_a_form_upload_is_415_not_a_yaml_error(client: httpx.Client, path: str) -> None:
    """A portal's file upload (multipart/form-data) was read as YAML: 422 'line 2, column
    20: malformed YAML: mapping values are not allowed here', of text the user never wrote."""
    answer = client.post(path, files={"spec": ("spec.yaml", LLAMA.read_bytes())})
    assert answer.status_code == 415, answer.text
    assert answer.json() == {"error": "multipart/form-data is a form, not a spec; send the "
                                      "spec itself as the body, JSON (Content-Type: "
                                      "application/json) or YAML (e.g. curl --data-binary "
                                      "@FILE)"}
    assert client.post(path, content=LLAMA.read_bytes()).status_code != 415  # curl -d's type


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("PUT", "/v1/studies", "GET, HEAD, POST"),
    ("DELETE", "/v1/studies", "GET, HEAD, POST"),
    ("HEAD", "/v1/evaluate", "POST"),
    ("PUT", "/v1/studies/x", "DELETE, GET, HEAD"),
    ("OPTIONS", "/v1/studies/x/report", "GET, HEAD"),
    ("GET", "/v1/studies/x/stop", "POST"),
    ("DELETE", "/v1/studies/a/b/best", "GET, HEAD"),
])
def test_a_405_names_every_method_of_the_path(client: httpx.Client, method: str, path: str,
                                              allow: str) -> None:
    """/v1/studies takes GET and POST: a PUT was told 'Allow: POST' and 'this route takes
    POST' (Starlette names the first route of the path only)."""
    answer = client.request(method, path)
    assert answer.status_code == 405 and answer.headers["allow"] == allow
    if method != "HEAD":
        assert answer.json() == {"error": f"{method} {path}: this route takes {allow}; "
                                          "/openapi.json lists the routes"}


async def _read_body(scope: Any, receive: Any, send: Any) -> None:
    """An app that reads the body (Starlette's way) and answers its length."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    body = await Request(scope, receive).body()
    await JSONResponse({"bytes": len(body)})(scope, receive, send)


def test_a_client_that_leaves_mid_body_is_one_line_not_an_error(
        caplog: pytest.LogCaptureFixture) -> None:
    """Each client that closed its connection before its body was read put an ERROR and a
    Starlette traceback ('ClientDisconnect') in the server's log, as a failure of the server
    would, and the server answered 500 to nobody."""
    messages = iter([{"type": "http.request", "body": b"model: x\n", "more_body": True},
                     {"type": "http.disconnect"}])
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/evaluate", "headers": []}
    with caplog.at_level(logging.INFO, logger="tuner.serve.guard"):
        asyncio.run(Guard(_read_body, max_body_bytes=1 << 20)(scope, receive, send))
    assert sent == []
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "POST /v1/evaluate: the client left before its request was read")]


@contextlib.contextmanager
def _uvicorn(app: Any, *, head_s: float) -> Iterator[tuple[str, int]]:
    """`app` under uvicorn with the server's protocol (head_deadline_protocol(head_s)) on a
    free loopback port, in a thread."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_config=None, access_log=False,
                            http=head_deadline_protocol(head_s))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield sock.getsockname()[:2]
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _closed_by_server(conn: socket.socket) -> bool:
    """True once the server closes `conn` (waits up to a minute; a server that never does
    fails the test rather than hanging it)."""
    conn.settimeout(60)
    try:
        return conn.recv(1) == b""
    except TimeoutError:
        return False


def test_a_connection_that_sends_no_whole_request_is_closed() -> None:
    """uvicorn bounds only the wait after an answer, and any byte ends it: 256 connections
    opened and left silent (or sending a header a byte at a time) held every slot of the
    server (LIMIT_CONCURRENCY), each new request answered 503, for as long as they stayed."""
    with _uvicorn(_read_body, head_s=0.3) as address:
        silent = socket.create_connection(address)
        trickling = socket.create_connection(address)
        trickling.sendall(b"GET /v1/studies HTTP/1.1\r\nHost: x\r\n")
        assert _closed_by_server(silent) and _closed_by_server(trickling)


def test_a_request_the_app_answers_slowly_is_not_cut() -> None:
    """The deadline is on the request's head only: an answer that takes longer comes."""
    async def slow(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.sleep(1.0)
        await _read_body(scope, receive, send)

    with _uvicorn(slow, head_s=0.3) as (host, port), \
            httpx.Client(base_url=f"http://{host}:{port}", timeout=60) as http:
        for _ in range(2):  # the second on the same connection, after an answer
            assert http.post("/", content=b"abc").json() == {"bytes": 3}


def test_a_body_that_trickles_is_408() -> None:
    """A body sent a byte now and then held its connection (and a slot) for as long as the
    client kept sending; now it is refused once its time is up, in the API's error body."""
    app = Guard(_read_body, max_body_bytes=1 << 20, body_s=0.3)
    with _uvicorn(app, head_s=30) as address:
        conn = socket.create_connection(address)
        conn.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nmodel: x\n")
        conn.settimeout(60)
        answer = b""
        while b"}" not in answer:
            chunk = conn.recv(4096)
            assert chunk, answer
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head.lower()
        assert body == (b'{"error": "the request body took over 0.3 s to arrive; send it '
                        b'at once"}')
        with httpx.Client(base_url="http://{}:{}".format(*address), timeout=60) as http:
            assert http.post("/", content=b"abc").json() == {"bytes": 3}


@pytest.mark.parametrize(("header", "words"), [
    (None, "a bearer token is required: send the server's token as `Authorization: "
           "Bearer TOKEN`"),
    ("Basic dXNlcjpwYXNz", "the Authorization header is not `Bearer TOKEN`: send the "
                           "server's token as `Authorization: Bearer TOKEN`"),
    (TOKEN, "the Authorization header is not `Bearer TOKEN`"),
    ("Bearer not-the-servers-token-xxxxxxxx", "the token in `Authorization: Bearer TOKEN` "
                                               "is not this server's; send the one it was "
                                               "started with (--token or TUNER_TOKEN)"),
])
def test_a_refused_token_is_told_what_was_wrong(header: str | None, words: str) -> None:
    """A wrong token was told 'a bearer token is required', as if none had been sent; and
    nothing the client sent is repeated (a token without its scheme would be)."""
    app = FastAPI()

    @app.get("/v1/x", dependencies=[Depends(bearer_guard(TOKEN))])
    def guarded() -> dict[str, str]:
        return {}

    headers = {"Authorization": header} if header else {}
    with _uvicorn(app, head_s=30) as (host, port), \
            httpx.Client(base_url=f"http://{host}:{port}", timeout=60) as http:
        answer = http.get("/v1/x", headers=headers)
        assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
        assert answer.json()["detail"].startswith(words)
        assert TOKEN not in answer.text
        right = http.get("/v1/x", headers={"Authorization": f"bearer {TOKEN}"})
        assert right.status_code == 200


def _published(api: dict[str, Any], path: str, method: str, answer: httpx.Response
               ) -> list[str]:
    """Where `answer` departs from what /openapi.json publishes for it: an undeclared status
    or media type, or a JSON body its schema refuses."""
    jsonschema = pytest.importorskip("jsonschema")
    declared = api["paths"][path][method]["responses"].get(str(answer.status_code))
    if declared is None:
        return [f"{method.upper()} {path}: status {answer.status_code} is not declared"]
    kind = answer.headers["content-type"].split(";")[0]
    if kind not in declared["content"]:
        return [f"{method.upper()} {path}: {kind} is not declared ({list(declared['content'])})"]
    if kind != "application/json":
        return []
    schema = {**declared["content"][kind]["schema"], "components": api["components"]}
    return [f"{method.upper()} {path} {answer.status_code}: "
            f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
            for e in jsonschema.Draft202012Validator(schema).iter_errors(answer.json())]


def test_real_answers_are_what_openapi_json_publishes(client: httpx.Client) -> None:
    """A generated client (openapi-generator, a portal's form) trusts /openapi.json: every
    route's real answers, successes and errors, validate against it."""
    api = client.get("/openapi.json").json()
    study = tiny("published", search={"sampler": "tpe", "trials": 4, "seed": 0})
    asked = [("/v1/studies", "post", client.post("/v1/studies", json=study))]
    wait_for(client, "published")
    bad = dict(study, plan={"tp": 3})
    for path, url in (("/v1/evaluate", "/v1/evaluate"), ("/v1/studies", "/v1/studies")):
        asked += [(path, "post", client.post(url, json=bad)),
                  (path, "post", client.post(url, content=b"a: [", headers={
                      "content-type": "application/yaml"}))]
    asked.append(("/v1/evaluate", "post", client.post("/v1/evaluate", content=LLAMA.read_bytes())))
    asked.append(("/v1/evaluate", "post", client.post("/v1/evaluate", json=[
        yaml.safe_load(LLAMA.read_text(encoding="utf-8"))] * 2)))
    asked.append(("/v1/studies", "get", client.get("/v1/studies")))
    for name in ("published", "nothere"):
        for suffix, query in (("", {}), ("/best", {"top": 3}), ("/trials", {}),
                              ("/plan", {"as": "torchtitan"}), ("/report", {})):
            path = "/v1/studies/{name}" + suffix
            asked.append((path, "get", client.get(f"/v1/studies/{name}{suffix}", params=query)))
    asked.append(("/v1/studies/{name}/best", "get",
                  client.get("/v1/studies/published/best", params={"top": 0})))
    asked += _paged_and_controlled(client)
    problems = [p for path, method, answer in asked for p in _published(api, path, method,
                                                                        answer)]
    assert problems == []



def _paged_and_controlled(client: httpx.Client) -> list[tuple[str, str, httpx.Response]]:
    """Answers of the pages (offset/limit) and of stopping and deleting studies: a study
    stopped (200), one not running (409), one deleted (200), one running (409), unknown
    ones (404), bad parameters (422)."""
    asked = [("/v1/studies", "get", client.get("/v1/studies", params={"limit": 1})),
             ("/v1/studies", "get", client.get("/v1/studies", params={"limit": 0})),
             ("/v1/studies/{name}/trials", "get", client.get(
                 "/v1/studies/published/trials", params={"offset": 1, "limit": 2})),
             ("/v1/studies/{name}/trials", "get", client.get(
                 "/v1/studies/published/trials", params={"offset": -1}))]
    long = tiny("published-long", search={"sampler": "random", "trials": 5000, "seed": 0})
    asked.append(("/v1/studies", "post", client.post("/v1/studies", json=long)))
    expected = [(202, "post", "")]
    for method, name, status in (("delete", "published-long", 409),
                                 ("stop", "published-long", 200),
                                 ("stop", "published-long", 409),
                                 ("delete", "published-long", 200),
                                 ("stop", "published", 409), ("delete", "published", 200),
                                 ("delete", "nothere", 404), ("stop", "nothere", 404)):
        path, answer = ("/v1/studies/{name}", client.delete(f"/v1/studies/{name}")) \
            if method == "delete" else \
            ("/v1/studies/{name}/stop", client.post(f"/v1/studies/{name}/stop"))
        asked.append((path, "delete" if method == "delete" else "post", answer))
        expected.append((status, method, name))
    codes = [(answer.status_code, *want[1:]) for (_, _, answer), want in
             zip(asked[4:], expected, strict=True)]
    assert codes == expected, codes
    return asked
