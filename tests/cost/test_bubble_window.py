"""The pipeline's bubble hides the once-per-step data-parallel traffic once: its fill the
weight gathers, its drain the gradient reductions (cost.schedule._dp_comm_s)."""

from __future__ import annotations

import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY, Plan, TrainingSpec, schedule
from cost.degrees import degrees
from cost.schedule import step_time
from cost.workload import StageCost
from tests.factories import cluster, gpt, one_group

EFF = DEFAULT_EFFICIENCY.with_(network_fraction=0.8, overlap_slowdown=0.0, dp_overlap=1.0,
                               dp_bucket_params=2.5e8)


def _stage(*, forward: float, backward: float) -> StageCost:
    z = np.float64(0.0)
    return StageCost(compute_s=np.float64(forward + backward), recompute_s=z, tp_comm_s=z,
                     cp_comm_s=z, forward_s=np.float64(forward),
                     backward_s=np.float64(backward),
                     bubble_unit_s=np.float64(forward + backward), send_bytes=z, units=1.0)


def _zero1_step(forward: float, backward: float) -> tuple[float, float]:
    """ZeRO-1 over 4 ranks one per node (stride 8: 25 GB/s x 0.8 = 20 GB/s, 5 us a hop) of
    1e9 parameters (2-byte weights and gradients, buckets of 2.5e8), 2 stages, 1 micro-batch:
    (exposed data-parallel seconds, bubble seconds)."""
    c = cluster(4)  # 4 nodes of 8 A100
    held = one_group(replicas=4.0, stride=8.0)
    d = degrees(c, TrainingSpec(global_batch=4), Plan(tp=4, pp=2, zero=1, micro_batch=1))
    step = step_time(gpt(), c, _stage(forward=forward, backward=backward), held, d, EFF)
    return float(step.dp_comm_s), float(step.pp_bubble_s)


def test_the_bubble_hides_gathers_in_its_fill_and_reductions_in_its_drain_by_hand() -> None:
    """Reduce-scatter and all-gather each: 3/4 x 2 GB / 20 GB/s + 3 hops x 5 us x 4 buckets
    = 75.06 ms, of which the last (first) bucket, 18.75 ms + 15 us = 18.765 ms, runs outside
    its pass. A 10 ms forward and 20 ms backward, 2 stages: a 30 ms bubble, 10 ms of fill
    and 20 ms of drain. Reductions: 56.295 ms behind 20 + 20 ms -> 16.295 + 18.765 = 35.06
    ms; gathers: 56.295 ms behind 10 + 10 ms -> 55.06 ms; 90.12 ms in all. The bubble counted
    whole behind each (50 and 40 ms) gave 60.12 ms: 90 ms hidden in a stage that is busy or
    idle for 60."""
    exposed, bubble = _zero1_step(0.010, 0.020)
    assert bubble == pytest.approx(0.030, rel=1e-12)
    assert exposed == pytest.approx(0.09012, rel=1e-9)
    hidden = 2 * 0.07506 - exposed
    assert hidden == pytest.approx(0.010 + 0.020 + bubble, rel=1e-9)


def test_forward_share_splits_the_bubble_as_the_passes() -> None:
    stage = _stage(forward=0.010, backward=0.020)
    assert float(schedule.forward_share(stage)) == pytest.approx(1.0 / 3.0)
    assert float(schedule.forward_share(_stage(forward=0.0, backward=0.0))) == 0.5
