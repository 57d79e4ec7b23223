"""The tuner package's one exception type."""

from __future__ import annotations

__all__ = ["TunerError"]


class TunerError(Exception):
    """A command that cannot do what was asked; the message says what to change."""
