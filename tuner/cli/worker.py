"""`tuner worker NAME`: join a stored study from another process or machine and optimise until
its trial target is reached across all workers."""

from __future__ import annotations

import time

import click

from search_spaces.wording import counted
from studies import load_study, open_storage

from ..engine.search import SearchOptions, continue_study, summary
from ..views import text as render
from .advice import advised
from .leaving import leave
from .options import heartbeat_option, json_option, storage_option, timeout_option
from .paths import storage_for
from .stopping import Said, as_it_was, finished

__all__ = ["worker"]


@click.command()
@click.argument("name")
@storage_option
@heartbeat_option
@timeout_option
@json_option
def worker(name: str, storage: str | None, heartbeat: int, timeout: float | None,
           as_json: bool) -> None:
    """Join study NAME (made by `tuner search`) and run trials until it has its target."""
    said = Said(lambda: as_it_was(name), lambda: finished(name))
    with said.around():  # a signal at any moment: one line, exit 130 (tuner.cli.stopping)
        _work(said, name, storage, heartbeat, timeout, as_json)


def _work(said: Said, name: str, storage: str | None, heartbeat: int, timeout: float | None,
          as_json: bool) -> None:
    started = time.perf_counter()
    store = open_storage(storage_for(storage, study=name), heartbeat_interval_s=heartbeat,
                         create=False)
    try:
        study = load_study(store, name)
        said.run(lambda stop: continue_study(study, SearchOptions(  # the study's sampler,
            timeout=timeout, stop=stop, worker=True,  # unseeded: workers propose different plans
            notify=lambda line: click.echo(advised(line), err=True))))
        out = summary(study)  # with its target
    finally:  # interrupted or failed too: the connections closed, the WAL checkpointed
        leave([store])
    if as_json:
        click.echo(render.to_json(out))
        return
    click.echo(f"study {name}: {counted(out['trials'], 'completed trial')} of a target of "
               f"{out['target']:,} ({time.perf_counter() - started:.1f} s)")
