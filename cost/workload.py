"""The workload protocol: what the step-time, memory and price code asks of a model.

A workload (a decoder-only transformer, a network given by its layers, ...) says what one
micro-batch costs on the slowest pipeline stage (StageCost), what one GPU holds (Footprint),
which plan knobs apply to it and which structural rules it adds (Rule). The pipeline schedule,
the data-parallel reduction, ZeRO, offload, the optimizer, feasibility and price are the same
for every workload (cost.schedule, cost.memory, cost.evaluate): adding a workload kind means
adding one module that implements `Workload`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .degrees import Degrees
from .efficiency import Efficiency
from .inputs import Array, ClusterSpec, TrainingSpec

if TYPE_CHECKING:
    from .layer_costs import LayerCosts

__all__ = ["Footprint", "ParamGroup", "Rule", "StageCost", "StateBytes", "Workload"]


@dataclass(frozen=True, eq=False, slots=True, kw_only=True)
class ParamGroup:
    """Parameters one GPU holds that share one data-parallel replica group: `replicas` ranks
    spaced `stride` apart (Megatron rank order) hold copies and reduce their gradients; ZeRO
    shards their state over groups of `shard` neighbouring replicas (hybrid sharding, HSDP:
    replicated across replicas / shard groups), all of them by default."""

    params: Array
    replicas: Array
    stride: Array
    shard: Array | None = None  # ranks of one ZeRO shard among the replicas; None: all

    @property
    def shard_ranks(self) -> Array:
        """Ranks one ZeRO shard spans (the replicas, unless sharding is hybrid)."""
        return self.replicas if self.shard is None else self.shard


@dataclass(frozen=True, slots=True, kw_only=True)
class StateBytes:
    """Bytes per parameter of the model states: weights, gradients, optimizer state."""

    weight: float
    gradient: float
    optimizer: float


@dataclass(frozen=True, eq=False, slots=True, kw_only=True)
class StageCost:
    """One micro-batch on the slowest pipeline stage, seconds by part (exposed time), and what
    the pipeline schedule and the data-parallel reduction need to know of it."""

    compute_s: Array  # forward and backward, the stage's end work (embedding, loss) included
    recompute_s: Array  # forward work redone in the backward pass
    tp_comm_s: Array  # exposed tensor-parallel collectives
    cp_comm_s: Array  # exposed context-parallel exchange
    forward_s: Array  # the forward pass that data-parallel weight gathers hide behind
    backward_s: Array  # the backward pass that gradient reductions hide behind
    bubble_unit_s: Array  # the time per micro-batch that sizes the pipeline bubble
    send_bytes: Array  # what one pipeline send between stages carries
    units: Array | float = 1.0  # layers of the stage: ZeRO-3 gathers and scatters each apart
    host_s: Array | float = 0.0  # host time to launch the micro-batch's kernels
    ep_comm_s: Array | float = 0.0  # exposed expert-parallel all-to-alls (mixture of experts)
    host_wait_s: Array | float = 0.0  # the GPU idle after host synchronisations (dropless MoE)
    # of the exposed tp/cp/ep time, the part whose groups stay inside a scale-up domain (the
    # NICs idle meanwhile: a window for data-parallel traffic that crosses them,
    # cost.schedule), in the forward pass and in the backward pass with its recompute
    scale_up_forward_s: Array | float = 0.0
    scale_up_backward_s: Array | float = 0.0


@dataclass(frozen=True, eq=False, slots=True, kw_only=True)
class Footprint:
    """What one GPU of the fullest stage holds: its parameters by replica group, the bytes per
    parameter of their states, the parameters kept in HBM when weights are offloaded (two
    layers'), and the activations and transient buffers of the schedule (bytes).
    `gathered_params`: of those two layers, the parameters ZeRO-3 gathers, those of groups
    sharded over more than one rank (cost.memory.gathered_bytes); None: all of
    `resident_params` where some group is, none where none is (a footprint of one group)."""

    groups: tuple[ParamGroup, ...]
    state: StateBytes
    resident_params: Array
    activations_bytes: Array
    buffers_bytes: Array
    gathered_params: Array | None = None


@dataclass(frozen=True, eq=False, slots=True)
class Rule:
    """A structural rule: `broken` is True where a plan breaks it (any shape of Degrees);
    `message` says, for one plan, the value, the rule and what to change. `knobs` are the plan
    knobs the rule reads ("gpus" for the cluster's size), so that the values a search space
    offers can be derived from it (cost.validity.allowed_values)."""

    name: str
    knobs: tuple[str, ...]
    broken: Callable[[Degrees], Array]
    message: Callable[[Degrees], str]


@runtime_checkable
class Workload(Protocol):
    """What the cost model asks of a model; see the module's docstring."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str:
        """"transformer", "layers", ...: the `workload` of a result."""
        ...

    @property
    def unit(self) -> str:
        """What a step trains: "tokens" or "samples"."""
        ...

    @property
    def knobs(self) -> frozenset[str]:
        """The plan knobs that apply; the others must keep their defaults."""
        ...

    @property
    def asynchronous_parameter_servers(self) -> bool:
        """True where `sync: parameter_server` runs asynchronously (TensorFlow's)."""
        ...

    def describe(self) -> str:
        """The figures a plan must fit, for messages: 'heads=96, layers=96, seq_len=2048'."""
        ...

    def rules(self, training: TrainingSpec) -> tuple[Rule, ...]:
        """The structural rules of this workload beyond the common ones (cost.validity)."""
        ...

    def stage_cost(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                   eff: Efficiency) -> StageCost: ...

    def footprint(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                  eff: Efficiency) -> Footprint: ...

    def layer_costs(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                    eff: Efficiency) -> LayerCosts | None:
        """One identical layer's time and memory and the pipeline ends', for an uneven split
        of the layers over stages on different GPUs (cost.hetero_pipeline); None where the
        layers are not alike (the workload then trains data-parallel across GPU types)."""
        ...

    def units_per_step(self, training: TrainingSpec) -> float:
        """Tokens (or samples) trained per optimizer step."""
        ...

    def model_flops_per_step(self, training: TrainingSpec) -> float:
        """Model FLOPs of one step (forward and backward, no recompute), attention as
        computed (causal: half the scores)."""
        ...

    def palm_flops_per_step(self, training: TrainingSpec) -> float:
        """The same in PaLM's convention (all scores counted), for `mfu_palm`."""
        ...

    def checkpoint_bytes(self, training: TrainingSpec) -> float:
        """Bytes of a full checkpoint (weights and optimizer state)."""
        ...
