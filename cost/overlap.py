"""Communication hidden behind compute: the one formula for every overlapped transfer."""

from __future__ import annotations

import numpy as np

from .inputs import Array, Value

__all__ = ["exposed_s"]


def exposed_s(comm_s: Value, window_s: Value, *, slowdown: float, hideable: Value = 1.0,
              window_share: Value = 1.0) -> Array:
    """Seconds a transfer adds to the step when it runs beside compute.

    Of `comm_s`, the share `hideable` can overlap at all (TP overlap hides only the chunked
    sequence-parallel collectives), and it hides behind the share `window_share` of the
    compute window `window_s` (gradient buckets behind the backward pass they follow):
    hidden = min(hideable · comm, window_share · window). Hidden traffic is not free: NCCL's
    kernels take SMs and HBM bandwidth from the compute they overlap, `slowdown` seconds per
    second hidden. exposed = comm - hidden + slowdown · hidden."""
    hidden = np.minimum(hideable * comm_s, window_share * window_s)
    return comm_s - hidden + slowdown * hidden
