"""Price of a run: USD per hour of the cluster, time and USD to train a number of tokens."""

from __future__ import annotations

import numpy as np

from .breakdown import Price
from .inputs import Array, ClusterSpec

__all__ = ["price"]


def price(cluster: ClusterSpec, *, gpus: Array, tokens_per_s: Array, tokens: float) -> Price:
    """cost/hour = GPUs x USD per GPU-hour; time = tokens / throughput; cost = hours x cost/hour."""
    per_hour = gpus * np.asarray(cluster.price_usd_per_gpu_hour, dtype=np.float64)
    time_s = np.where(tokens_per_s > 0, tokens / np.maximum(tokens_per_s, 1e-30), np.inf)
    return Price(cost_per_hour_usd=per_hour, time_to_train_s=time_s,
                 cost_to_train_usd=time_s / 3600.0 * per_hour)
