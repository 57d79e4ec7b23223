"""The plan's vocabulary: the one mapping between a user's plan values and the model's numbers.

A plan knob is an integer degree (tp, pp, ...), a flag (sequence_parallel) or a word from a
vocabulary (recompute, offload, sync). The vectorised model sees every knob as a float array;
`KNOBS` says how each user value becomes a number and back, and `PlanRecord` is one plan in the
user's words, typed, as every command shows and stores it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .errors import CostModelError
from .inputs import Array, Plan

__all__ = [
    "KNOBS",
    "PLAN_KNOBS",
    "Knob",
    "Offload",
    "Placement",
    "PlanRecord",
    "Recompute",
    "Shares",
    "Sync",
    "decode",
    "encode",
]


class Recompute(str, enum.Enum):
    """Activation recomputation: none, the attention core only (selective), whole layers."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class Offload(str, enum.Enum):
    """What moves into the memory-expansion tier."""

    NONE = "none"
    OPTIMIZER = "optimizer"
    OPTIMIZER_AND_WEIGHTS = "optimizer+weights"


class Sync(str, enum.Enum):
    """How data-parallel replicas reduce gradients (cost.sync); unset: the fastest collective."""

    RING = "ring"
    TREE = "tree"
    HIERARCHICAL = "hierarchical"
    DIRECT = "direct"
    PARAMETER_SERVER = "parameter_server"


class Placement(str, enum.Enum):
    """Where a plan puts its ranks on a cluster of several GPU types (cluster.pools): each
    pool holds whole replicas (data), or each replica's pipeline stages span the pools
    (pipeline)."""

    DATA = "data"
    PIPELINE = "pipeline"


class Shares(str, enum.Enum):
    """How the batch is shared among data-parallel replicas on different GPUs: so that they
    finish together (balanced), or equally."""

    BALANCED = "balanced"
    EQUAL = "equal"


AUTO_SYNC = "auto"
"""How a plan that leaves `sync` unset shows it: the fastest collective for the message."""


@dataclass(frozen=True, slots=True)
class Knob:
    """One plan knob: its default (user value), its vocabulary (for words), and the number
    that stands for "unset" where unset has a meaning (dp: fill the cluster)."""

    name: str
    default: Any
    vocabulary: type[enum.Enum] | None = None
    unset_code: float | None = None

    def encode(self, values: Iterable[Any]) -> Array:
        """User values as the model's numbers (codes for words, 0/1 for flags)."""
        return np.array([self._code(v) for v in values], dtype=np.float64)

    def _code(self, value: Any) -> float:
        if value is None or (self.vocabulary is Sync and value == AUTO_SYNC):
            if self.unset_code is None:
                raise CostModelError(f"plan.{self.name} needs a value")
            return self.unset_code
        if self.vocabulary is not None:
            members = list(self.vocabulary)
            try:
                return float(members.index(self.vocabulary(value)))
            except ValueError as err:
                words = ", ".join(str(m.value) for m in members)
                raise CostModelError(f"plan.{self.name} {value!r} is unknown; use one of "
                                     f"{words}") from err
        return float(value)

    def decode(self, number: float) -> Any:
        """The user value of a number (the inverse of encode; unset -> None)."""
        if self.vocabulary is not None:
            if number < 0:  # an unset sync: the fastest collective
                return None
            return list(self.vocabulary)[int(number)]
        if isinstance(self.default, bool):
            return bool(number)
        return round(number) if number == round(number) else number


KNOBS: tuple[Knob, ...] = (
    Knob("tp", 1), Knob("pp", 1), Knob("dp", None, unset_code=0.0), Knob("cp", 1),
    Knob("virtual_stages", 1), Knob("micro_batch", 1),
    Knob("recompute", Recompute.NONE, Recompute), Knob("sequence_parallel", False),
    Knob("zero", 0), Knob("offload", Offload.NONE, Offload),
    Knob("sync", None, Sync, unset_code=-1.0), Knob("parameter_servers", None, unset_code=1.0),
    Knob("shard_group", None, unset_code=0.0),
    Knob("ep", 1), Knob("etp", 1),
    Knob("placement", Placement.DATA, Placement), Knob("batch_shares", Shares.BALANCED, Shares),
)
"""Every plan knob, in cost.Plan's order."""
PLAN_KNOBS: tuple[str, ...] = tuple(k.name for k in KNOBS)
_BY_NAME = {k.name: k for k in KNOBS}


def encode(name: str, values: Iterable[Any]) -> Array:
    """Knob `name`'s user values as the model's numbers."""
    return _BY_NAME[name].encode(values)


def decode(name: str, number: float) -> Any:
    """Knob `name`'s user value for one of the model's numbers."""
    return _BY_NAME[name].decode(number)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRecord:
    """One plan in the user's words (shared/SPEC.md `plan`), dp resolved to a count."""

    tp: int = 1
    pp: int = 1
    dp: int = 0
    cp: int = 1
    virtual_stages: int = 1
    micro_batch: int = 1
    recompute: Recompute = Recompute.NONE
    sequence_parallel: bool = False
    zero: int = 0
    offload: Offload = Offload.NONE
    sync: Sync | None = None
    parameter_servers: int = 1
    shard_group: int = 0  # ranks sharing one ZeRO shard (hybrid sharding); 0: all dp·cp ranks
    ep: int = 1
    etp: int = 1
    placement: Placement = Placement.DATA
    batch_shares: Shares = Shares.BALANCED

    def to_plan(self) -> Plan:
        """The model's numeric plan (scalars)."""
        return Plan(**{name: float(_BY_NAME[name].encode([getattr(self, name)])[0])
                       for name in PLAN_KNOBS})

    @classmethod
    def of(cls, plan: Plan, *, gpus: float, index: Any = ()) -> PlanRecord:
        """Plan number `index` of an array of plans (dp resolved on `gpus` GPUs)."""
        arrays = plan.arrays(gpus)
        out: dict[str, Any] = {}
        for name in PLAN_KNOBS:
            value = np.asarray(arrays[name])
            number = float(value if value.ndim == 0 else value[index])
            out[name] = _BY_NAME[name].decode(number)
        return cls(**out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanRecord:
        """From `as_dict` output (or any mapping of plan fields in the user's words)."""
        given = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        if given.get("sync") == AUTO_SYNC:
            given["sync"] = None
        for name in ("recompute", "offload", "sync", "placement", "batch_shares"):
            vocabulary = _BY_NAME[name].vocabulary
            if given.get(name) is not None and vocabulary is not None:
                given[name] = vocabulary(given[name])
        return cls(**given)

    def as_dict(self) -> dict[str, Any]:
        """Builtin types: words as strings, an unset sync as "auto"."""
        out: dict[str, Any] = {}
        for name in PLAN_KNOBS:
            value = getattr(self, name)
            if name == "sync" and value is None:
                value = AUTO_SYNC
            out[name] = value.value if isinstance(value, enum.Enum) else value
        return out
