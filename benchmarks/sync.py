"""The five gradient-synchronisation choices across worker counts and message sizes.

    python benchmarks/sync.py [--gpu a100-80gb] [--servers 4]

Workers are GPUs of the GPU's usual node (NVLink inside, one NIC per GPU across). For each
message size and worker count: the time of ring, tree, hierarchical, direct and parameter-server
synchronisation, and the fastest. Two checks against the textbook costs (Thakur et al. 2005):
the ring moves 2(n-1)/n of the message per link (its large-message time over M/bw), and the
tree's small-message time grows with log2(n) latency steps while the ring's grows with n.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost import DEFAULT_EFFICIENCY, SYNC, ClusterSpec
from cost.sync import gradient_sync_s
from search_spaces import gpu_catalog

SIZES = (1e3, 1e6, 1e8, 1e10)
WORKERS = (2, 8, 64, 512)


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:7.2f} {unit}"
    return f"{seconds / 1e-6:7.2f} us"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpu", default="a100-80gb")
    parser.add_argument("--servers", type=int, default=4)
    args = parser.parse_args(argv)
    gpu = gpu_catalog()[args.gpu]
    eff = DEFAULT_EFFICIENCY
    print(f"{args.gpu}: {gpu.gpus_per_node} GPUs per node, scale-up "
          f"{gpu.scale_up_bandwidth_bytes_per_s / 1e9:.0f} GB/s, scale-out "
          f"{gpu.scale_out_bandwidth_bytes_per_s / 1e9:.1f} GB/s per GPU; "
          f"{args.servers} parameter servers")
    print(f"{'message':>8} {'workers':>7} " + " ".join(f"{s:>14}" for s in SYNC) + "  fastest")
    for size in SIZES:
        for n in WORKERS:
            cluster = ClusterSpec.of(gpu, nodes=max(1, n // gpu.gpus_per_node),
                                     gpus_per_node=min(n, gpu.gpus_per_node))
            times = [float(gradient_sync_s(size, n=float(n), stride=1.0, cluster=cluster,
                                           sync=code, servers=args.servers, eff=eff))
                     for code in range(len(SYNC))]
            best = SYNC[int(np.argmin(times))]
            print(f"{size:>8.0e} {n:>7} " + " ".join(f"{_fmt(t):>14}" for t in times)
                  + f"  {best}")
    _textbook(gpu)
    return 0


def _textbook(gpu: object) -> None:
    """Ring: large-message time x bw / M -> 2(n-1)/n; small messages: tree ~ log2 n steps."""
    from cost.collectives import ring_allreduce_s, tree_allreduce_s
    print("\ntextbook checks (one link of 10 GB/s, 5 us per step)")
    for n in (2, 8, 64, 512):
        ring = float(ring_allreduce_s(1e10, float(n), 1e10, 5e-6))
        m_over_bw = 1e10 / 1e10
        print(f"  n={n:>3}: ring takes {ring / m_over_bw:.4f} x M/bw "
              f"(2(n-1)/n = {2 * (n - 1) / n:.4f} + latency); 1 kB: tree "
              f"{float(tree_allreduce_s(1e3, float(n), 1e10, 5e-6)) / 5e-6:.1f} steps "
              f"(2 log2 n = {2 * np.log2(n):.1f}), ring "
              f"{float(ring_allreduce_s(1e3, float(n), 1e10, 5e-6)) / 5e-6:.1f} steps")


if __name__ == "__main__":
    raise SystemExit(main())
