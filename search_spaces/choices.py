"""Declarative choices: a value under `cluster` or `plan` is fixed, a list, or an integer range.

Knows nothing of the optimizer (shared/STYLE.md, sec. 10): `values()` lists what a choice
allows, and the module that adapts a space to Optuna builds its `suggest_*` calls on that.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)
from pydantic_core import PydanticCustomError, core_schema

from .errors import SpecError

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, TypeAdapter
    from pydantic.json_schema import JsonSchemaValue

__all__ = ["Choice", "Choosable", "IntChoosable", "IntRange", "fixed", "is_choice"]

T = TypeVar("T")
_TAGS = ("<fixed>", "<choice>", "<range>")  # union tags, left out of error paths


class Choice(BaseModel, Generic[T]):
    """One of a list of values (written as a YAML list)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, defer_build=True)
    options: tuple[T, ...] = Field(alias="values", min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> Choice[T]:
        seen = [repr(v) for v in self.options]
        if len(set(seen)) != len(seen):
            raise PydanticCustomError("repeated", "the list repeats a value; list each once")
        return self

    def values(self) -> tuple[T, ...]:
        return self.options

    def __repr_name__(self) -> str:
        return "Choice"


class IntRange(BaseModel):
    """Integers from `min` to `max` (inclusive): every `step`-th, or the powers of two; `log`
    asks the sampler to search on a log scale (it lists the same values)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    min: int = Field(strict=True)
    max: int = Field(strict=True)
    step: int = Field(default=1, strict=True, ge=1)
    log: bool = False
    powers_of_two: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> IntRange:
        if self.min > self.max:
            raise _custom(f"min={self.min} is above max={self.max}; swap them")
        if self.log and self.powers_of_two:
            raise _custom("choose log: true or powers_of_two: true, not both")
        if (self.log or self.powers_of_two) and self.step != 1:
            raise _custom("step does not combine with log or powers_of_two; drop step")
        if (self.log or self.powers_of_two) and self.min < 1:
            raise _custom(f"a log or powers-of-two range needs min >= 1 (got {self.min})")
        if self.powers_of_two and not self.values():
            raise _custom(f"no power of two lies in [{self.min}, {self.max}]; widen the range")
        return self

    def values(self) -> tuple[int, ...]:
        if self.powers_of_two:
            first = math.ceil(math.log2(self.min))
            return tuple(2**k for k in range(first, self.max.bit_length()) if 2**k <= self.max)
        return tuple(range(self.min, self.max + 1, self.step))


def _custom(message: str) -> PydanticCustomError:
    return PydanticCustomError("spec", "{reason}", {"reason": message})


def is_choice(value: object) -> bool:
    """True for a Choice or an IntRange, False for a fixed value."""
    return isinstance(value, (Choice, IntRange))


def fixed(value: object, *, field: str) -> Any:
    """`value` itself; SpecError naming `field` if it is a choice."""
    if is_choice(value):
        raise SpecError("this value is a choice (a list or a range); give one value to "
                        "evaluate a plan, or run `tuner search` to search over it", field=field)
    return value


def _tag(value: Any) -> str:
    if isinstance(value, Choice) or (isinstance(value, dict) and "values" in value):
        return "<choice>"
    if isinstance(value, IntRange) or (isinstance(value, dict) and {"min", "max"} & set(value)):
        return "<range>"
    return "<fixed>"


def _wrap_list(value: Any) -> Any:
    return {"values": list(value)} if isinstance(value, (list, tuple)) else value


def _range_bounds_checker(inner: Any) -> Any:
    adapters: list[TypeAdapter[Any]] = []  # built on the first range (most specs have none)

    def check(value: Any) -> Any:
        if isinstance(value, IntRange):
            if not adapters:
                from pydantic import TypeAdapter  # pydantic.type_adapter, for a range only

                adapters.append(TypeAdapter(inner))
                # IntRange's own serializer, which dumping the section calls: pydantic before
                # 2.12 leaves a deferred model's a placeholder that a dump cannot call
                IntRange.model_rebuild()
            adapters[0].validate_python(value.min)
            adapters[0].validate_python(value.max)
        return value

    return check


class _ChoiceOf:
    """The `<choice>` member of `Choosable[inner]`: validates as `Choice[inner]`, a model that
    pydantic makes, with its validator, when a spec first lists values there rather than when
    the section's class is made: a fixed spec (`tuner evaluate`) makes none of the 19 the
    sections' fields would (13 ms of its start, issue 14). Values, errors and dumps are
    Choice[inner]'s (pydantic reports the line errors of a ValidationError raised in a
    validator function under the field's location, as those of a nested model); so is the
    JSON schema, inline rather than under `$defs`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._adapter: TypeAdapter[Any] | None = None

    def _model(self) -> type[Choice[Any]]:
        """Choice[inner] (pydantic makes each parametrized model once and keeps it)."""
        choice: Any = Choice  # indexed by a value, which mypy does not take as a type
        return choice[self._inner]

    def _validate(self, value: Any) -> Any:
        if self._adapter is None:
            from pydantic import TypeAdapter  # pydantic.type_adapter, for a list only

            model = self._model()
            self._adapter = TypeAdapter(model)
            # the model's own serializer, which a dump of the section calls on the value (the
            # field validates through this function, so its schema holds none): pydantic
            # before 2.12 leaves a deferred model's a placeholder that a dump cannot call
            model.model_rebuild()
        return self._adapter.validate_python(value)

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(self._validate)

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """Choice[inner]'s `{values: [...]}`, or the bare list a spec writes (`tp: [1, 2]`,
        which _wrap_list takes as the values): a client validating against /openapi.json
        refused every spec with a choice before."""
        choice = handler(self._model().__pydantic_core_schema__)
        values = handler.resolve_ref_schema(choice)["properties"]["values"]
        return {"anyOf": [values, choice]}


@functools.cache
def _choosable(inner: Any, *, ranges: bool) -> Any:
    """The union `Choosable[inner]` (or `IntChoosable[inner]`) stands for, made once per inner
    type: the sections list `IntChoosable[Count]` twelve times, and each union took ~0.1 ms of
    `tuner evaluate`'s start (issue 14); its fields then share one lazily made Choice model."""
    members: list[Any] = [
        Annotated[inner, Tag("<fixed>")], Annotated[Any, _ChoiceOf(inner), Tag("<choice>")]]
    if ranges:
        members.append(Annotated[IntRange, Tag("<range>")])
    return Annotated[
        Union[tuple(members)],  # noqa: UP007 (a runtime-built union)
        Discriminator(_tag),
        BeforeValidator(_wrap_list),
        AfterValidator(_range_bounds_checker(inner)),
    ]


if TYPE_CHECKING:
    Choosable = Union[T, Choice[T]]  # noqa: UP007
    IntChoosable = Union[T, Choice[T], IntRange]  # noqa: UP007
else:

    class Choosable:
        """`Choosable[X]`: a fixed X or a list of X (a Choice)."""

        def __class_getitem__(cls, inner: Any) -> Any:
            return _choosable(inner, ranges=False)

    class IntChoosable:
        """`IntChoosable[X]`: a fixed integer X, a list of X, or an IntRange."""

        def __class_getitem__(cls, inner: Any) -> Any:
            return _choosable(inner, ranges=True)
