"""Running the app: the listening socket (bound before the server starts, so that a port in
use is one line and `--port 0` can say which port it got) and uvicorn on it, with the
server's logging (tuner.serve.logs)."""

from __future__ import annotations

import socket
from typing import Any

import uvicorn
from sqlalchemy.engine import make_url

from ..collector import resume as resume_collector
from ..errors import TunerError
from .logs import configure_logging

__all__ = ["LIMIT_CONCURRENCY", "address", "listen", "run", "storage_password"]

LIMIT_CONCURRENCY = 256
"""Connections and tasks at once; uvicorn answers 503 beyond (a bound on memory)."""


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
                            limit_concurrency=LIMIT_CONCURRENCY)
    uvicorn.Server(config).run(sockets=[sock])
