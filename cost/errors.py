"""The cost package's one exception type."""

from __future__ import annotations

__all__ = ["CostModelError"]


class CostModelError(ValueError):
    """Inputs the cost model cannot evaluate; the message says which value and what to change."""
