"""`tuner explain SPEC` and `tuner explain NAME [--trial N]`: the dominant cost of one plan
(a fixed spec's, or a study's best or given trial's) and what-if figures."""

from __future__ import annotations

from pathlib import Path

import click

from search_spaces import StudySpec

from ..engine.explain import explain as explain_plan
from ..views import text as render
from ..views.explain import explain_text
from .options import json_option, storage_option
from .spec_input import is_stdin, load_given

__all__ = ["explain"]


def _is_spec(target: str) -> bool:
    return is_stdin(target) or Path(target).suffix in (".yaml", ".yml") or Path(target).is_file()


def _study_plan(name: str, trial: int | None, storage: str | None) -> StudySpec:
    from studies import load_study, open_storage  # only for a study

    from ..engine.trial_spec import chosen_plan
    from .paths import storage_for

    store = open_storage(storage_for(storage, study=name), heartbeat_interval_s=None,
                         create=False)
    return chosen_plan(load_study(store, name), trial).spec


@click.command()
@click.argument("target", metavar="SPEC|NAME")
@click.option("--trial", type=click.IntRange(min=0), default=None, metavar="N",
              help="With a study NAME: trial N instead of the study's best plan.")
@storage_option
@json_option
def explain(target: str, trial: int | None, storage: str | None, as_json: bool) -> None:
    """Which term dominates a plan's step time (a fixed SPEC's, or study NAME's best or
    trial N's), whether it fits in HBM, and the step time with 2x scale-out bandwidth, 2x
    HBM bandwidth, and 1.5x HBM capacity."""
    if _is_spec(target):
        if trial is not None:
            raise click.UsageError("--trial goes with a study NAME, not a spec file")
        spec = load_given(target)
    else:
        spec = _study_plan(target, trial, storage)
    out = explain_plan(spec)
    click.echo(render.to_json(out) if as_json else explain_text(out))
