import warnings

import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY, Plan, evaluate
from cost.degrees import degrees
from cost.memory import hbm_usable_bytes
from cost.transformer_memory import activation_bytes_per_layer, layers_in_flight, stage_parameters
from cost.transformer_time import stage_shape
from tests.factories import cluster, gpt, run

S, B, H, A = 2048, 1, 12288, 96  # GPT-3 175B, micro-batch 1


def resolved(**plan: float):  # type: ignore[no-untyped-def]
    return degrees(cluster(8), run(64), Plan(**plan))


def _in_flight(**plan: float):  # type: ignore[no-untyped-def]
    d = resolved(**plan)
    return layers_in_flight(d, stage_shape(gpt(), d))


def per_layer(flash: bool = False, **plan: float) -> float:
    r = resolved(**plan)
    return float(activation_bytes_per_layer(gpt(), r, act_bytes=2.0, input_bytes=2.0,
                                            flash_attention=flash))


def test_korthikanti_no_parallelism() -> None:
    """sbh(34 + 5as/h): Korthikanti et al. MLSys'23, eq. 1."""
    assert per_layer(tp=1, pp=1) == pytest.approx(S * B * H * (34 + 5 * A * S / H))


def test_korthikanti_tensor_parallel() -> None:
    """sbh(10 + 24/t + 5as/(ht)): eq. 2."""
    t = 8
    got = per_layer(tp=t, pp=1)
    assert got == pytest.approx(S * B * H * (10 + 24 / t + 5 * A * S / (H * t)))


def test_korthikanti_sequence_and_selective() -> None:
    """sbh/t·34 with sequence parallelism and selective recompute: eq. 5."""
    t = 8
    got = per_layer(tp=t, pp=1, sequence_parallel=1, recompute=1)
    assert got == pytest.approx(S * B * H * 34 / t)


def test_full_recompute_keeps_the_layer_input() -> None:
    assert per_layer(tp=8, pp=1, recompute=2) == pytest.approx(2 * S * B * H)


def test_flash_attention_stores_no_scores() -> None:
    assert per_layer(True, tp=8, pp=1) == pytest.approx(S * B * H * (10 + 24 / 8))


def test_layers_in_flight_1f1b_and_interleaved() -> None:
    # 64 GPUs, tp 8, pp 8 -> dp 1, 64 micro-batches: the first stage holds p micro-batches
    assert float(_in_flight(tp=8, pp=8)) == pytest.approx(96)
    p, v = 8, 3
    got = float(_in_flight(tp=8, pp=p, virtual_stages=v))
    assert got == pytest.approx(96 * (1 + (p - 1) / (p * v)))


def test_stage_parameters_include_the_vocabulary_on_an_end_stage() -> None:
    r = resolved(tp=8, pp=8)
    layers = 12 * 12288**2 + 13 * 12288  # weights and biases of one layer
    expected = (96 / 8 * layers + 51200 * 12288) / 8 + 2 * 12288
    assert float(stage_parameters(gpt(), r)) == pytest.approx(expected)


def test_more_zero_sharding_never_raises_memory() -> None:
    zero = np.array([0, 1, 2, 3], dtype=float)
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=2, zero=zero))
    totals = report.memory.total_bytes
    assert np.all(np.diff(totals) <= 0)
    assert totals[3] < totals[0]


def test_offload_moves_state_to_the_expansion_tier() -> None:
    c = cluster(8, expansion_capacity_bytes=512 * 2**30, expansion_bandwidth_bytes_per_s=64e9)
    off = np.array([0, 1, 2], dtype=float)
    report = evaluate(gpt(), c, run(64), Plan(tp=8, pp=8, offload=off))
    assert report.memory.optimizer_bytes[1] == 0 and report.memory.expansion_bytes[1] > 0
    assert report.memory.weights_bytes[2] < report.memory.weights_bytes[1]
    assert np.all(report.step.offload_s[1:] > 0) and report.step.offload_s[0] == 0


def test_offload_without_expansion_capacity_does_not_fit() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=8, offload=1))
    assert not bool(report.fits)


def test_offload_without_a_tier_never_ends_a_step() -> None:
    """No expansion tier, no link to offload over: the offload term and the step are inf
    (they were some 1e10 s, the state's bytes over a link floored at 1 B/s), the rest finite,
    with no division warning; a plan that offloads nothing is untouched."""
    off = np.array([0, 1, 2], dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=8, offload=off))
    assert report.step.offload_s[0] == 0 and np.isfinite(report.step_time_s[0])
    assert np.all(np.isinf(report.step.offload_s[1:]))
    assert np.all(np.isinf(report.step_time_s[1:])) and not np.any(report.fits[1:])
    assert np.all(np.isfinite(report.step.compute_s))


def test_usable_hbm_subtracts_the_reserve() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=8))
    eff = DEFAULT_EFFICIENCY
    usable = (80 * 2**30 - eff.reserved_bytes - eff.nccl_bytes) * eff.usable_fraction
    assert float(report.hbm_usable_bytes) == pytest.approx(usable)


def test_reallocated_gradients_leave_less_for_tensors() -> None:
    """One 80 GiB GPU (no NCCL): a Megatron-style loop (fused kernels, one gradient buffer)
    fills 0.96 of the 79 GiB after the context, plain PyTorch (eager: gradients reallocated
    every backward) 0.95, i.e. 0.01 · 79 GiB = 848,256,041 bytes less; with expandable
    segments both fill all 79 GiB."""
    one = cluster(1, gpus_per_node=1)
    fused = hbm_usable_bytes(one, DEFAULT_EFFICIENCY)
    eager = hbm_usable_bytes(one, DEFAULT_EFFICIENCY.with_(kernels="eager"))
    assert float(fused - eager) == pytest.approx(0.01 * 79 * 2**30)
    assert float(hbm_usable_bytes(one, DEFAULT_EFFICIENCY.with_(
        kernels="eager", expandable_segments=True))) == pytest.approx(79 * 2**30)
