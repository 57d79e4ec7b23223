"""Unit tests of what training recipes do beyond the plan (issue 12): per-op selective
activation checkpointing (torchtitan), each against a hand count."""

from __future__ import annotations

import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY, FALLBACK_GEMM_FRACTION, Plan, evaluate
from cost.degrees import degrees
from cost.memory import hbm_usable_bytes
from cost.precision import state_bytes
from cost.transformer_memory import activation_bytes_per_layer, offloaded_activation_bytes
from cost.transformer_time import host_s, layer_times, stage_shape
from search_spaces import gpu_catalog, gpu_info
from tests.factories import cluster, gpt, run

H, F, KV = 8192, 28672, 1024  # Llama 3 70B: hidden, ffn, kv heads x head_dim


def llama(**overrides: object):  # type: ignore[no-untyped-def]
    fields = dict(layers=80, hidden=H, heads=64, kv_heads=8, ffn_hidden=F, vocab=128256,
                  seq_len=8192, gated_mlp=True, dropout=False)
    return gpt(**{**fields, **overrides})


def test_per_op_checkpointing_keeps_the_input_attention_and_every_odd_gemm_output() -> None:
    """bf16, no tp, eager: the block input 2h, the attention output 2h, and the 1st, 3rd, 5th
    and 7th GEMM outputs of wq, wk, wv, wo, w1, w3, w2 -- Q (h), V (kv), the gate (f), fc2
    (h) -- at 2 bytes: 2h + 2h + 2(2h + kv + f) per token; Megatron's selective keeps far
    more (tests/cost/test_op_checkpointing.py: compiled, tensor-parallel)."""
    d = degrees(cluster(8), run(64), Plan(tp=1, pp=1, recompute=1))
    op = activation_bytes_per_layer(llama(), d, act_bytes=2, input_bytes=2,
                                    flash_attention=True, selective_policy="op")
    expected = 2 * H + 2 * H + 2 * (2 * H + KV + F)
    assert float(op) / 8192 == pytest.approx(expected)
    attention = activation_bytes_per_layer(llama(), d, act_bytes=2, input_bytes=2,
                                           flash_attention=True)
    assert float(op) < 0.6 * float(attention)


def test_per_op_checkpointing_redoes_half_the_gemms_and_the_elementwise_work() -> None:
    """Selective under the op policy: half of the forward GEMMs plus the element-wise work,
    between half the forward's GEMM time and the whole forward less the attention core;
    Megatron's policy with flash attention redoes nothing."""
    c = cluster(8)
    d = degrees(c, run(64), Plan(tp=1, pp=1, recompute=1))
    op = layer_times(llama(), c, run(64), d, DEFAULT_EFFICIENCY.with_(selective_recompute="op"))
    plain = layer_times(llama(), c, run(64), d, DEFAULT_EFFICIENCY)
    gemms_and_elementwise = float(op.forward_s - op.attention_forward_s)
    assert float(plain.recompute_s) == 0.0
    assert 0.5 * gemms_and_elementwise < float(op.recompute_s) < gemms_and_elementwise


def test_per_op_checkpointing_replays_the_forward_on_the_host() -> None:
    """The checkpoint replays every op of the forward (saved ones return their cached output),
    so the host work of selective under the op policy equals that of full recompute."""
    eff = DEFAULT_EFFICIENCY.with_(kernels="eager", launch_s=1e-5, selective_recompute="op")
    d = degrees(cluster(8), run(64), Plan(tp=8, pp=8, recompute=np.array([1.0, 2.0])))
    got = host_s(gpt(), d, eff, np.array([12.0, 12.0]))
    assert got[0] == pytest.approx(12 * (46 + 16 * eff.checkpoint_host_factor) * 1e-5)
    assert got[0] == pytest.approx(got[1])


def test_a_power_limited_h100_sustains_the_cube_root_of_its_power_share() -> None:
    """h100-96gb-500w: 0.65 x (500 / 700)^(1/3) = 0.581."""
    limited = gpu_catalog()["h100-96gb-500w"].gemm_fraction
    assert limited == pytest.approx(0.65 * (500 / 700) ** (1 / 3), abs=5e-4)


def test_fsdp_without_resharding_runs_a_step_as_zero_1_does() -> None:
    """reshard_after_forward false: the weights stay gathered through the step's
    micro-batches and the accumulated gradients reduce-scatter once, so a zero=3 plan costs
    what the zero=1 plan costs, in time and in memory; with resharding it costs more."""
    c, r = cluster(8), run(64)
    keep = DEFAULT_EFFICIENCY.with_(reshard_after_forward=False)
    three = evaluate(gpt(), c, r, Plan(tp=1, pp=1, zero=3), efficiency=keep)
    one = evaluate(gpt(), c, r, Plan(tp=1, pp=1, zero=1), efficiency=DEFAULT_EFFICIENCY)
    assert float(three.step_time_s) == pytest.approx(float(one.step_time_s))
    assert float(three.memory.total_bytes) == pytest.approx(float(one.memory.total_bytes))
    resharded = evaluate(gpt(), c, r, Plan(tp=1, pp=1, zero=3), efficiency=DEFAULT_EFFICIENCY)
    assert float(resharded.step_time_s) > float(one.step_time_s)


