import math

import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY, Plan, evaluate
from cost.degrees import degrees
from cost.schedule import dp_buckets, last_bucket_share, pipeline_bubble_s
from cost.transformer_time import layer_times
from tests.factories import cluster, gpt, run


def test_bubble_formula() -> None:
    """(p - 1) / v x t_mb: Narayanan et al. SC'21, sec. 2.2."""
    assert pipeline_bubble_s(8.0, 2.0, 1.0) == pytest.approx(3.5)
    assert pipeline_bubble_s(1.0, 1.0, 5.0) == 0.0


def test_tp_one_has_no_tp_traffic() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=1, pp=16, dp=4))
    assert float(report.step.tp_comm_s) == 0.0


def test_pp_one_has_no_bubble_and_no_sends() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=1))
    assert float(report.step.pp_bubble_s) == 0.0 and float(report.step.pp_comm_s) == 0.0


def test_single_replica_has_no_gradient_traffic() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=8, dp=1))
    assert float(report.step.dp_comm_s) == 0.0


def test_exposed_dp_traffic_without_overlap_is_a_ring_allreduce() -> None:
    eff = DEFAULT_EFFICIENCY.with_(dp_overlap=0.0, network_fraction=1.0)
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=4, dp=2), efficiency=eff)
    params = float(report.memory.gradients_bytes) / 4.0  # bf16: fp32 gradients
    # dp group: stride 8 -> one member per node, 25 GB/s NIC; 2 ranks; one all-reduce per
    # Megatron bucket of max(4e7, 1e6 x 2) parameters, each paying its latency steps
    buckets = math.ceil(params / 4e7)
    expected = min(2 * 1 / 2 * params * 4 / 25e9 + 2 * 5e-6 * buckets,
                   2 * params * 4 / 25e9 + 2 * 5e-6 * buckets)
    assert float(report.step.dp_comm_s) == pytest.approx(expected)


def test_megatron_buckets_by_hand() -> None:
    """max(4e7, 1e6 x dp x cp) parameters a bucket (Megatron-Core DistributedDataParallel);
    only the first model chunk is bucketed, the others are one collective each."""
    d = degrees(cluster(64), run(64), Plan(tp=2, cp=4, dp=64))
    assert float(dp_buckets(4.0e9, d, DEFAULT_EFFICIENCY)) == 16.0  # 4e9 / 2.56e8 = 15.6
    small = degrees(cluster(8), run(64), Plan(tp=8, pp=1, dp=8))
    assert float(dp_buckets(1.0e8, small, DEFAULT_EFFICIENCY)) == 3.0  # 1e8 / 4e7 = 2.5
    interleaved = degrees(cluster(64), run(512), Plan(tp=2, cp=4, dp=16, pp=4,
                                                      virtual_stages=4))
    # first chunk: 1e9 parameters in buckets of 6.4e7 (dp x cp = 64): 15.6, so 16; then
    # three chunks of one collective each
    assert float(dp_buckets(4.0e9, interleaved, DEFAULT_EFFICIENCY)) == 16.0 + 3.0
    own = DEFAULT_EFFICIENCY.with_(dp_bucket_params=5e8)
    assert float(dp_buckets(4.0e9, d, own)) == 8.0
    unbucketed = DEFAULT_EFFICIENCY.with_(dp_bucket_params=0.0)
    assert float(dp_buckets(4.0e9, d, unbucketed)) == 1.0
    assert float(dp_buckets(4.0e9, interleaved, unbucketed)) == 4.0


def test_the_last_bucket_by_hand() -> None:
    """The first model chunk's bucket that reduces last, as a share of the parameters: the
    chunk over its bucket count (the buckets of test_megatron_buckets_by_hand)."""
    d = degrees(cluster(64), run(64), Plan(tp=2, cp=4, dp=64))
    assert float(last_bucket_share(4.0e9, d, DEFAULT_EFFICIENCY)) == pytest.approx(1 / 16)
    mlperf = DEFAULT_EFFICIENCY.with_(dp_bucket_params=7.68e8)  # 4e9 / 7.68e8 = 5.2: 6
    assert float(last_bucket_share(4.0e9, d, mlperf)) == pytest.approx(1 / 6)
    interleaved = degrees(cluster(64), run(512), Plan(tp=2, cp=4, dp=16, pp=4,
                                                      virtual_stages=4))
    # the first chunk's 1e9 parameters in 16 buckets
    assert float(last_bucket_share(4.0e9, interleaved, DEFAULT_EFFICIENCY)) == \
        pytest.approx(1e9 / 16 / 4e9)
    one = DEFAULT_EFFICIENCY.with_(dp_bucket_params=0.0)  # the chunk is one collective
    assert float(last_bucket_share(4.0e9, interleaved, one)) == pytest.approx(1 / 4)
    small = degrees(cluster(8), run(64), Plan(tp=8, pp=1, dp=8))
    assert float(last_bucket_share(1.0e7, small, DEFAULT_EFFICIENCY)) == 1.0  # one bucket


