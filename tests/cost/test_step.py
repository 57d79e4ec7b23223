import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY, Plan, evaluate
from cost.resolved import resolve
from cost.step import layer_times, pipeline_bubble_s
from tests.factories import cluster, gpt, run


def test_bubble_formula() -> None:
    """(p - 1) / v x t_mb: Narayanan et al. SC'21, sec. 2.2."""
    assert pipeline_bubble_s(8.0, 2.0, 1.0) == pytest.approx(3.5)
    assert pipeline_bubble_s(1.0, 1.0, 5.0) == 0.0


def test_tp_one_has_no_tp_traffic() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=1, pp=16, dp=4))
    assert float(report.step.tp_comm) == 0.0


def test_pp_one_has_no_bubble_and_no_sends() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=1))
    assert float(report.step.pp_bubble) == 0.0 and float(report.step.pp_comm) == 0.0


def test_single_replica_has_no_gradient_traffic() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=8, dp=1))
    assert float(report.step.dp_comm) == 0.0


def test_exposed_dp_traffic_without_overlap_is_a_ring_allreduce() -> None:
    eff = DEFAULT_EFFICIENCY.with_(dp_overlap=0.0, network_fraction=1.0)
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=4, dp=2), efficiency=eff)
    params = float(report.memory.gradients) / 4.0  # bf16: fp32 gradients
    # dp group: stride 8 -> one member per node, 25 GB/s NIC; 2 ranks
    expected = min(2 * 1 / 2 * params * 4 / 25e9 + 2 * 5e-6, 2 * params * 4 / 25e9 + 2 * 5e-6)
    assert float(report.step.dp_comm) == pytest.approx(expected)


def test_full_recompute_redoes_the_forward_pass() -> None:
    model, c, training = gpt(), cluster(8), run(64)
    r = resolve(model, c, training, Plan(tp=8, pp=8, recompute=np.array([0.0, 1.0, 2.0])))
    layer = layer_times(model, c, training, r, DEFAULT_EFFICIENCY)
    assert layer.recompute[0] == 0.0
    assert layer.recompute[2] == pytest.approx(layer.forward[2])
    assert layer.tp_comm[2] == pytest.approx(1.5 * layer.tp_comm[0])


def test_backward_is_about_twice_the_forward() -> None:
    model, c, training = gpt(), cluster(8), run(64)
    layer = layer_times(model, c, training, resolve(model, c, training, Plan(tp=8, pp=8)),
                        DEFAULT_EFFICIENCY)
    assert 2.0 <= float(layer.backward / layer.forward) <= 2.5


def test_breakdown_sums_to_the_step_time() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=8, virtual_stages=3))
    assert sum(report.step.as_dict().values()) == pytest.approx(float(report.step_time_s))
