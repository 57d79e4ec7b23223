"""The HTTP API as a demanding client sees it, beyond what each route answers
(test_serve.py): HEAD wherever GET (RFC 9110, sec. 9.3.2), a 405's `Allow` naming every
method of the path, a 401 saying what was wrong with the credentials, a client that leaves
before its body is read (not the server's failure), and connections that trickle a request
(headers or body) closed or answered 408 rather than holding the server's slots."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from .serving import Server, serving

TOKEN = "a-test-token-of-32-characters-xx"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve-http")
    with serving(tmp, f"sqlite:///{tmp / 's.db'}", "--workers", "1") as running:
        yield running


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as http:
        yield http


def test_head_answers_as_get_without_a_body(client: httpx.Client) -> None:
    """A monitor or `curl -I` asks HEAD: it was 405 ('this route takes GET') on every route
    of the API."""
    for path, status in (("/v1/studies", 200), ("/v1/studies/nothere", 404),
                         ("/v1/studies/nothere/best", 404)):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == status, (path, head.text)
        assert head.content == b"" and head.headers["content-type"] == "application/json"
        assert head.headers["content-length"] == str(len(got.content))


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("PUT", "/v1/studies", "GET, HEAD, POST"),
    ("DELETE", "/v1/studies", "GET, HEAD, POST"),
    ("HEAD", "/v1/evaluate", "POST"),
    ("DELETE", "/v1/studies/x", "GET, HEAD"),
    ("OPTIONS", "/v1/studies/x/report", "GET, HEAD"),
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
