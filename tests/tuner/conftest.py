"""Fixtures of the HTTP API's tests (test_serve, test_serve_http, test_serve_control): a
server on a SQLite file with one worker, module-scoped (one server per module), and a client
of it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from .serving import Server, serving


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve")
    with serving(tmp, f"sqlite:///{tmp / 's.db'}", "--workers", "1") as running:
        yield running


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as http:
        yield http