def test_flash_attention_2_runs_the_attention_core_at_35_75ths_of_the_fused_rate() -> None:
    """attention_kernel flash2: FlashAttention-2 at 35% of an H100's peak where the fused
    kernel (FlashAttention-3) reaches 75% (Shah et al. 2024): the attention core takes 75/35
    times as long, the GEMMs no longer."""
    c = cluster(8)
    d = degrees(c, run(64), Plan(tp=1, pp=1))
    fused = layer_times(llama(), c, run(64), d, DEFAULT_EFFICIENCY)
    fa2 = layer_times(llama(), c, run(64), d, DEFAULT_EFFICIENCY.with_(attention_kernel="flash2"))
    assert float(fa2.attention_forward_s) == pytest.approx(
        float(fused.attention_forward_s) * 75 / 35)
    assert float(fa2.forward_s - fa2.attention_forward_s) == pytest.approx(
        float(fused.forward_s - fused.attention_forward_s))


def test_expandable_segments_let_tensors_fill_the_usable_hbm() -> None:
    """(capacity - context - NCCL) x 0.96 without, x 1 with expandable segments."""
    c = cluster(8)
    rest = c.gpu.hbm_capacity_bytes - DEFAULT_EFFICIENCY.reserved_bytes \
        - DEFAULT_EFFICIENCY.nccl_bytes
    assert float(hbm_usable_bytes(c, DEFAULT_EFFICIENCY)) == pytest.approx(0.96 * rest)
    expandable = DEFAULT_EFFICIENCY.with_(expandable_segments=True)
    assert float(hbm_usable_bytes(c, expandable)) == pytest.approx(rest)


def test_fsdp_resharding_unless_pipelined_keeps_weights_only_with_stages() -> None:
    """torchtitan's policy: a pipelined zero=3 plan runs as zero=1, an unpipelined one as
    zero=3."""
    c, r = cluster(8), run(64)
    policy = DEFAULT_EFFICIENCY.with_(reshard_after_forward="unless_pipelined")
    for pp, as_if in ((1, 3), (4, 1)):
        got = evaluate(gpt(), c, r, Plan(tp=1, pp=pp, zero=3), efficiency=policy)
        want = evaluate(gpt(), c, r, Plan(tp=1, pp=pp, zero=as_if), efficiency=DEFAULT_EFFICIENCY)
        assert float(got.step_time_s) == pytest.approx(float(want.step_time_s))


def test_offloaded_activations_leave_all_but_the_layer_in_transit() -> None:
    """20 of 80 layers offloaded, one micro-batch in flight (pp = 1): 19 layers' activations
    leave HBM; none without offloading; at most the stage's layers."""
    d = degrees(cluster(8), run(64), Plan(tp=1, pp=1))
    shape = stage_shape(llama(), d)
    assert float(offloaded_activation_bytes(np.float64(1e9), d, shape, 20)) == \
        pytest.approx(19e9)
    assert float(offloaded_activation_bytes(np.float64(1e9), d, shape, 0)) == 0.0
    assert float(offloaded_activation_bytes(np.float64(1e9), d, shape, 500)) == \
        pytest.approx(79e9)


def test_te_cross_entropy_keeps_only_the_16_bit_logits() -> None:
    """pp = 1, one micro-batch of 8192 tokens, vocabulary 128256: the fused kernel style's
    8 bytes per logit against Transformer Engine's 2 (gradient in place): 6 x T x V less."""
    c, r = cluster(8), run(8)
    plan = Plan(tp=1, pp=1, zero=3)
    megatron = evaluate(llama(layers=2), c, r, plan, efficiency=DEFAULT_EFFICIENCY)
    te = evaluate(llama(layers=2), c, r, plan,
                  efficiency=DEFAULT_EFFICIENCY.with_(cross_entropy="te"))
    saved = float(megatron.memory.buffers_bytes - te.memory.buffers_bytes)
    assert saved == pytest.approx(6 * 8192 * 128256)


def test_master_weight_remainders_take_two_bytes_of_a_bf16_weight() -> None:
    """Adam's fp32 state: master 4 + moments 8 = 12 bytes; with remainders 2 + 8 = 10; fp8
    weights keep the fp32 master."""
    eff = DEFAULT_EFFICIENCY.with_(master_weights="remainders")
    assert state_bytes("bf16", eff).optimizer == 10.0
    assert state_bytes("bf16", DEFAULT_EFFICIENCY).optimizer == 12.0
    assert state_bytes("fp8", eff).optimizer == 12.0


def test_blackwell_gemm_fractions_follow_the_cube_root_of_their_power_limits() -> None:
    """gb200 (1200 W) and gb300 (1400 W) sustain the B200's GEMM rate (1000 W, 2.25 PF at the
    fallback fraction 0.6) times (P / 1000 W)^(1/3), as a share of their 2.5 PF spec peak:
    0.6 x 2250/2500 x 1.2^(1/3) = 0.574 and 0.6 x 2250/2500 x 1.4^(1/3) = 0.604."""
    gpus = gpu_catalog()
    b200 = gpus["b200"]
    assert b200.gemm_fraction is None  # the B200 runs at FALLBACK_GEMM_FRACTION
    base = FALLBACK_GEMM_FRACTION * b200.peak_for("bf16")
    watts = {n: float(gpu_info()[n]["tdp"].split()[0]) for n in ("b200", "gb200", "gb300")}
    assert (watts["b200"], watts["gb200"], watts["gb300"]) == (1000.0, 1200.0, 1400.0)
    for name in ("gb200", "gb300"):
        gpu = gpus[name]
        expected = base * (watts[name] / watts["b200"]) ** (1 / 3) / gpu.peak_for("bf16")
        assert gpu.gemm_fraction == pytest.approx(expected, abs=5e-4)
    assert gpus["gb200"].gemm_fraction == pytest.approx(0.574, abs=5e-4)
    assert gpus["gb300"].gemm_fraction == pytest.approx(0.604, abs=5e-4)