def test_the_last_bucket_reduces_after_the_backward() -> None:
    """ZeRO-1 with the whole step to hide behind: every bucket hides but the one whose
    gradients are ready last, which reduce-scatters after the backward, and the one the
    forward's first layers need, which gathers before it (Megatron-Core's overlapped grad
    reduce and param gather): one bucket's ring each, by hand, plus the overlap's slowdown
    on the hidden rest."""
    eff = DEFAULT_EFFICIENCY.with_(network_fraction=1.0, overlap_slowdown=0.0)
    plan = Plan(tp=8, pp=4, dp=16, zero=1)
    report = evaluate(gpt(), cluster(64), run(256), plan, efficiency=eff)
    params = float(report.memory.optimizer_bytes) * 16 / 12.0  # fp32 master + 2 moments
    buckets = math.ceil(params / 4e7)
    bucket = params / buckets
    ring = 15 / 16 * (4 + 2) * bucket / 25e9 + 2 * 15 * 5e-6  # one bucket, each way
    assert float(report.step.dp_comm_s) == pytest.approx(ring, rel=1e-6)
    whole = evaluate(gpt(), cluster(64), run(256), plan,
                     efficiency=eff.with_(dp_bucket_params=0.0))  # one bucket: nothing hides
    assert float(whole.step.dp_comm_s) == pytest.approx(15 / 16 * 6 * params / 25e9
                                                        + 2 * 15 * 5e-6, rel=1e-6)


def test_zero2_gathers_the_first_bucket_before_the_forward() -> None:
    """ZeRO-2 reduce-scatters every micro-batch (hidden here, on 250 GB/s NICs, behind its
    backward) and gathers the weights once a step, bucket by bucket as ZeRO-1 does: the first
    layers' bucket before the forward, the rest behind it. By hand: one bucket's all-gather
    of bf16 weights."""
    eff = DEFAULT_EFFICIENCY.with_(network_fraction=1.0, overlap_slowdown=0.0)
    plan = Plan(tp=8, pp=4, dp=16, zero=2)
    fast = cluster(64, scale_out_bandwidth_bytes_per_s=2.5e11)
    report = evaluate(gpt(), fast, run(256), plan, efficiency=eff)
    params = float(report.memory.optimizer_bytes) * 16 / 12.0  # fp32 master + 2 moments
    bucket = params / math.ceil(params / 4e7)
    gather = 15 / 16 * 2 * bucket / 2.5e11 + 15 * 5e-6  # one member per node
    assert float(report.step.dp_comm_s) == pytest.approx(gather, rel=1e-6)


def test_distributed_optimizer_pays_ring_latency_per_bucket() -> None:
    """ZeRO-1 without overlap: a reduce-scatter of fp32 gradients and an all-gather of bf16
    weights, each (n - 1)/n of its buffer over the NIC plus n - 1 latency steps per bucket."""
    eff = DEFAULT_EFFICIENCY.with_(dp_overlap=0.0, network_fraction=1.0)
    plan = Plan(tp=8, pp=4, dp=16, zero=1)
    report = evaluate(gpt(), cluster(64), run(256), plan, efficiency=eff)
    params = float(report.memory.optimizer_bytes) * 16 / 12.0  # fp32 master + 2 moments
    buckets = math.ceil(params / 4e7)  # max(4e7, 1.6e7)
    ring = 15 / 16 * (4 + 2) * params / 25e9  # one member per node: 25 GB/s NIC
    expected = ring + 2 * 15 * 5e-6 * buckets
    assert float(report.step.dp_comm_s) == pytest.approx(expected, rel=1e-6)
    one = evaluate(gpt(), cluster(64), run(256), plan,
                   efficiency=eff.with_(dp_bucket_params=0.0))
    assert float(one.step.dp_comm_s) == pytest.approx(ring + 2 * 15 * 5e-6, rel=1e-6)


