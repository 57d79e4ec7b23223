"""Price of a run: USD per hour of the cluster, time and USD to train a number of tokens, and
the expected cost of revocations on transient (spot) servers with optimal checkpointing."""

from __future__ import annotations

import numpy as np

from .breakdown import Price
from .inputs import Array, ClusterSpec, Value

__all__ = ["checkpoint_interval_s", "price", "revocation_overhead"]


def checkpoint_interval_s(checkpoint_s: Value, mtbf_s: Value) -> Value:
    """Young's optimal interval between checkpoints, sqrt(2 C M) (Young, CACM 1974), for a
    checkpoint taking C seconds and a mean time between revocations of M seconds."""
    return np.sqrt(2.0 * checkpoint_s * mtbf_s)


def revocation_overhead(checkpoint_s: Value, restart_s: Value, revocations_per_s: Value) -> Value:
    """Expected extra wall time per second of useful work under revocations at rate 1/M:
    writing checkpoints every tau (C / tau), and per revocation half an interval of lost work
    and a restart (tau / 2 + R) / M; at tau = sqrt(2 C M) this is sqrt(2 C / M) + R / M
    (first order, Daly, FGCS 2006, eq. 10). Zero without revocations. Valid while C << M."""
    rate = np.asarray(revocations_per_s, dtype=np.float64)
    return np.sqrt(2.0 * checkpoint_s * rate) + restart_s * rate


def price(cluster: ClusterSpec, *, gpus: Array, tokens_per_s: Array, tokens: float,
          checkpoint_bytes: float) -> Price:
    """cost/hour = GPUs x USD per GPU-hour; time = tokens / throughput, stretched on spot
    servers by the expected revocation overhead (revocations_per_node_hour x nodes; a
    checkpoint of `checkpoint_bytes` written by all nodes in parallel); cost = hours x
    cost/hour. Without `tokens` (0) both are NaN, as is the checkpoint interval where no
    revocation sets it."""
    per_hour = gpus * np.asarray(cluster.price_usd_per_gpu_hour, dtype=np.float64)
    useful_s = np.where(tokens_per_s > 0, tokens / np.maximum(tokens_per_s, 1e-30), np.inf)
    if tokens <= 0:  # no tokens given: no time or cost to train (NaN; null in JSON), not 0
        useful_s = np.full(np.shape(useful_s), np.nan)
    nodes = np.asarray(cluster.nodes, dtype=np.float64)
    revocations = cluster.revocations_per_node_hour if cluster.pricing == "spot" else 0.0
    rate_per_s = np.asarray(revocations, dtype=np.float64) * nodes / 3600.0
    write_s = checkpoint_bytes / (nodes * np.asarray(cluster.checkpoint_bandwidth_bytes_per_s))
    restart_s = np.asarray(cluster.restart_s, dtype=np.float64)
    overhead = revocation_overhead(write_s, restart_s, rate_per_s)
    time_s = useful_s * (1.0 + overhead)
    return Price(cost_per_hour_usd=per_hour, time_to_train_s=time_s,
                 cost_to_train_usd=time_s / 3600.0 * per_hour,
                 revocation_overhead=np.broadcast_to(overhead, np.shape(time_s)),
                 checkpoint_interval_s=np.where(  # without revocations: once, at the end
                     rate_per_s > 0,
                     checkpoint_interval_s(write_s, 1.0 / np.maximum(rate_per_s, 1e-300)),
                     useful_s))
