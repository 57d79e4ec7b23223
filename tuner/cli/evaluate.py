"""`tuner evaluate SPEC...` and `tuner catalog`: the two commands that need no storage (and so
import neither Optuna nor SQLAlchemy: they start fast)."""

from __future__ import annotations

import click

from search_spaces import gpu_catalog, gpu_info, load_spec, model_catalog, model_info

from ..engine.evaluation import fixed_result
from ..views import text as render
from .options import json_option

__all__ = ["catalog", "evaluate"]


@click.command()
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
@json_option
def evaluate(specs: tuple[str, ...], as_json: bool) -> None:
    """The cost model on fixed specs: step time, memory, breakdown."""
    results = []
    for path in specs:
        spec = load_spec(path)
        results.append((spec, fixed_result(spec)))
    if as_json:
        payload = [r.as_dict() for _, r in results]
        click.echo(render.to_json(payload[0] if len(payload) == 1 else payload))
        return
    texts = [render.evaluation_text(s.name, r, tokens=s.training.tokens) for s, r in results]
    click.echo("\n\n".join(texts))


@click.command()
@json_option
def catalog(as_json: bool) -> None:
    """Built-in models and GPUs with their key figures."""
    models, gpus = model_catalog(), gpu_catalog()
    if as_json:
        sources = {n: str(i.get("source", "")) for n, i in model_info().items()}
        descriptions = {n: str(i.get("description", "")) for n, i in gpu_info().items()}
        click.echo(render.to_json(render.catalog_json(
            models, gpus, sources=sources, descriptions=descriptions)))
        return
    click.echo(render.catalog_text(models, gpus))
