"""The analytical cost model of distributed training: pure, vectorised functions of frozen inputs.

Knows nothing of Optuna, files or the command line; needs numpy and the standard library only.
"""

from .breakdown import CostReport, MemoryUse, Price, StepTime
from .efficiency import DEFAULT_EFFICIENCY, FALLBACK_GEMM_FRACTION, Efficiency
from .errors import CostModelError
from .evaluate import evaluate
from .flops import matmul_parameters, model_flops_per_token, parameter_count
from .inputs import (
    OFFLOAD,
    PRECISIONS,
    RECOMPUTE,
    ClusterSpec,
    GPUSpec,
    ModelSpec,
    Plan,
    TrainingSpec,
)
from .layers import Layer, LayersModel, evaluate_layers
from .sync import SYNC
from .validity import plan_violations, structurally_valid

COST_MODEL_VERSION = "1"

__all__ = [
    "COST_MODEL_VERSION",
    "DEFAULT_EFFICIENCY",
    "FALLBACK_GEMM_FRACTION",
    "OFFLOAD",
    "PRECISIONS",
    "RECOMPUTE",
    "SYNC",
    "ClusterSpec",
    "CostModelError",
    "CostReport",
    "Efficiency",
    "GPUSpec",
    "Layer",
    "LayersModel",
    "MemoryUse",
    "ModelSpec",
    "Plan",
    "Price",
    "StepTime",
    "TrainingSpec",
    "evaluate",
    "evaluate_layers",
    "matmul_parameters",
    "model_flops_per_token",
    "parameter_count",
    "plan_violations",
    "structurally_valid",
]
