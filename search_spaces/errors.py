"""The one exception of the spec layer: which file, which field, what is wrong, what to change."""

from __future__ import annotations

__all__ = ["SpecError", "SpecErrors", "one_or_many"]


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


class SpecErrors(SpecError):
    """Several things wrong with one spec, reported at once: `str(err)` has one line per
    error (``FILE: FIELD: MESSAGE`` each); `file`, `field` and `message` are the first's, so
    code that reads one error reads this one as its first."""

    def __init__(self, errors: list[SpecError]) -> None:
        if not errors:
            raise ValueError("SpecErrors needs at least one error")
        self.errors = tuple(errors)
        first = self.errors[0]
        super().__init__(first.message, file=first.file, field=first.field)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    def with_file(self, file: str) -> SpecError:
        return SpecErrors([e.with_file(file) for e in self.errors])


def one_or_many(errors: list[SpecError]) -> SpecError:
    """The one error of `errors`, or a SpecErrors of them all."""
    return errors[0] if len(errors) == 1 else SpecErrors(errors)
