"""Counts in the messages of every package: "1 plan", "3,960 plans"."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str) -> str:
    """`n` with thousands separators and `noun`, plural (an added "s") unless n is 1."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