def test_full_recompute_redoes_the_forward_pass() -> None:
    model, c, training = gpt(), cluster(8), run(64)
    r = degrees(c, training, Plan(tp=8, pp=8, recompute=np.array([0.0, 1.0, 2.0])))
    layer = layer_times(model, c, training, r, DEFAULT_EFFICIENCY)
    assert layer.recompute_s[0] == 0.0
    assert layer.recompute_s[2] == pytest.approx(layer.forward_s[2])
    assert layer.tp_comm_s[2] == pytest.approx(1.5 * layer.tp_comm_s[0])


def test_backward_is_about_twice_the_forward() -> None:
    model, c, training = gpt(), cluster(8), run(64)
    layer = layer_times(model, c, training, degrees(c, training, Plan(tp=8, pp=8)),
                        DEFAULT_EFFICIENCY)
    assert 2.0 <= float(layer.backward_s / layer.forward_s) <= 2.5


def test_breakdown_sums_to_the_step_time() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=8, virtual_stages=3))
    assert sum(report.step.as_dict().values()) == pytest.approx(float(report.step_time_s))


def _tp_comm(plan: Plan, nodes: int = 8, **eff: float) -> float:
    efficiency = DEFAULT_EFFICIENCY.with_(**eff)
    return float(evaluate(gpt(), cluster(nodes), run(64), plan, efficiency=efficiency)
                 .step.tp_comm_s)


def test_tp_overlap_hides_sequence_parallel_traffic_less_its_sm_cost() -> None:
    """Hidden TP traffic leaves overlap_slowdown of itself exposed: the chunks that overlap
    still take SMs from the GEMMs."""
    plan = Plan(tp=8, pp=8, sequence_parallel=True)
    exposed = _tp_comm(plan, tp_overlap=0.0)
    half = _tp_comm(plan, tp_overlap=0.5, overlap_slowdown=0.0)
    assert half == pytest.approx(0.5 * exposed)
    slowed = _tp_comm(plan, tp_overlap=0.5, overlap_slowdown=0.2)
    assert slowed == pytest.approx(0.5 * exposed + 0.2 * 0.5 * exposed)


def test_tp_overlap_needs_sequence_parallelism_inside_an_nvlink_domain() -> None:
    """An all-reduce (no sequence parallelism) and a TP group spanning nodes stay exposed."""
    allreduce = Plan(tp=8, pp=8, sequence_parallel=False)
    assert _tp_comm(allreduce, tp_overlap=1.0) == _tp_comm(allreduce, tp_overlap=0.0)
    across = Plan(tp=16, pp=4, sequence_parallel=True)
    assert _tp_comm(across, tp_overlap=1.0) == _tp_comm(across, tp_overlap=0.0) > 0.0


def test_more_tp_overlap_never_slows_a_step() -> None:
    plans = Plan(tp=np.array([1.0, 2.0, 4.0, 8.0, 16.0]), pp=4, sequence_parallel=True)
    times = [evaluate(gpt(), cluster(8), run(64), plans,
                      efficiency=DEFAULT_EFFICIENCY.with_(tp_overlap=x)).step_time_s
             for x in (0.0, 0.5, 1.0)]
    assert np.all(times[1] <= times[0]) and np.all(times[2] <= times[1])


def test_unfused_attention_is_slower_and_selective_recompute_redoes_it() -> None:
    """Without flash attention the s x s scores stream through HBM; selective recompute
    recomputes exactly that attention core (Korthikanti et al.), at no cost with flash."""
    model, c, training = gpt(), cluster(8), run(64)
    r = degrees(c, training, Plan(tp=8, pp=8, recompute=1.0))
    fused = layer_times(model, c, training, r, DEFAULT_EFFICIENCY)
    unfused = layer_times(model, c, training, r, DEFAULT_EFFICIENCY.with_(flash_attention=False))
    assert float(unfused.forward_s) > float(fused.forward_s)
    assert float(fused.recompute_s) == 0.0
    assert float(unfused.recompute_s) == pytest.approx(float(unfused.attention_forward_s))
