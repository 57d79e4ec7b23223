"""A network given as its layers (CNNs and others), trained data-parallel.

Per layer and sample: forward FLOPs, parameters, activation bytes (shared/SPEC.md `kind:
layers`). A step of one worker: forward and backward (2x) of its per-GPU batch on a roofline
of the GPU, the element-wise passes over the activations (batch norm, ReLU), the gradient
synchronisation of the plan's `sync` algorithm (cost.sync), and the optimizer. This is the
workload of CM-DARE (TensorFlow parameter servers on cloud GPUs) and the Manoa/MiMatrix cluster.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .breakdown import CostReport, MemoryUse, StepTime
from .collectives import group_link, p2p_s
from .efficiency import DEFAULT_EFFICIENCY, Efficiency
from .inputs import Array, ClusterSpec, Plan, TrainingSpec
from .kernels import memory_bound_s
from .price import price
from .sync import gradient_sync_s

__all__ = ["Layer", "LayersModel", "evaluate_layers", "layers_violations", "stage_split"]


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

    @property
    def forward_flops(self) -> float:
        return float(sum(x.forward_flops for x in self.layers))

    @property
    def params(self) -> float:
        return float(sum(x.params for x in self.layers))

    @property
    def activation_bytes(self) -> float:
        return float(sum(x.activation_bytes for x in self.layers))


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


def layers_violations(plan_arrays: dict[str, Array], training: TrainingSpec,
                      model: LayersModel) -> Array:
    """True where a plan of a layers model is invalid: data parallelism with pipeline stages
    only (tp = cp = 1, 1 <= pp <= layers), dp·pp fills the cluster, micro-batches divide the
    batch."""
    a = plan_arrays
    per_step = a["dp"] * a["micro_batch"]
    whole = np.isclose(np.mod(training.global_batch, np.maximum(per_step, 1.0)), 0.0)
    return ((a["tp"] != 1) | (a["cp"] != 1) | (a["pp"] < 1) | (a["pp"] > len(model.layers))
            | (a["pp"] != np.round(a["pp"])) | (a["virtual_stages"] != 1) | ~whole
            | ~np.isclose(a["dp"] * a["pp"], a["gpus"]) | (a["micro_batch"] < 1))


def evaluate_layers(
    model: LayersModel, cluster: ClusterSpec, training: TrainingSpec, plan: Plan,
    *, efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> CostReport:
    """Data-parallel training of a layers model, optionally in pipeline stages (1F1B): `dp`
    replicas of `pp` stages, `micro_batch` samples per micro-batch, global_batch / (dp x
    micro_batch) micro-batches per step."""
    eff = efficiency
    a = plan.arrays(cluster.gpus)
    m = training.global_batch / (a["dp"] * a["micro_batch"])
    stage = _slowest_stage(model, a["pp"])
    forward, backward = _compute_s(cluster, training, stage, a["micro_batch"], eff)
    grads = stage["params"] * 4.0
    sync = gradient_sync_s(grads, n=a["dp"], stride=1.0, cluster=cluster,
                           sync=a["sync"], servers=a["parameter_servers"], eff=eff)
    covered = np.minimum(sync, eff.dp_overlap * backward)
    collective = sync - covered + eff.overlap_slowdown * covered
    ps = _async_parameter_server_s(grads, a, cluster, eff, compute_s=m * (forward + backward))
    link = group_link(cluster, stride=a["dp"], size=a["pp"], fraction=eff.network_fraction)
    send = p2p_s(stage["boundary"] * a["micro_batch"], link.bandwidth_bytes_per_s,
                 link.latency_s)
    zero = np.zeros(np.shape(sync))
    step = StepTime(
        compute=m * (forward + backward), recompute=zero, tp_comm=zero, cp_comm=zero,
        pp_comm=np.where(a["pp"] > 1, 2.0 * (m + a["pp"] - 1.0) * send, 0.0),
        pp_bubble=(a["pp"] - 1.0) * (forward + backward),
        dp_comm=np.where(a["sync"] == 4, ps, collective),
        optimizer=memory_bound_s(stage["params"] * eff.optimizer_bytes_per_param,
                                 hbm_bytes_per_s=cluster.gpu.hbm_bandwidth_bytes_per_s,
                                 eff=eff) + zero,
        offload=zero)
    # fp32 weights, gradients and two optimizer moments; the activations of the micro-batches
    # in flight (1F1B: up to pp) kept for the backward
    memory = MemoryUse(weights=stage["params"] * 4.0, gradients=stage["params"] * 4.0,
                       optimizer=stage["params"] * 8.0,
                       activations=stage["activations"] * a["micro_batch"]
                       * np.minimum(m, a["pp"]),
                       buffers=zero, expansion=zero)
    return _report(model, cluster, training, step, memory, a, eff)


def _async_parameter_server_s(nbytes: Array, a: dict[str, Array], cluster: ClusterSpec,
                              eff: Efficiency, *, compute_s: Array) -> Array:
    """Asynchronous parameter servers (TensorFlow, as CM-DARE ran them): a worker's step adds
    its own push and pull (2M over its link); the s servers serve n workers' 2M each, and
    while they do, the other workers compute, so the servers bound the step only beyond it:
    max(2M/bw_w + 2 lat, 2nM/(s bw_s) - compute)."""
    fraction = eff.network_fraction
    worker_bw = np.asarray(cluster.scale_out_bandwidth_bytes_per_s, dtype=np.float64) * fraction
    server_bw = np.asarray(cluster.parameter_server_bandwidth_bytes_per_s, dtype=np.float64)
    server_bw = np.where(server_bw > 0, server_bw * fraction, worker_bw)
    own = 2.0 * nbytes / worker_bw + 2.0 * np.asarray(cluster.scale_out_latency_s)
    servers = 2.0 * a["dp"] * nbytes / (np.maximum(a["parameter_servers"], 1.0) * server_bw)
    return np.maximum(own, servers - compute_s)


def _report(model: LayersModel, cluster: ClusterSpec, training: TrainingSpec, step: StepTime,
            memory: MemoryUse, a: dict[str, Array], eff: Efficiency) -> CostReport:
    samples = float(training.global_batch)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_s = samples / step.total_s
        usable = (cluster.gpu.hbm_capacity_bytes - eff.reserved_bytes) * eff.usable_fraction
        shape = np.shape(step.total_s)
        return CostReport(
            step=step, memory=memory,
            price=price(cluster, gpus=a["gpus"], tokens_per_s=per_s, tokens=training.tokens,
                        checkpoint_bytes=model.params * 16.0),
            gpus=a["gpus"], tokens_per_step=samples,
            model_flops_per_step=3.0 * model.forward_flops * samples,
            peak_flops_per_s=cluster.gpu.peak_for(training.precision),
            hbm_usable_bytes=np.broadcast_to(usable, shape),
            expansion_capacity_bytes=np.broadcast_to(
                np.asarray(cluster.expansion_capacity_bytes, dtype=np.float64), shape),
            valid=~layers_violations(a, training, model),
            fits=memory.total_bytes <= usable,
        )
