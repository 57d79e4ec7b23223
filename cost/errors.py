"""The cost package's one exception type, and the lookup of a named choice that raises it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

__all__ = ["CostModelError", "named"]

_T = TypeVar("_T")


class CostModelError(ValueError):
    """Inputs the cost model cannot evaluate; the message says which value and what to change."""


def named(choices: Mapping[str, _T], name: str, *, field: str) -> _T:
    """`choices[name]`; CostModelError naming `field` (as a spec writes it, e.g.
    "stack.kernels") and the names it takes where `name` is not one of them."""
    try:
        return choices[name]
    except KeyError:
        raise CostModelError(f"{field} {name!r} is unknown; use one of "
                             f"{', '.join(choices)}") from None
