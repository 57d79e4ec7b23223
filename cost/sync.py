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
    "closed_throughput",
    "direct_allreduce_s",
    "gradient_sync_s",
    "hierarchical_allreduce_s",
    "parameter_server_s",
    "server_service_s",
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
                    sync: Value, servers: Value, eff: Efficiency, calls: Value = 1.0) -> Array:
    """Seconds to all-reduce `nbytes` over a group of n ranks spaced `stride` apart with the
    plan's algorithm (`sync` code into SYNC, -1 for the fastest collective). The collectives
    (ring, tree, hierarchical) run as `calls` all-reduces of their share of the buffer, one
    per gradient bucket, each paying its latency steps; direct writes and parameter servers
    move the whole buffer once per iteration."""
    link = group_link(cluster, stride=stride, size=n, fraction=eff.network_fraction)
    bw, lat = link.bandwidth_bytes_per_s, link.latency_s * calls
    fraction = eff.network_fraction
    up = np.asarray(cluster.scale_up_bandwidth_bytes_per_s, dtype=np.float64) * fraction
    out = np.asarray(cluster.scale_out_bandwidth_bytes_per_s, dtype=np.float64) * fraction
    per_node = np.asarray(cluster.gpus_per_node, dtype=np.float64) / stride
    ps_bw = np.asarray(cluster.parameter_server_bandwidth_bytes_per_s, dtype=np.float64)
    ps_bw = np.where(ps_bw > 0, ps_bw * fraction, out)
    out_lat = np.asarray(cluster.scale_out_latency_s, dtype=np.float64)
    up_calls = np.asarray(cluster.scale_up_latency_s, dtype=np.float64) * calls
    out_calls = out_lat * calls
    times: list[Array] = [np.asarray(t, dtype=np.float64) for t in (
        ring_allreduce_s(nbytes, n, bw, lat),
        tree_allreduce_s(nbytes, n, bw, lat),
        hierarchical_allreduce_s(nbytes, n, per_node, up_bw=up, out_bw=out,
                                 up_lat=up_calls, out_lat=out_calls),
        direct_allreduce_s(nbytes, n, bw, link.latency_s, eff.message_overhead_s),
        parameter_server_s(nbytes, n, servers, worker_bw=np.minimum(bw, out), server_bw=ps_bw,
                           lat=out_lat, message_s=eff.message_overhead_s),
    )]
    fastest = np.minimum(np.minimum(times[0], times[1]), times[2])
    shape = np.broadcast_shapes(*(t.shape for t in times), np.shape(sync))
    stacked = np.stack([np.broadcast_to(t, shape) for t in times])
    index = np.broadcast_to(np.clip(np.asarray(sync, dtype=np.int64), 0, 4), shape)
    chosen = np.take_along_axis(stacked, index[None, ...], axis=0)[0]
    return np.where(np.asarray(sync) < 0, fastest, chosen)


def server_service_s(nbytes: Value, servers: Value, *, server_bw: Value,
                     eff: Efficiency) -> Array:
    """Seconds one update keeps the busiest of s parameter servers, each holding 1/s of the
    model: its request overhead, then the gradients in and the weights out (2M/s bytes) at the
    slower of its update rate and its link: ps_update_s + 2M/s x max(1/rate, 1/bw)."""
    s = np.maximum(np.asarray(servers, dtype=np.float64), 1.0)
    per_byte = np.maximum(1.0 / eff.ps_bytes_per_s, 1.0 / np.asarray(server_bw, dtype=np.float64))
    return eff.ps_update_s + 2.0 * np.asarray(nbytes, dtype=np.float64) / s * per_byte


def closed_throughput(think_s: list[Array], workers: list[Array], service_s: Value, *,
                      iterations: int = 200) -> list[Array]:
    """Cycles per second of each class of workers sharing one server (a closed queueing
    network: each worker thinks Z_c, then waits for and receives service S).

    Mean value analysis (Reiser and Lavenberg, JACM 1980) with Schweitzer's approximation for
    several classes (Schweitzer 1979; Lazowska et al., Quantitative System Performance, 1984,
    ch. 6 and 7): an arriving worker of class c sees the queue less its own share,
    R_c = S (1 + Q - Q_c/N_c - (U - U_c/N_c)/2), where the last term is the residual service
    of a deterministic server (an update's work is fixed); X_c = N_c / (Z_c + R_c). Exact for
    one worker (X = 1/(Z + S)); X -> sum N_c/Z_c as S -> 0 and X -> 1/S as the workers grow."""
    service = np.asarray(service_s, dtype=np.float64)
    n = [np.asarray(w, dtype=np.float64) for w in workers]
    z = [np.asarray(t, dtype=np.float64) for t in think_s]
    share = [np.where(k > 0, 1.0 / np.maximum(k, 1.0), 0.0) for k in n]
    queue = [k * service / (t + service) for k, t in zip(n, z, strict=True)]
    busy = [q.copy() for q in queue]
    rates: list[Array] = [np.zeros(np.broadcast_shapes(np.shape(k), np.shape(service)))
                          for k in n]
    for _ in range(iterations):
        total_q = sum(queue, start=np.float64(0.0))
        total_u = sum(busy, start=np.float64(0.0))
        before = [r.copy() for r in rates]
        for c in range(len(n)):
            seen_q = total_q - queue[c] * share[c]
            seen_u = total_u - busy[c] * share[c]
            residence = service * (1.0 + seen_q - 0.5 * seen_u)
            rates[c] = n[c] / (z[c] + residence)
            queue[c] = 0.5 * queue[c] + 0.5 * rates[c] * residence
            busy[c] = 0.5 * busy[c] + 0.5 * rates[c] * service
        change = max(float(np.max(np.abs(r - b) / np.maximum(r, 1e-30), initial=0.0))
                     for r, b in zip(rates, before, strict=True))
        if change < 1e-10:
            break
    return rates


def asynchronous_parameter_server_s(nbytes: Value, d: Degrees, cluster: ClusterSpec,
                                    eff: Efficiency, *, compute_s: Value) -> Array:
    """Asynchronous parameter servers (TensorFlow, as CM-DARE ran them): each of the dp
    workers computes its micro-batches (`compute_s`), pushes its gradients and pulls the
    weights over its own link (2M/bw_w), and queues at the servers (server_service_s); the
    workers' cycles follow closed_throughput. What the step adds to the compute: the time for
    every worker to finish one cycle, dp / X, less the compute."""
    fraction = eff.network_fraction
    worker_bw = np.asarray(cluster.scale_out_bandwidth_bytes_per_s, dtype=np.float64) * fraction
    server_bw = np.asarray(cluster.parameter_server_bandwidth_bytes_per_s, dtype=np.float64)
    server_bw = np.where(server_bw > 0, server_bw * fraction, worker_bw)
    own = 2.0 * nbytes / worker_bw + 2.0 * np.asarray(cluster.scale_out_latency_s)
    service = server_service_s(nbytes, d.parameter_servers, server_bw=server_bw, eff=eff)
    (rate,) = closed_throughput([compute_s + own], [d.dp], service)
    return d.dp / rate - compute_s
