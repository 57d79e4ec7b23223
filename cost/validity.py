"""Structural validity of a plan: what Megatron-style parallelism can run at all.

One place for these rules, used by the search space to derive valid choices, by the model to
refuse, and by the tuner to prune (shared/STYLE.md, sec. 7).
"""

from __future__ import annotations

import numpy as np

from .inputs import Array, ClusterSpec, ModelSpec, Plan, TrainingSpec, Value
from .layers import LayersModel, layers_violations
from .resolved import Resolved, embedding_and_loss_split, resolve

__all__ = ["plan_violations", "structurally_valid", "valid_mask", "violation_masks"]


def _divides(d: Value, n: Value) -> Array:
    return np.isclose(np.mod(n, np.maximum(d, 1.0)), 0.0)


def _integral(x: Value) -> Array:
    return np.isclose(x, np.round(x))


def violation_masks(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, r: Resolved
) -> dict[str, Array]:
    """Rule name -> True where a plan breaks it."""
    degrees = (r.tp, r.pp, r.dp, r.cp, r.vs, r.mb)
    # root causes first: a derived dp that is not whole follows from them
    return {
        "tp_heads": ~(_divides(r.tp, model.heads) & _divides(r.tp, model.kv_heads)),
        "layers": ~(_divides(r.pp * r.vs, model.layers)
                    | (embedding_and_loss_split(model.layers, r.pp, r.vs) > 0)),
        "cp_seq": ~_divides(r.cp, model.seq_len),
        "model_parallel": ~_divides(r.tp * r.pp * r.cp, r.gpus),
        "gpus": ~np.isclose(r.tp * r.pp * r.dp * r.cp, r.gpus),
        "degrees": ~np.logical_and.reduce([(x >= 1) & _integral(x) for x in degrees]),
        "batch": ~_divides(r.dp * r.mb, training.global_batch),
        "interleave": (r.vs > 1) & ((r.pp < 2) | ~_divides(r.pp, r.micro_batches)),
        "choices": ~(np.isin(r.recompute, (0, 1, 2)) & np.isin(r.zero, (0, 1, 2, 3))
                     & np.isin(r.offload, (0, 1, 2)) & np.isin(r.sync, (-1, 0, 1, 2, 3, 4))
                     & (r.parameter_servers >= 1) & _integral(r.parameter_servers)),
        "precision": np.full(r.tp.shape, cluster.gpu.peak_for(training.precision) <= 0),
    }


def valid_mask(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, r: Resolved
) -> Array:
    """True where a plan breaks no structural rule."""
    masks = violation_masks(model, cluster, training, r)
    return ~np.logical_or.reduce(list(masks.values()))


def structurally_valid(
    model: ModelSpec | LayersModel, cluster: ClusterSpec, training: TrainingSpec, plan: Plan
) -> Array:
    """True where a plan (any field an array) breaks no structural rule."""
    if isinstance(model, LayersModel):
        return ~layers_violations(plan.arrays(cluster.gpus), training, model)
    return valid_mask(model, cluster, training, resolve(model, cluster, training, plan))


def plan_violations(
    model: ModelSpec | LayersModel, cluster: ClusterSpec, training: TrainingSpec, plan: Plan
) -> list[str]:
    """What is structurally wrong with one plan, each message with the value, rule and fix."""
    if isinstance(model, LayersModel):
        if bool(np.ravel(structurally_valid(model, cluster, training, plan))[0]):
            return []
        return [f"a layers model ({model.name}) trains data-parallel in pipeline stages: tp, "
                f"cp and virtual_stages must be 1, pp at most its {len(model.layers)} layers, "
                "dp·pp the GPUs of the cluster, and dp·micro_batch must divide "
                f"global_batch={training.global_batch}"]
    r = resolve(model, cluster, training, plan)
    masks = violation_masks(model, cluster, training, r)
    v = {name: float(np.ravel(getattr(r, name))[0]) for name in
         ("tp", "pp", "dp", "cp", "vs", "mb", "gpus", "micro_batches")}
    gpu, precision = cluster.gpu, training.precision
    text = {
        "degrees": "tp, pp, dp, cp, virtual_stages and micro_batch must be whole numbers >= 1 "
                   f"(got tp={v['tp']:g} pp={v['pp']:g} dp={v['dp']:g} cp={v['cp']:g} "
                   f"virtual_stages={v['vs']:g} micro_batch={v['mb']:g}); change the plan",
        "tp_heads": f"tp={v['tp']:g} does not divide heads={model.heads} and "
                    f"kv_heads={model.kv_heads}; choose one of "
                    f"{_divisors_of_both(model.heads, model.kv_heads)}",
        "model_parallel": f"tp·pp·cp = {v['tp'] * v['pp'] * v['cp']:g} does not divide the "
                          f"{v['gpus']:g} GPUs; choose tp, pp and cp whose product divides it",
        "gpus": f"tp·pp·dp·cp = {v['tp'] * v['pp'] * v['dp'] * v['cp']:g} is not the "
                f"{v['gpus']:g} GPUs of the cluster; change dp or leave it out to fill the cluster",
        "layers": f"pp·virtual_stages = {v['pp'] * v['vs']:g} divides neither "
                  f"layers={model.layers} nor layers + 2 (embedding and loss counted as "
                  f"layers); choose pp from {_stage_counts(model.layers)}",
        "batch": f"dp·micro_batch = {v['dp'] * v['mb']:g} does not divide "
                 f"global_batch={training.global_batch}; change micro_batch or dp",
        "cp_seq": f"cp={v['cp']:g} does not divide seq_len={model.seq_len}; choose a divisor",
        "interleave": f"virtual_stages={v['vs']:g} needs pp >= 2 and micro-batches "
                      f"({v['micro_batches']:g}) divisible by pp={v['pp']:g}; "
                      "set virtual_stages: 1 or change micro_batch",
        "choices": "recompute must be none|selective|full, zero 0-3, offload "
                   "none|optimizer|optimizer+weights, sync ring|tree|hierarchical|direct|"
                   "parameter_server, parameter_servers a whole number >= 1",
        "precision": f"GPU {gpu.name} has no {precision} support; choose precision from "
                     f"{sorted(k for k, x in gpu.peak_flops_per_s.items() if x > 0)}",
    }
    return [text[name] for name, mask in masks.items() if bool(np.ravel(mask)[0])]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _stage_counts(layers: int) -> list[int]:
    return sorted(set(_divisors(layers))
                  | {d for d in _divisors(layers + 2) if 1 < d <= (layers + 2) // 2})


def _divisors_of_both(a: int, b: int) -> list[int]:
    return [d for d in _divisors(a) if b % d == 0]
