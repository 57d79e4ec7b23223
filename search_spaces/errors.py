"""The one exception of the spec layer: which file, which field, what is wrong, what to change."""

from __future__ import annotations

__all__ = ["SpecError"]


class SpecError(ValueError):
    """A study spec (or catalog entry) that cannot be used.

    `str(err)` is one line: ``FILE: FIELD: MESSAGE``, empty parts left out, where FIELD is the
    dotted path of the offending value (``plan.tp``) and MESSAGE says what to change.
    """

    def __init__(self, message: str, *, file: str = "", field: str = "") -> None:
        self.file = str(file)
        self.field = field
        self.message = " ".join(str(message).split())
        super().__init__(str(self))

    def __str__(self) -> str:
        return ": ".join(part for part in (self.file, self.field, self.message) if part)

    def with_file(self, file: str) -> SpecError:
        """The same error, attributed to `file` (when it names none yet)."""
        return self if self.file else SpecError(self.message, file=file, field=self.field)
