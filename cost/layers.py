"""A network given as its layers (CNNs and others), trained data-parallel in pipeline stages,
as a workload (cost.workload.Workload).

Per layer and sample: forward FLOPs, parameters, activation bytes (shared/SPEC.md `kind:
layers`). One micro-batch of the slowest stage: forward and backward (2x) on a roofline of the
GPU, the element-wise passes over the activations (batch norm, ReLU), kernel launches; fp32
weights, gradients and two Adam moments. This is the workload of CM-DARE (TensorFlow's
asynchronous parameter servers on cloud GPUs) and of the Manoa/MiMatrix cluster.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .degrees import Degrees
from .efficiency import Efficiency
from .inputs import Array, ClusterSpec, TrainingSpec
from .kernels import memory_bound_s
from .workload import Footprint, ParamGroup, Rule, StageCost, StateBytes

__all__ = ["Layer", "LayersModel", "stage_split"]

_FP32_STATE = StateBytes(weight=4.0, gradient=4.0, optimizer=8.0)
"""fp32 weights and gradients, two fp32 Adam moments (the layers model trains in fp32)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer:
    """One layer, per sample: forward FLOPs, parameters, bytes of its output activations."""

    name: str
    forward_flops: float
    params: float
    activation_bytes: float


@dataclass(frozen=True, slots=True, kw_only=True)
class LayersModel:
    """A network as a sequence of layers (per-sample figures)."""

    name: str
    layers: tuple[Layer, ...]

    kind: ClassVar[str] = "layers"
    unit: ClassVar[str] = "samples"
    knobs: ClassVar[frozenset[str]] = frozenset(
        {"tp", "pp", "dp", "cp", "virtual_stages", "micro_batch", "sync", "parameter_servers"})
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

    def memory_fix(self) -> str:
        return "lower micro_batch or raise pp"

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
        stage = _slowest_stage(self, d.pp)
        forward, backward = _compute_s(cluster, training, stage, d.mb, eff)
        zero = np.zeros(np.shape(forward))
        return StageCost(compute_s=forward + backward, recompute_s=zero, tp_comm_s=zero,
                         cp_comm_s=zero, forward_s=forward, backward_s=backward,
                         bubble_unit_s=forward + backward,
                         send_bytes=stage["boundary"] * d.mb, units=stage["layers"])

    def footprint(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                  eff: Efficiency) -> Footprint:
        """fp32 states of the stage's parameters; the activations of the micro-batches in
        flight (1F1B: up to pp) kept for the backward."""
        stage = _slowest_stage(self, d.pp)
        zero = np.zeros(d.shape)
        return Footprint(
            groups=(ParamGroup(params=stage["params"], replicas=d.dp * d.cp, stride=d.tp),),
            state=_FP32_STATE, resident_params=stage["params"],
            activations_bytes=stage["activations"] * d.mb * np.minimum(d.micro_batches, d.pp),
            buffers_bytes=zero)

    def units_per_step(self, training: TrainingSpec) -> float:
        return float(training.global_batch)

    def model_flops_per_step(self, training: TrainingSpec) -> float:
        return 3.0 * self.forward_flops * self.units_per_step(training)

    def palm_flops_per_step(self, training: TrainingSpec) -> float:
        return self.model_flops_per_step(training)

    def checkpoint_bytes(self, training: TrainingSpec) -> float:
        return self.params * (_FP32_STATE.weight + _FP32_STATE.optimizer + 4.0)


def stage_split(model: LayersModel, stages: int) -> list[tuple[int, int]]:
    """Contiguous [start, stop) layer ranges of `stages` pipeline stages, cut where the
    cumulative forward FLOPs cross k/stages of the total (balanced compute; every stage keeps
    at least one layer)."""
    flops = np.cumsum([x.forward_flops for x in model.layers])
    cuts = np.searchsorted(flops, flops[-1] * np.arange(1, stages) / stages, side="left") + 1
    cuts = np.clip(cuts, np.arange(1, stages), len(model.layers) - np.arange(stages - 1, 0, -1))
    edges = [0, *np.maximum.accumulate(cuts).tolist(), len(model.layers)]
    return list(itertools.pairwise(edges))


def _slowest_stage(model: LayersModel, pp: Array) -> dict[str, Array]:
    """Per plan, the figures of its slowest stage (by forward FLOPs) and of the largest
    activation crossing a stage boundary (per sample)."""
    out: dict[str, Array] = {k: np.zeros(np.shape(pp)) for k in
                             ("flops", "params", "activations", "layers", "boundary")}
    for stages in np.unique(pp):
        n = int(stages)
        if n < 1 or n > len(model.layers) or n != stages:
            continue
        ranges = stage_split(model, n)
        parts = [model.layers[a:b] for a, b in ranges]
        worst = max(parts, key=lambda p: sum(x.forward_flops for x in p))
        figures = {"flops": sum(x.forward_flops for x in worst),
                   "params": max(sum(x.params for x in p) for p in parts),
                   "activations": max(sum(x.activation_bytes for x in p) for p in parts),
                   "layers": len(worst),
                   "boundary": max((model.layers[b - 1].activation_bytes for _, b in ranges[:-1]),
                                   default=0.0) / 3.0}
        for k, v in figures.items():
            out[k] = np.where(pp == stages, v, out[k])
    return out


def _compute_s(cluster: ClusterSpec, training: TrainingSpec, stage: dict[str, Array],
               batch: Array, eff: Efficiency) -> tuple[Array, Array]:
    """Forward and backward seconds of one micro-batch on the slowest stage: its FLOPs at the
    GPU's GEMM fraction, discounted for small batches (b / (b + layers_batch_half)), plus
    `elementwise_passes_ffn` HBM passes over its activations and `layer_overhead_s` of kernel
    launches per layer; backward twice the forward."""
    gpu = cluster.gpu
    peak = gpu.peak_for(training.precision) * eff.gemm_fraction_for(gpu)
    rate = peak * batch / (batch + eff.layers_batch_half)
    passes = memory_bound_s(eff.elementwise_passes_ffn * stage["activations"] * batch,
                            hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s, eff=eff)
    forward = stage["flops"] * batch / rate + passes + stage["layers"] * eff.layer_overhead_s
    return forward, 2.0 * forward
