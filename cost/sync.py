"""Gradient synchronisation across data-parallel replicas: the algorithms a plan may choose.

Each returns the seconds to leave every replica with the sum of an `nbytes` gradient buffer.
Costs are latency-bandwidth (alpha-beta) models: Thakur et al. (IJHPCA 2005) for ring and
tree; hierarchical as in Horovod and NCCL's intra/inter-node split (Sergeev & Del Balso 2018);
direct as the one-shot RDMA all-reduce of the Manoa/MiMatrix cluster (GDRAA: every worker
writes its shard's contributions straight into its peers' memory, two synchronisations per
iteration); parameter servers as in TensorFlow (Li et al., OSDI 2014; CM-DARE, Li et al. 2020),
where each of s servers holds 1/s of the model and every worker pushes and pulls all of it.
"""

from __future__ import annotations

import numpy as np

from .codec import Sync
from .collectives import group_link, ring_allreduce_s, tree_allreduce_s
from .degrees import Degrees
from .efficiency import Efficiency
from .inputs import Array, ClusterSpec, Value

__all__ = [
    "SYNC",
    "asynchronous_parameter_server_s",
    "direct_allreduce_s",
    "gradient_sync_s",
    "hierarchical_allreduce_s",
    "parameter_server_s",
]

SYNC = tuple(s.value for s in Sync)
"""Codes 0-4 in Plan.sync (cost.codec.Sync); -1 picks the fastest collective (ring, tree,
hierarchical)."""


def hierarchical_allreduce_s(nbytes: Value, n: Value, per_node: Value, *, up_bw: Value,
                             out_bw: Value, up_lat: Value, out_lat: Value) -> Value:
    """Reduce-scatter inside each node (k ranks), all-reduce of 1/k of the buffer across the
    n/k nodes (each rank on its own NIC), all-gather inside: 2(k-1)/k·M/up +
    2(n/k-1)/(n/k)·(M/k)/out, with 2(k-1) and 2(n/k-1) latency steps."""
    k = np.clip(per_node, 1.0, n)
    nodes = n / k
    inside = 2.0 * (k - 1.0) / k * nbytes / up_bw + 2.0 * (k - 1.0) * up_lat
    across = np.where(nodes > 1, 2.0 * (nodes - 1.0) / nodes * (nbytes / k) / out_bw
                      + 2.0 * (nodes - 1.0) * out_lat, 0.0)
    return np.where(n > 1, inside + across, 0.0)


def direct_allreduce_s(nbytes: Value, n: Value, bw: Value, lat: Value,
                       message_s: Value = 0.0) -> Value:
    """One-shot reduce-scatter and all-gather by direct remote writes: the ring's bandwidth
    term, 2(n-1)/n·M/bw, and two synchronisations instead of 2(n-1) latency steps, but each
    rank posts 2(n-1) writes of `message_s` each: fast on a few nodes, not on thousands."""
    return np.where(n > 1, 2.0 * (n - 1.0) / n * nbytes / bw + 2.0 * lat
                    + 2.0 * (n - 1.0) * message_s, 0.0)


def parameter_server_s(nbytes: Value, n: Value, servers: Value, *, worker_bw: Value,
                       server_bw: Value, lat: Value, message_s: Value = 0.0) -> Value:
    """Every worker pushes its gradients and pulls the weights (2M over its link); each of the
    s servers receives and sends n·M/s over its own link and handles 2n/s messages:
    max(2M/bw_w, 2nM/(s·bw_s) + 2n/s·message_s) + 2 latencies. One server caps the
    throughput of many fast workers; more servers lift it."""
    s = np.maximum(servers, 1.0)
    served = 2.0 * n * nbytes / (s * server_bw) + 2.0 * n / s * message_s
    return np.maximum(2.0 * nbytes / worker_bw, served) + 2.0 * lat


def gradient_sync_s(nbytes: Value, *, n: Value, stride: Value, cluster: ClusterSpec,
                    sync: Value, servers: Value, eff: Efficiency) -> Array:
    """Seconds to all-reduce `nbytes` over a group of n ranks spaced `stride` apart with the
    plan's algorithm (`sync` code into SYNC, -1 for the fastest collective)."""
    link = group_link(cluster, stride=stride, size=n, fraction=eff.network_fraction)
    bw, lat = link.bandwidth_bytes_per_s, link.latency_s
    fraction = eff.network_fraction
    up = np.asarray(cluster.scale_up_bandwidth_bytes_per_s, dtype=np.float64) * fraction
    out = np.asarray(cluster.scale_out_bandwidth_bytes_per_s, dtype=np.float64) * fraction
    per_node = np.asarray(cluster.gpus_per_node, dtype=np.float64) / stride
    ps_bw = np.asarray(cluster.parameter_server_bandwidth_bytes_per_s, dtype=np.float64)
    ps_bw = np.where(ps_bw > 0, ps_bw * fraction, out)
    up_lat = np.asarray(cluster.scale_up_latency_s, dtype=np.float64)
    out_lat = np.asarray(cluster.scale_out_latency_s, dtype=np.float64)
    times: list[Array] = [np.asarray(t, dtype=np.float64) for t in (
        ring_allreduce_s(nbytes, n, bw, lat),
        tree_allreduce_s(nbytes, n, bw, lat),
        hierarchical_allreduce_s(nbytes, n, per_node, up_bw=up, out_bw=out,
                                 up_lat=up_lat, out_lat=out_lat),
        direct_allreduce_s(nbytes, n, bw, lat, eff.message_overhead_s),
        parameter_server_s(nbytes, n, servers, worker_bw=np.minimum(bw, out), server_bw=ps_bw,
                           lat=out_lat, message_s=eff.message_overhead_s),
    )]
    fastest = np.minimum(np.minimum(times[0], times[1]), times[2])
    shape = np.broadcast_shapes(*(t.shape for t in times), np.shape(sync))
    stacked = np.stack([np.broadcast_to(t, shape) for t in times])
    index = np.broadcast_to(np.clip(np.asarray(sync, dtype=np.int64), 0, 4), shape)
    chosen = np.take_along_axis(stacked, index[None, ...], axis=0)[0]
    return np.where(np.asarray(sync) < 0, fastest, chosen)


def asynchronous_parameter_server_s(nbytes: Value, d: Degrees, cluster: ClusterSpec,
                                    eff: Efficiency, *, compute_s: Value) -> Array:
    """Asynchronous parameter servers (TensorFlow, as CM-DARE ran them): a worker's step adds
    its own push and pull (2M over its link); the s servers serve n workers' 2M each, and
    while they do, the other workers compute, so the servers bound the step only beyond it:
    max(2M/bw_w + 2 lat, 2nM/(s bw_s) - compute)."""
    fraction = eff.network_fraction
    worker_bw = np.asarray(cluster.scale_out_bandwidth_bytes_per_s, dtype=np.float64) * fraction
    server_bw = np.asarray(cluster.parameter_server_bandwidth_bytes_per_s, dtype=np.float64)
    server_bw = np.where(server_bw > 0, server_bw * fraction, worker_bw)
    own = 2.0 * nbytes / worker_bw + 2.0 * np.asarray(cluster.scale_out_latency_s)
    servers = 2.0 * d.dp * nbytes / (np.maximum(d.parameter_servers, 1.0) * server_bw)
    return np.maximum(own, servers - compute_s)
