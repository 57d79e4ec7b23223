"""The cost model's entry point: one call evaluates one plan or an array of plans."""

from __future__ import annotations

import numpy as np

from .breakdown import CostReport
from .efficiency import DEFAULT_EFFICIENCY, Efficiency
from .flops import model_flops_per_token
from .inputs import ClusterSpec, ModelSpec, Plan, TrainingSpec
from .memory import hbm_usable_bytes, memory_use
from .price import price
from .resolved import resolve
from .step import step_time
from .validity import valid_mask

__all__ = ["evaluate"]


def evaluate(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, plan: Plan,
    *, efficiency: Efficiency = DEFAULT_EFFICIENCY,
) -> CostReport:
    """Step time, memory and price of every plan in `plan` (fields broadcast together).

    Structurally invalid plans are evaluated as well as the formulas allow and flagged in
    `valid`; plans over HBM or expansion capacity are flagged in `fits`."""
    r = resolve(model, cluster, training, plan)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = step_time(model, cluster, training, r, efficiency)
        memory = memory_use(model, cluster, training, r, efficiency)
        tokens_per_step = float(training.global_batch * model.seq_len)
        tokens_per_s = tokens_per_step / step.total_s
        usable = np.broadcast_to(hbm_usable_bytes(cluster, efficiency), r.tp.shape)
        expansion = np.broadcast_to(
            np.asarray(cluster.expansion_capacity_bytes, dtype=np.float64), r.tp.shape)
        fits = (memory.total_bytes <= usable) & (memory.expansion <= expansion)
        return CostReport(
            step=step, memory=memory,
            price=price(cluster, gpus=r.gpus, tokens_per_s=tokens_per_s, tokens=training.tokens),
            gpus=r.gpus, tokens_per_step=tokens_per_step,
            model_flops_per_step=model_flops_per_token(model) * tokens_per_step,
            peak_flops_per_s=cluster.gpu.peak_for(training.precision),
            hbm_usable_bytes=usable, expansion_capacity_bytes=expansion,
            valid=valid_mask(model, cluster, training, r), fits=fits,
        )
