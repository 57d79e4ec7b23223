"""Running the app: the listening socket (bound before the server starts, so that a port in
use is one line and `--port 0` can say which port it got) and uvicorn on it, with the
server's logging (tuner.serve.logs) and a deadline on each request's headers
(head_deadline_protocol)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn
from sqlalchemy.engine import make_url

from ..collector import resume as resume_collector
from ..errors import TunerError
from .logs import configure_logging

__all__ = ["HEAD_S", "LIMIT_CONCURRENCY", "address", "head_deadline_protocol", "listen", "run",
           "storage_password"]

LIMIT_CONCURRENCY = 256
"""Connections and tasks at once; uvicorn answers 503 beyond (a bound on memory)."""
HEAD_S = 10.0
"""Seconds a connection has to send a request's headers, once open or once answered."""


def head_deadline_protocol(seconds: float = HEAD_S) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools' when installed, else h11's) closing a connection
    that has not sent a whole request head `seconds` after it opened or after its last
    answer. uvicorn bounds only the wait after an answer, and any byte ends that wait, so
    LIMIT_CONCURRENCY connections left open, or sending a header a byte at a time, held the
    server's every slot (each new request answered 503) for as long as they liked."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    base: Any = AutoHTTPProtocol

    class HeadDeadline(base):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._await_head(None)

        def on_response_complete(self) -> None:
            answered = self.cycle  # a pipelined request may start a new cycle in super()
            super().on_response_complete()
            self._await_head(answered)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            super().connection_lost(exc)

        def _await_head(self, answered: Any) -> None:
            """Close the connection in `seconds` unless a request's head came after the
            `answered` one (uvicorn starts a new request/response cycle for each)."""
            if self._head_timer is not None:
                self._head_timer.cancel()

            def expire() -> None:
                if self.cycle is answered and not self.transport.is_closing():
                    self.transport.close()
            self._head_timer = self.loop.call_later(seconds, expire)

    return HeadDeadline


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket listening on `host`:`port` (0: a free port); TunerError when it cannot."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as err:
        raise TunerError(f"cannot listen on {host}:{port} ({err.strerror or err}); give "
                         "another --port (0 picks a free one) or --host") from err
    return sock


def address(sock: socket.socket) -> str:
    """The socket's URL, e.g. http://127.0.0.1:8080."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def storage_password(url: str) -> str | None:
    """The password in a storage URL, to be masked wherever it would be printed."""
    try:
        password = make_url(url).password
        return str(password) if password is not None else None
    except Exception:  # not an SQLAlchemy URL (a journal file): no password
        return None


def run(app: Any, sock: socket.socket, *, secrets: list[str]) -> None:
    """Serve `app` on `sock` until Ctrl-C or SIGTERM (then the app stops its workers)."""
    configure_logging(secrets)
    resume_collector()  # a server runs until stopped (tuner.collector)
    config = uvicorn.Config(app, log_config=None, access_log=True,
                            limit_concurrency=LIMIT_CONCURRENCY, http=head_deadline_protocol())
    uvicorn.Server(config).run(sockets=[sock])
