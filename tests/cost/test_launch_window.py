"""Data-parallel collectives queued on their own stream keep running while the GPU waits for
the host to launch its kernels: that wait is part of the pass they hide behind
(cost.schedule._dp_comm_s)."""

from __future__ import annotations

import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY, Plan, TrainingSpec
from cost.degrees import degrees
from cost.schedule import step_time
from cost.workload import StageCost
from tests.factories import cluster, gpt, one_group

EFF = DEFAULT_EFFICIENCY.with_(network_fraction=0.8, overlap_slowdown=0.0, dp_overlap=1.0)


def _fsdp_step(*, forward: float, backward: float, host: float) -> tuple[float, float]:
    """ZeRO-3 over 4 ranks one per node (stride 8: 25 GB/s x 0.8 = 20 GB/s, 5 us a hop) of
    1e9 parameters in one layer (2-byte weights and gradients), one micro-batch whose kernels
    take `host` seconds to launch: (exposed data-parallel seconds, launch wait seconds)."""
    c = cluster(4)  # 4 nodes of 8 A100
    held = one_group(replicas=4.0, stride=8.0)
    d = degrees(c, TrainingSpec(global_batch=4), Plan(tp=8, pp=1, zero=3, micro_batch=1))
    z = np.float64(0.0)
    stage = StageCost(compute_s=np.float64(forward + backward), recompute_s=z, tp_comm_s=z,
                      cp_comm_s=z, forward_s=np.float64(forward),
                      backward_s=np.float64(backward),
                      bubble_unit_s=np.float64(forward + backward), send_bytes=z, units=1.0,
                      host_s=np.float64(host))
    step = step_time(gpt(), c, stage, held, d, EFF)
    return float(step.dp_comm_s), float(step.launch_s)


def test_fsdp_traffic_hides_behind_the_launch_wait_by_hand() -> None:
    """A layer's gather, and its reduce-scatter: 3/4 x 2 GB / 20 GB/s + 3 x 5 us = 75.015 ms.
    A 10 ms forward and 20 ms backward launched in 90 ms: the GPU waits 60 ms, a third in the
    forward (the forward's share of the passes). Forward: the gather behind 10 + 20 ms,
    45.015 ms exposed; backward: gather and scatter, 150.03 ms, behind 20 + 40 ms, 90.03 ms;
    135.045 ms in all. Behind the compute alone: 65.015 + 130.03 = 195.045 ms."""
    exposed, launch = _fsdp_step(forward=0.010, backward=0.020, host=0.090)
    assert launch == pytest.approx(0.060, rel=1e-12)
    assert exposed == pytest.approx(0.135045, rel=1e-9)


def test_a_faster_gpu_waiting_on_the_same_host_exposes_no_more() -> None:
    """Twice the GPU under the same 90 ms host: the passes shrink to 5 and 10 ms and the wait
    grows to 75 ms; the time the traffic has is the host's 90 ms either way (before, a faster
    GPU made this step 15 ms longer: 300 ms against 285)."""
    slow_dp, slow_launch = _fsdp_step(forward=0.010, backward=0.020, host=0.090)
    fast_dp, fast_launch = _fsdp_step(forward=0.005, backward=0.010, host=0.090)
    assert fast_launch == pytest.approx(0.075, rel=1e-12)
    assert fast_dp == pytest.approx(slow_dp, rel=1e-9)
    assert 0.015 + fast_launch + fast_dp <= 0.030 + slow_launch + slow_dp + 1e-12
