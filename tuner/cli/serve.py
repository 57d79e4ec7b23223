"""`tuner serve`: the HTTP API (tuner.serve) on loopback, or beyond it with a token."""

from __future__ import annotations

import importlib.util

import click

from search_spaces.wording import counted
from studies import open_storage, redact_url, storage_url

from ..engine.interrupt import default_signals
from ..errors import TunerError
from .leaving import leave
from .options import heartbeat_option, storage_option

__all__ = ["INSTALL_HINT", "serve"]

INSTALL_HINT = "pip install 'cluster-tuner[serve]'"


def _installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("fastapi", "uvicorn"))


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; any but loopback needs a token.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="The port (0: a free one, printed at start).")
@storage_option
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Worker processes per study (an exhaustive sweep runs in one).")
@click.option("--token", envvar="TUNER_TOKEN", default=None, metavar="TOKEN",
              help="The bearer token every /v1 request must send (at least 16 characters; "
                   "$TUNER_TOKEN keeps it out of the process list); needed beyond loopback.")
@click.option("--max-studies", default=4, show_default=True, type=click.IntRange(min=1),
              help="Studies run at once; a new one beyond is refused (429).")
@heartbeat_option
def serve(host: str, port: int, storage: str | None, workers: int, token: str | None,
          max_studies: int, heartbeat: int) -> None:
    """The HTTP API: /v1/evaluate, /v1/studies (run in background worker processes, picked
    up again by a restarted server), their status, best plans, trials, framework settings
    and reports; OpenAPI at /openapi.json, docs at /docs. Ctrl-C stops it and its workers
    (their running trials are queued again)."""
    if not _installed():
        raise TunerError(f"fastapi and uvicorn are not installed; {INSTALL_HINT}")
    default_signals()  # uvicorn's graceful shutdown handles SIGTERM and SIGINT itself
    from ..serve import ServeConfig, create_app
    from ..serve.auth import check_binding
    from ..serve.server import address, listen, run, storage_password

    token = token or None
    check_binding(host, token)
    url = storage_url(storage)
    store = open_storage(url, heartbeat_interval_s=None)
    sock = listen(host, port)
    config = ServeConfig(storage_url=url, token=token, workers=workers,
                         heartbeat_s=heartbeat, max_studies=max_studies)
    guard = "bearer token required" if token else "no token: loopback only"
    click.echo(f"tuner serve: {address(sock)} (storage {redact_url(url)}; {guard}; "
               f"{counted(workers, 'worker')} per study); docs at /docs; Ctrl-C stops", err=True)
    secrets = [s for s in (token, storage_password(url)) if s]
    try:
        run(create_app(config, store), sock, secrets=secrets)
    finally:  # the connections closed, the WAL checkpointed
        leave([store])
