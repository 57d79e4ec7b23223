"""`tuner explain SPEC`: the dominant cost of one fixed plan and what-if figures."""

from __future__ import annotations

import click

from search_spaces import load_spec

from ..engine.explain import explain as explain_plan
from ..views import text as render
from ..views.explain import explain_text
from .options import json_option

__all__ = ["explain"]


@click.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@json_option
def explain(spec_path: str, as_json: bool) -> None:
    """Which term dominates a fixed plan's step time, whether it fits in HBM, and the step
    time with 2x scale-out bandwidth, 2x HBM bandwidth, and 1.5x HBM capacity."""
    out = explain_plan(load_spec(spec_path))
    click.echo(render.to_json(out) if as_json else explain_text(out))
