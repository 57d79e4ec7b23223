"""`tuner plan NAME [--trial N] --as spec|megatron|nemo|torchtitan`: a study's best plan (or
trial N's) as a fixed spec or as a training framework's launch settings."""

from __future__ import annotations

import click

from studies import load_study, open_storage

from ..engine.trial_spec import chosen_plan
from ..export import FORMATS, render
from .options import storage_option
from .paths import storage_for

__all__ = ["plan"]

trial_option = click.option("--trial", "trial", type=click.IntRange(min=0), default=None,
                            metavar="N", help="Trial N instead of the study's best plan.")


@click.command()
@click.argument("name")
@trial_option
@click.option("--as", "fmt", type=click.Choice(list(FORMATS)), default="spec",
              show_default=True, help="A fixed spec (YAML), Megatron-LM flags, NeMo 2 recipe "
                                      "overrides or a torchtitan TOML config.")
@storage_option
def plan(name: str, trial: int | None, fmt: str, storage: str | None) -> None:
    """The best plan of study NAME (or trial N) as a spec or a framework's settings."""
    store = open_storage(storage_for(storage, study=name), heartbeat_interval_s=None,
                         create=False)
    click.echo(render(fmt, chosen_plan(load_study(store, name), trial)))
