"""Spec sections that hold no choices: model, training, objective, constraints, search."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from cost import Efficiency, Layer, LayersModel, ModelSpec, TrainingSpec

from .catalog import model_catalog, unknown_name_message
from .errors import SpecError
from .fields import Bytes, Count, Frozen, Seconds, Size, TokenCount, Usd
from .networks import network_catalog

__all__ = [
    "OBJECTIVES",
    "Constraints",
    "LayersSection",
    "ModelSection",
    "Objective",
    "SearchSection",
    "StackSection",
    "TrainingSection",
    "resolve_model",
]

OBJECTIVES = ("throughput", "time_to_train", "cost")
ObjectiveName = Literal["throughput", "time_to_train", "cost"]


class ModelSection(Frozen):
    """A decoder-only transformer (shared/SPEC.md `model`)."""

    name: str = "custom"
    kind: str = "transformer"
    layers: Size
    hidden: Size
    heads: Size
    kv_heads: Size | None = None
    ffn_hidden: Size | None = None
    vocab: Size
    seq_len: Size
    gated_mlp: bool = Field(default=False, strict=True)
    tied_embeddings: bool = Field(default=False, strict=True)

    @field_validator("kind")
    @classmethod
    def _transformer_only(cls, kind: str) -> str:
        if kind != "transformer":
            raise ValueError(f"kind {kind!r} is unknown: use `kind: layers` with a list of "
                             "{name, forward_flops, params, activation_bytes}, or leave kind "
                             "out for a decoder-only transformer")
        return kind

    @model_validator(mode="after")
    def _shape(self) -> ModelSection:
        if self.hidden % self.heads:
            raise SpecError(f"hidden={self.hidden} is not a multiple of heads={self.heads}; "
                            "change one of them", field="heads")
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise SpecError(f"kv_heads={self.kv_heads} does not divide heads={self.heads}; "
                            "choose a divisor", field="kv_heads")
        return self

    def to_model_spec(self) -> ModelSpec:
        values = self.model_dump(exclude={"kind"})
        values["kv_heads"] = self.kv_heads or 0
        values["ffn_hidden"] = self.ffn_hidden or 0
        return ModelSpec(**values)


class LayerEntry(Frozen):
    """One layer of a layers model, per sample: FLOPs, parameters, the bytes it keeps for the
    backward pass in fp32, and (optionally) its output elements."""

    name: str
    forward_flops: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    params: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    activation_bytes: Bytes
    outputs: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0


class LayersSection(Frozen):
    """A network given by its layers (shared/SPEC.md `kind: layers`), trained data-parallel."""

    name: str = "custom"
    kind: Literal["layers"]
    layers: Annotated[tuple[LayerEntry, ...], Field(min_length=1, max_length=100_000)]

    def to_model_spec(self) -> LayersModel:
        return LayersModel(name=self.name, layers=tuple(
            Layer(name=x.name, forward_flops=x.forward_flops, params=x.params,
                  activation_bytes=x.activation_bytes, outputs=x.outputs)
            for x in self.layers))


def _known_names() -> dict[str, Any]:
    return {**model_catalog(), **network_catalog()}


def resolve_model(value: Any) -> Any:
    """A catalog name or `{base: NAME, ...overrides}` as the mapping of a ModelSection (or of
    a LayersSection for the built-in networks)."""
    catalog = model_catalog()
    if isinstance(value, str):
        networks = network_catalog()
        if value in networks:
            return {"kind": "layers", **dataclasses.asdict(networks[value])}
        if value not in catalog:
            raise ValueError(unknown_name_message("model", value, _known_names()))
        return dataclasses.asdict(catalog[value])
    if isinstance(value, dict) and "base" in value:
        base = value["base"]
        if base not in catalog:
            raise SpecError(unknown_name_message("model", base, catalog), field="base")
        overrides = {k: v for k, v in value.items() if k != "base"}
        return {**dataclasses.asdict(catalog[base]), **overrides}
    return value


class TrainingSection(Frozen):
    """What is trained: batch (sequences per step), tokens, number format, optimizer."""

    global_batch: Size
    tokens: TokenCount = 0.0
    precision: Literal["bf16", "fp16", "fp8", "fp32"] = "bf16"
    optimizer: Literal["adam", "adamw"] = "adam"

    def to_training_spec(self) -> TrainingSpec:
        return TrainingSpec(global_batch=self.global_batch, precision=self.precision,
                            tokens=self.tokens, optimizer=self.optimizer)


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


Objective = Annotated[
    tuple[ObjectiveName, ...], BeforeValidator(_as_list), Field(min_length=1, max_length=2)
]


class Constraints(Frozen):
    """Limits a plan must meet besides memory: USD to train, days, GPUs, USD per hour."""

    max_cost: Usd | None = None
    max_days: Annotated[float, Field(gt=0)] | None = None
    max_gpus: Count | None = None
    max_hourly_cost: Usd | None = None


class SearchSection(Frozen):
    """How to search: sampler, trial count, seed, time limit (seconds)."""

    sampler: Literal["tpe", "nsga2", "gp", "random", "exhaustive"] = "tpe"
    trials: Annotated[int, Field(strict=True, ge=1, le=10**7)] = 100
    seed: Annotated[int, Field(strict=True, ge=0)] | None = None
    timeout: Seconds | None = None


Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class StackSection(Frozen):
    """The training software's features, which a calibration profile (fitted hardware
    efficiency) does not decide: left out, the profile's value (a current stack) stands.

    - flash_attention: fused attention (FlashAttention, cuDNN); false for stacks before 2022
      (Megatron-LM until 2023), whose softmax streams the s x s scores through HBM and keeps
      them for the backward pass;
    - dp_overlap: share of the backward (forward) pass that hides data-parallel gradient
      reductions (weight gathers); 0 for a stack that reduces after the backward pass;
    - tp_overlap: share of tensor-parallel traffic hidden behind GEMMs (Transformer Engine's
      userbuffers overlap); 0 without it."""

    flash_attention: bool | None = Field(default=None, strict=True)
    dp_overlap: Fraction | None = None
    tp_overlap: Fraction | None = None

    def apply(self, efficiency: Efficiency) -> Efficiency:
        """`efficiency` with the fields this stack names."""
        given = {k: v for k, v in self if v is not None}
        return efficiency.with_(**given) if given else efficiency
