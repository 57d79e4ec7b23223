"""Data-parallel traffic that crosses the NICs also runs while the exposed model-parallel
traffic stays inside a scale-up domain (cost.schedule.nic_free), and only then."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY, MoEModelSpec, Plan, TrainingSpec
from cost.degrees import degrees
from cost.schedule import step_time
from cost.workload import StageCost
from tests.factories import cluster, gpt, one_group

EFF = DEFAULT_EFFICIENCY.with_(network_fraction=0.8, overlap_slowdown=0.0, dp_overlap=1.0)


def _stage(*, forward: float, backward: float, up_forward: float, up_backward: float
           ) -> StageCost:
    z = np.float64(0.0)
    return StageCost(compute_s=np.float64(forward + backward), recompute_s=z, tp_comm_s=z,
                     cp_comm_s=z, forward_s=np.float64(forward),
                     backward_s=np.float64(backward), bubble_unit_s=z, send_bytes=z, units=1.0,
                     scale_up_forward_s=up_forward, scale_up_backward_s=up_backward)


def _fsdp_dp_comm_s(*, stride: float, replicas: float, up_forward: float,
                    up_backward: float, forward: float = 0.05, backward: float = 0.1) -> float:
    """ZeRO-3 over `replicas` ranks spaced `stride` apart, 1e9 parameters of 2-byte weights and
    2-byte gradients, one layer, one micro-batch, a 50 ms forward and 100 ms backward."""
    c = cluster(4)  # 4 nodes of 8 A100: NVLink inside a node, 25 GB/s NIC per GPU, 5 us
    held = one_group(replicas=replicas, stride=stride)
    d = degrees(c, TrainingSpec(global_batch=int(replicas)),
                Plan(tp=int(32 / replicas), pp=1, zero=3, micro_batch=1))
    stage = _stage(forward=forward, backward=backward, up_forward=up_forward,
                   up_backward=up_backward)
    return float(step_time(gpt(), c, stage, held, d, EFF).dp_comm_s)


def test_an_fsdp_ring_across_nodes_runs_beside_nvlink_traffic_by_hand() -> None:
    """4 ranks one per node (stride 8): each drives its own NIC, 25 GB/s x 0.8 = 20 GB/s.
    A layer's gather: 3/4 x 2 GB / 20 GB/s + 3 x 5 us = 75.015 ms; its reduce-scatter the same.
    Forward: the gather behind 50 ms of compute and 20 ms of NVLink-only model-parallel
    traffic: 75.015 - 70 = 5.015 ms exposed. Backward: gather + scatter = 150.03 ms behind
    100 + 40 ms: 10.03 ms. Together 15.045 ms; without the NVLink windows 25.015 + 50.03 =
    75.045 ms."""
    got = _fsdp_dp_comm_s(stride=8.0, replicas=4.0, up_forward=0.02, up_backward=0.04)
    assert got == pytest.approx(0.015045, rel=1e-9)
    alone = _fsdp_dp_comm_s(stride=8.0, replicas=4.0, up_forward=0.0, up_backward=0.0)
    assert alone == pytest.approx(0.075045, rel=1e-9)


def test_a_ring_inside_the_domain_shares_nvlink_and_gains_nothing() -> None:
    """8 ranks of one node (stride 1) run on NVLink, as the model-parallel traffic does: a
    7.3 ms gather behind a 1 ms forward stays as exposed beside 2 ms of NVLink traffic."""
    def dp_comm(up: float) -> float:
        return _fsdp_dp_comm_s(stride=1.0, replicas=8.0, up_forward=up, up_backward=2.0 * up,
                               forward=0.001, backward=0.002)
    with_traffic, without = dp_comm(0.002), dp_comm(0.0)
    assert with_traffic == without > 0.0


def _moe_stage(**plan: Any) -> StageCost:
    model = MoEModelSpec(name="moe", layers=8, hidden=1024, heads=16, vocab=8000, seq_len=512,
                         gated_mlp=True, experts=16, top_k=2, expert_ffn_hidden=512)
    c = cluster(4)
    d = degrees(c, TrainingSpec(global_batch=64), Plan(pp=1, micro_batch=1, **plan))
    return model.stage_cost(c, TrainingSpec(global_batch=64), d, DEFAULT_EFFICIENCY)


def test_expert_all_to_alls_inside_a_node_are_a_window_and_across_nodes_are_not() -> None:
    """ep=8 on 8-GPU nodes (tp 1): every all-to-all stays on NVLink, so all of the exposed
    expert-parallel time is NIC-free, forward (dispatch and combine once) and backward (twice
    under full recompute: 2 of 6 shares forward). ep=16 spans two nodes: it drives the NICs
    and adds nothing, like the data-parallel ring it would compete with."""
    inside = _moe_stage(tp=1, ep=8, recompute=2.0)
    up = float(inside.scale_up_forward_s) + float(inside.scale_up_backward_s)
    assert float(inside.ep_comm_s) > 0.0
    assert up == pytest.approx(float(inside.ep_comm_s))
    assert float(inside.scale_up_forward_s) == pytest.approx(up * 2.0 / 6.0)
    across = _moe_stage(tp=1, ep=16, recompute=2.0)
    assert float(across.ep_comm_s) > 0.0
    assert float(across.scale_up_forward_s) == float(across.scale_up_backward_s) == 0.0


def test_tensor_parallelism_across_nodes_is_no_window() -> None:
    """tp=8 stays in its node: its exposed collectives are NIC-free, a third of them forward
    under full recompute (forward, backward, forward again); tp=16 crosses the NICs."""
    c = cluster(4)
    inside = gpt().stage_cost(c, TrainingSpec(global_batch=64),
                              degrees(c, TrainingSpec(global_batch=64),
                                      Plan(tp=8, pp=1, recompute=2.0)), DEFAULT_EFFICIENCY)
    assert float(inside.tp_comm_s) > 0.0
    assert float(inside.scale_up_forward_s) == pytest.approx(float(inside.tp_comm_s) / 3.0)
    assert float(inside.scale_up_backward_s) == pytest.approx(
        2.0 * float(inside.tp_comm_s) / 3.0)
    across = gpt().stage_cost(c, TrainingSpec(global_batch=64),
                              degrees(c, TrainingSpec(global_batch=64),
                                      Plan(tp=16, pp=1, recompute=2.0)), DEFAULT_EFFICIENCY)
    assert float(across.tp_comm_s) > 0.0
    assert float(across.scale_up_forward_s) == float(across.scale_up_backward_s) == 0.0
