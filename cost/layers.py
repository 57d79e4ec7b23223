"""A network given as its layers (CNNs and others), trained data-parallel in pipeline stages,
as a workload (cost.workload.Workload).

Per layer and sample: forward FLOPs, parameters, the bytes it keeps for the backward pass and
its output elements (shared/SPEC.md `kind: layers`). Each layer is a convolution (or a dense
layer) run as an implicit GEMM whose dimensions follow from those figures, followed by batch
norm and an activation; its time is the larger of what the device needs and what the host
needs to issue it (cost.layers_time). The weights, gradients and two Adam moments are fp32;
activations take the training precision (bf16 autocast keeps them in 16 bits). This is the
workload of CM-DARE (TensorFlow's asynchronous parameter servers on cloud GPUs), of the
Manoa/MiMatrix cluster, and of the H100 runs of shared/validation/gpu.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .degrees import Degrees
from .efficiency import Efficiency
from .inputs import Array, ClusterSpec, GPUSpec, TrainingSpec
from .layers_time import LayerShapes, stage_seconds
from .precision import element_bytes
from .workload import Footprint, ParamGroup, Rule, StageCost, StateBytes

if TYPE_CHECKING:
    from .layer_costs import LayerCosts

__all__ = ["Layer", "LayersModel", "compile_buffer_bytes", "stage_split"]

_FP32_STATE = StateBytes(weight=4.0, gradient=4.0, optimizer=8.0)
"""fp32 weights and gradients, two fp32 Adam moments (mixed precision keeps fp32 masters)."""
_STORED_FP32_BYTES = 8.0
"""Bytes per output element a conv + batch norm + ReLU layer keeps in fp32: the convolution's
output (batch norm's input) and the activation's output (the next layer's input)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer:
    """One layer, per sample: forward FLOPs, parameters, the bytes it keeps for the backward
    pass in fp32 (half of it in 16-bit training), and its output elements (0: derived from the
    kept bytes as a conv + batch norm + ReLU layer keeps two fp32 tensors of its output)."""

    name: str
    forward_flops: float
    params: float
    activation_bytes: float
    outputs: float = 0.0

    @property
    def output_elements(self) -> float:
        return self.outputs if self.outputs > 0 else self.activation_bytes / _STORED_FP32_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class LayersModel:
    """A network as a sequence of layers (per-sample figures)."""

    name: str
    layers: tuple[Layer, ...]

    kind: ClassVar[str] = "layers"
    unit: ClassVar[str] = "samples"
    knobs: ClassVar[frozenset[str]] = frozenset(
        {"tp", "pp", "dp", "cp", "virtual_stages", "micro_batch", "sync", "parameter_servers",
         "placement", "batch_shares"})
    asynchronous_parameter_servers: ClassVar[bool] = True

    @property
    def forward_flops(self) -> float:
        return float(sum(x.forward_flops for x in self.layers))

    @property
    def params(self) -> float:
        return float(sum(x.params for x in self.layers))

    @property
    def activation_bytes(self) -> float:
        return float(sum(x.activation_bytes for x in self.layers))

    def describe(self) -> str:
        return f"{self.name}: a layers model, data-parallel in pipeline stages"

    def rules(self, training: TrainingSpec) -> tuple[Rule, ...]:
        """Data parallelism in pipeline stages only: tp, cp and virtual_stages 1, and no more
        stages than layers."""
        count = len(self.layers)

        def parallel(d: Degrees) -> Array:
            return (d.tp != 1) | (d.cp != 1) | (d.vs != 1)

        def stages(d: Degrees) -> Array:
            return np.asarray(d.pp > count)

        return (
            Rule("layers_parallelism", ("tp", "cp", "virtual_stages"), parallel,
                 lambda d: f"a layers model ({self.name}) trains data-parallel in pipeline "
                           "stages: set tp, cp and virtual_stages to 1"),
            Rule("layers_stages", ("pp",), stages,
                 lambda d: f"pp={float(np.ravel(d.pp)[0]):g} is more than the {count} layers "
                           f"of {self.name}; choose pp from 1 to {count}"),
        )

    def stage_cost(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                   eff: Efficiency) -> StageCost:
        """One micro-batch on the slowest of the FLOP-balanced stages (cost.layers_time), and
        the step's unoverlapped host overhead shared out over its micro-batches."""
        forward, backward = _slowest_stage_s(self, cluster, training, d, eff)
        per_step = eff.step_overhead_s / np.maximum(d.micro_batches, 1.0)
        zero = np.zeros(np.shape(forward))
        figures = _stage_figures(self, d.pp)
        act = element_bytes(training.precision)["activation"]
        return StageCost(compute_s=forward + backward + per_step, recompute_s=zero,
                         tp_comm_s=zero, cp_comm_s=zero, forward_s=forward, backward_s=backward,
                         bubble_unit_s=forward + backward,
                         send_bytes=figures["boundary"] * act * d.mb,
                         units=figures["layers"])

    def footprint(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                  eff: Efficiency) -> Footprint:
        """fp32 states of the fullest stage's parameters; the activations it keeps for the
        micro-batches in flight (1F1B: up to pp), at the training precision; the framework's
        workspaces, under 16-bit autocast the 16-bit copies of the weights, and under
        torch.compile Inductor's autotuning buffer (compile_buffer_bytes)."""
        stage = _stage_figures(self, d.pp)
        act = element_bytes(training.precision)["activation"]
        copies = np.where(act < 4.0, stage["params"] * act, 0.0)
        kept = stage["activations"] * act / 4.0 * d.mb * np.minimum(d.micro_batches, d.pp)
        return Footprint(
            groups=(ParamGroup(params=stage["params"], replicas=d.dp * d.cp, stride=d.tp),),
            state=_FP32_STATE, resident_params=stage["params"],
            activations_bytes=kept,
            buffers_bytes=np.broadcast_to(
                eff.workspace_bytes + compile_buffer_bytes(cluster.gpu, eff) + copies, d.shape))

    def layer_costs(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                    eff: Efficiency) -> LayerCosts | None:
        """None: a layers model's layers differ, so its stages are split by FLOPs
        (stage_split), not into equal layers of a per-GPU speed; across pools of different
        GPUs it trains data-parallel."""
        return None

    def units_per_step(self, training: TrainingSpec) -> float:
        return float(training.global_batch)

    def model_flops_per_step(self, training: TrainingSpec) -> float:
        return 3.0 * self.forward_flops * self.units_per_step(training)

    def palm_flops_per_step(self, training: TrainingSpec) -> float:
        return self.model_flops_per_step(training)

    def checkpoint_bytes(self, training: TrainingSpec) -> float:
        return self.params * (_FP32_STATE.weight + _FP32_STATE.optimizer + 4.0)


def compile_buffer_bytes(gpu: GPUSpec, eff: Efficiency) -> float:
    """Bytes torch.compile adds to a layers model's peak (stack.kernels "compiled"; 0 else, or
    where the catalog cites no L2 for the GPU):
    the L2-sized buffer Inductor's benchmarker allocates and zeroes between timed runs while
    it autotunes a Triton kernel's configurations (InductorBenchmarker.benchmark_gpu,
    torch/_inductor/runtime/benchmarking.py: torch.empty(L2_cache_size // 4, dtype=int)).
    Inductor autotunes the backward's batch-norm reductions on their first run, when the
    saved activations are all held, so the buffer lands on the step's peak; PyTorch's
    max_memory_allocated keeps it (shared/validation/gpu/measure.py resets the peak before
    the warm-up steps). On one H100 (L2 50 MiB) the compiled CIFAR ResNet-32 peaks 44-47 MiB
    above the eager one at batch 128 and 512, in fp32 and bf16 alike. Compiled ResNet-50
    peaks 3.5-3.9% below eager instead (Inductor's partitioner recomputes element-wise
    outputs in the backward rather than saving them, which this model does not count): its
    peak is set where a transient larger than the buffer is held; with the buffer counted
    the model stays within 4.3% of it."""
    return float(gpu.l2_cache_bytes or 0.0) if eff.kernels == "compiled" else 0.0


def stage_split(model: LayersModel, stages: int) -> list[tuple[int, int]]:
    """Contiguous [start, stop) layer ranges of `stages` pipeline stages, cut where the
    cumulative forward FLOPs cross k/stages of the total (balanced compute; every stage keeps
    at least one layer)."""
    flops = np.cumsum([x.forward_flops for x in model.layers])
    cuts = np.searchsorted(flops, flops[-1] * np.arange(1, stages) / stages, side="left") + 1
    cuts = np.clip(cuts, np.arange(1, stages), len(model.layers) - np.arange(stages - 1, 0, -1))
    edges = [0, *np.maximum.accumulate(cuts).tolist(), len(model.layers)]
    return list(itertools.pairwise(edges))


def _valid_stage_counts(model: LayersModel, pp: Array) -> list[int]:
    return [int(s) for s in np.unique(pp) if s == int(s) and 1 <= s <= len(model.layers)]


def _stage_figures(model: LayersModel, pp: Array) -> dict[str, Array]:
    """Per plan, the parameters and kept bytes (fp32, per sample) of its fullest stage, the
    largest output crossing a stage boundary (elements per sample) and the most layers a
    stage holds."""
    out: dict[str, Array] = {k: np.zeros(np.shape(pp)) for k in
                             ("params", "activations", "boundary", "layers")}
    for n in _valid_stage_counts(model, pp):
        ranges = stage_split(model, n)
        parts = [model.layers[a:b] for a, b in ranges]
        figures = {"params": max(sum(x.params for x in p) for p in parts),
                   "activations": max(sum(x.activation_bytes for x in p) for p in parts),
                   "boundary": max((model.layers[b - 1].output_elements
                                    for _, b in ranges[:-1]), default=0.0),
                   "layers": max(b - a for a, b in ranges)}
        for k, v in figures.items():
            out[k] = np.where(pp == n, v, out[k])
    return out


def _slowest_stage_s(model: LayersModel, cluster: ClusterSpec, training: TrainingSpec,
                     d: Degrees, eff: Efficiency) -> tuple[Array, Array]:
    """Forward and backward seconds of one micro-batch on the slowest stage of each plan."""
    shapes = LayerShapes.of(model.layers)
    forward = np.zeros(d.shape)
    backward = np.zeros(d.shape)
    for n in _valid_stage_counts(model, d.pp):
        here = d.pp == n
        slowest_f = np.zeros(d.shape)
        slowest_b = np.zeros(d.shape)
        for a, b in stage_split(model, n):
            f, bw = stage_seconds(shapes, a, b, gpu=cluster.gpu, precision=training.precision,
                                  batch=d.mb, eff=eff)
            slower = f + bw > slowest_f + slowest_b
            slowest_f = np.where(slower, f, slowest_f)
            slowest_b = np.where(slower, bw, slowest_b)
        forward = np.where(here, slowest_f, forward)
        backward = np.where(here, slowest_b, backward)
    return forward, backward
