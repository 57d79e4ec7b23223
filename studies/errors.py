"""The one exception of the studies layer: storages, stored studies and their metadata."""

from __future__ import annotations

__all__ = ["StudyError"]


class StudyError(Exception):
    """A storage or a stored study that cannot be used.

    `str(err)` is one line saying what is wrong and what to do; a storage URL in it is always
    redacted (no password).
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))
