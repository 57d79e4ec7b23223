"""The analytical cost model of distributed training: pure, vectorised functions of frozen
inputs (a workload, a cluster, a training run, an array of plans) returning time, memory and
price with their breakdowns.

Holds: the workload protocol (workload) and its implementations (transformer, layers); the
plan's vocabulary (codec); the rules of valid plans (validity); the schedule, memory and price
every workload shares; the typed result of one plan (result).
May import numpy and the standard library only: nothing of Optuna, files or the command line.
"""

import importlib
from typing import TYPE_CHECKING, Any

from .breakdown import CostReport, MemoryUse, Price, StepTime
from .codec import KNOBS, PLAN_KNOBS, Offload, Placement, PlanRecord, Recompute, Shares, Sync
from .efficiency import DEFAULT_EFFICIENCY, FALLBACK_GEMM_FRACTION, Efficiency
from .errors import CostModelError
from .evaluate import evaluate, evaluate_grid
from .flops import matmul_parameters, model_flops_per_token, parameter_count
from .inputs import PRECISIONS, ClusterSpec, GPUSpec, Plan, TrainingSpec
from .precision import element_bytes
from .result import ClusterSummary, PlanResult, plan_result, step_share
from .sync import SYNC
from .transformer import ModelSpec
from .validity import (
    InvalidPlanError,
    NoValidValueError,
    allowed_values,
    check_plan,
    plan_violations,
    precision_violation,
    structurally_valid,
)
from .workload import Workload

if TYPE_CHECKING:
    from .layers import Layer, LayersModel
    from .mla import MLA
    from .moe import MoEModelSpec
    from .pools import MixedCluster, PoolUse

COST_MODEL_VERSION = "3"

__all__ = [
    "COST_MODEL_VERSION",
    "DEFAULT_EFFICIENCY",
    "FALLBACK_GEMM_FRACTION",
    "KNOBS",
    "MLA",
    "PLAN_KNOBS",
    "PRECISIONS",
    "SYNC",
    "ClusterSpec",
    "ClusterSummary",
    "CostModelError",
    "CostReport",
    "Efficiency",
    "GPUSpec",
    "InvalidPlanError",
    "Layer",
    "LayersModel",
    "MemoryUse",
    "MixedCluster",
    "MoEModelSpec",
    "ModelSpec",
    "NoValidValueError",
    "Offload",
    "Placement",
    "Plan",
    "PlanRecord",
    "PlanResult",
    "PoolUse",
    "Price",
    "Recompute",
    "Shares",
    "StepTime",
    "Sync",
    "TrainingSpec",
    "Workload",
    "allowed_values",
    "check_plan",
    "element_bytes",
    "evaluate",
    "evaluate_grid",
    "matmul_parameters",
    "model_flops_per_token",
    "parameter_count",
    "plan_result",
    "plan_violations",
    "precision_violation",
    "step_share",
    "structurally_valid",
]

_LAZY = {"Layer": "layers", "LayersModel": "layers", "MoEModelSpec": "moe", "MLA": "mla",
         "MixedCluster": "pools", "PoolUse": "pools"}
"""What a dense transformer's evaluation on GPUs of one type does not use, and its modules:
imported on first use (PEP 562), so that `tuner evaluate` of a dense model imports neither the
CNN layers, the mixture of experts (cost.moe and the modules of its time and memory) nor the
pools of several GPU types (cost.pools: the cost model tells a MixedCluster as a cluster that is
not a ClusterSpec)."""


def __getattr__(name: str) -> Any:
    """`cost.NAME` for the names of _LAZY, imported from its module the first time."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups find it without this function
    return value
