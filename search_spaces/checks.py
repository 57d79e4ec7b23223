"""Checks of a whole spec that no one section can make: a price for every GPU when money is
the objective or a limit, and a training length of at least one optimizer step."""

from __future__ import annotations

from typing import Any

from .choices import Choice
from .errors import SpecError
from .gpu import has_price
from .node import gpu_label

__all__ = ["price_problems", "token_problems"]

_MONEY_LIMITS = ("max_cost", "max_hourly_cost")


def _money_needed(spec: Any) -> str | None:
    """What asks for prices: the cost objective or a money constraint (None: nothing)."""
    if "cost" in spec.objective:
        return "objective: cost"
    given = [c for c in _MONEY_LIMITS if getattr(spec.constraints, c) is not None]
    return f"constraints.{given[0]}" if given else None


def price_problems(spec: Any) -> list[SpecError]:
    """A GPU without a price (a custom GPU without `price_per_hour`, and no
    `price_per_node_hour`) where cost is the objective or a limit: it would cost $0 and win
    every cost comparison."""
    needed = _money_needed(spec)
    if needed is None:
        return []
    sections = [("cluster", spec.cluster)] if spec.cluster.pools is None else \
        [(f"cluster.pools[{i}]", pool) for i, pool in enumerate(spec.cluster.pools)]
    out = []
    for where, section in sections:
        if section.price_per_node_hour is not None or section.price_per_gpu_hour is not None:
            continue
        listed = isinstance(section.gpu, Choice)
        gpus = section.gpu.values() if listed else (section.gpu,)
        out += [SpecError(f"GPU {gpu_label(gpu)!r} has no price, and {needed} needs one; give "
                          f"it {_price_form(gpu)}, or the "
                          f"{where.split('.')[-1]} a price_per_node_hour",
                          field=f"{where}.gpu{f'[{i}]' if listed else ''}.price_per_hour")
                for i, gpu in enumerate(gpus) if not has_price(gpu)]
    return out


def _price_form(gpu: Any) -> str:
    """How to price a GPU: `price_per_hour`, or for a catalog name without a list price (the
    H800) the mapping that gives it one."""
    return (f"a price (gpu: {{base: {gpu}, price_per_hour: USD per GPU-hour}})"
            if isinstance(gpu, str) else "price_per_hour (USD per GPU-hour)")


def token_problems(spec: Any) -> list[SpecError]:
    """`training.tokens` (samples for a layers model) fewer than one optimizer step trains:
    a count written in billions without its exponent (`tokens: 300` for 300e9)."""
    tokens = spec.training.tokens
    seq_len = getattr(spec.model, "seq_len", None)
    step = spec.training.global_batch * (seq_len or 1)
    if not 0 < tokens < step:
        return []
    if seq_len:
        what = (f"{spec.training.global_batch:,} sequences x {seq_len:,} = {step:,} tokens",
                f"{tokens:g}e9 (billion) or {tokens:g}e12 (trillion)")
    else:
        what = (f"{step:,} samples", f"{tokens:g}e6 (million)")
    return [SpecError(f"{tokens:g} is fewer than one optimizer step trains ({what[0]}); the "
                      f"count is in single {'tokens' if seq_len else 'samples'}: did you mean "
                      f"{what[1]}?", field="training.tokens")]
