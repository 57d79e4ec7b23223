"""`tuner evaluate SPEC...` and `tuner catalog`: the two commands that need no storage (and so
import neither Optuna nor SQLAlchemy: they start fast). An unchanged spec evaluated before is
read from the cache of answers (tuner.cli.evaluated), without importing pydantic, numpy or
the cost model."""

from __future__ import annotations

import json
import os
import sys

import click

from ..errors import TunerError, each_or_errors
from . import evaluated as cache
from .leaving import freeze_at_exit
from .options import json_option

__all__ = ["catalog", "evaluate"]


def _one_blas_thread() -> None:
    """Before numpy's first import, ask OpenBLAS (which numpy loads) for one thread, unless
    the user chose: the pool it starts otherwise burns ~0.1 s of CPU on the other core as the
    command runs (`python -c "import numpy"`: 0.16-0.19 s of CPU, 0.07-0.09 s with one
    thread, the same wall time), which a busy 2-core machine takes from the command itself
    (issue 14). Neither command calls a BLAS routine: the cost model's arithmetic is
    element-wise."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@click.command()
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
@json_option
def evaluate(specs: tuple[str, ...], as_json: bool) -> None:
    """The cost model on fixed specs: step time, memory, breakdown."""
    freeze_at_exit()  # the interpreter's exit leaves the ~400 modules' objects to the OS
    results = _each_evaluated(specs)
    if as_json:
        payload = [e.value for e in results]
        click.echo(cache.to_json(payload[0] if len(payload) == 1 else payload))
        return
    click.echo("\n\n".join(e.text for e in results))


def _each_evaluated(specs: tuple[str, ...]) -> list[cache.Evaluated]:
    """Every spec evaluated; where some are bad, the error of each (InputErrors: a line
    each), so that one run names every file to fix."""
    from .main import user_error
    from .spec_input import STDIN

    if specs.count(STDIN) > 1:
        raise TunerError("`-` (the spec on stdin) is given more than once; give it once")
    return each_or_errors(specs, _evaluated, user_error)


def _evaluated(path: str) -> cache.Evaluated:
    """The spec at `path` evaluated: from the cache when neither it nor anything its answer
    depends on changed, else loaded, validated and evaluated (and then cached)."""
    from .spec_input import is_stdin, load_given, read_given

    # read once: a pipe (`<(command)`, `-` for stdin) gives its bytes once
    data = read_given(path) if is_stdin(path) else cache.read_or_none(path)
    regular = not is_stdin(path) and os.path.isfile(path)  # a pipe is never cached
    found = cache.load(path, data) if data is not None and regular else None
    if found is not None:
        return found
    _one_blas_thread()
    from ..engine.limits import fixed_result
    from ..views import text as render

    spec = load_given(path, data)  # errors as without a cache: this names the file and field
    profile = spec.calibration_path()
    reads = [str(profile.absolute())] if profile is not None else []
    digests = [cache.file_digest(p) for p in reads]  # before the files are read to evaluate
    result = fixed_result(spec)
    done = cache.Evaluated(render.evaluation_text(spec.name, result, tokens=spec.training.tokens),
                           json.loads(render.to_json(result.as_dict())),
                           tuple(d for d in digests if d is not None))
    if data is not None and regular and None not in digests \
            and cache.read_or_none(path) == data:
        cache.store(path, data, done)  # the spec evaluated is the one whose bytes key it
    return done


@click.command()
@json_option
def catalog(as_json: bool) -> None:
    """Built-in models and GPUs with their key figures."""
    freeze_at_exit()
    _one_blas_thread()
    from search_spaces import gpu_catalog, gpu_info, model_catalog, model_info

    from ..views import text as render

    models, gpus = model_catalog(), gpu_catalog()
    if as_json:
        sources = {n: str(i.get("source", "")) for n, i in model_info().items()}
        descriptions = {n: str(i.get("description", "")) for n, i in gpu_info().items()}
        click.echo(render.to_json(render.catalog_json(
            models, gpus, sources=sources, descriptions=descriptions)))
        return
    click.echo(render.catalog_text(models, gpus))
