"""Per-op selective activation checkpointing (torchtitan's policy) as eager and compiled PyTorch
keep it, and DTensor tensor parallelism's gathered output-layer input: each against a hand
count (cost.transformer_memory.op_sac_bytes_per_token, head_input_bytes)."""

from __future__ import annotations

import pytest

from cost import DEFAULT_EFFICIENCY, Plan
from cost.degrees import degrees
from cost.transformer_memory import (
    activation_bytes_per_layer,
    activation_sizes,
    head_input_bytes,
    op_sac_bytes_per_token,
)
from tests.factories import cluster, gpt, run

H, F, KV = 4096, 14336, 1024  # Llama 3.1 8B: hidden, ffn, kv heads x head_dim
S = 8192


def llama8b(**overrides: object):  # type: ignore[no-untyped-def]
    fields = dict(layers=32, hidden=H, heads=32, kv_heads=8, ffn_hidden=F, vocab=128256,
                  seq_len=S, gated_mlp=True, dropout=False)
    return gpt(**{**fields, **overrides})


def _op(plan: Plan, *, keeps_unread: bool, **model: object) -> float:
    d = degrees(cluster(64), run(64), plan)
    return float(op_sac_bytes_per_token(llama8b(**model), d, act_bytes=2.0, input_bytes=2.0,
                                        ffn_hidden=F, keeps_unread=keeps_unread))


def test_compiled_drops_the_saved_output_no_backward_reads() -> None:
    """tp 1: eager keeps input, attention output, Q, V, gate and fc2 -- 2(h + h + h + kv + f
    + h) = 2(4h + kv + f) = 63,488 bytes per token for Llama 3.1 8B; compiled drops fc2's
    output (it feeds only the residual add): 2(3h + kv + f) = 55,296, 4 GiB less over 32
    layers of 16,384 tokens."""
    eager = _op(Plan(tp=1, pp=1, recompute=1), keeps_unread=True)
    compiled = _op(Plan(tp=1, pp=1, recompute=1), keeps_unread=False)
    assert eager == pytest.approx(2 * (4 * H + KV + F)) == pytest.approx(63488)
    assert compiled == pytest.approx(2 * (3 * H + KV + F)) == pytest.approx(55296)
    assert (eager - compiled) * 16384 * 32 == 4 * 2**30


def test_a_plain_mlp_saves_no_unread_output() -> None:
    """Six GEMMs (wq, wk, wv, wo, fc1, fc2): the odd ones are Q, V and fc1, all read by the
    backward, so eager and compiled keep the same 2(h + h + h + kv + f)."""
    eager = _op(Plan(tp=1, pp=1, recompute=1), keeps_unread=True, gated_mlp=False)
    compiled = _op(Plan(tp=1, pp=1, recompute=1), keeps_unread=False, gated_mlp=False)
    assert eager == compiled == pytest.approx(2 * (3 * H + KV + F))


def test_tensor_parallel_fc2_output_is_a_whole_partial_sum_and_scatters_are_saved() -> None:
    """tp 8 with sequence parallelism, eager: input h/8, attention output h/8, Q h/8, V kv/8,
    gate f/8, fc2's row-parallel output h (every rank's partial sum of all tokens), and the
    projection's and fc2's reduce-scatter outputs h/8 each, at 2 bytes; compiled keeps the
    first five only."""
    plan = Plan(tp=8, pp=1, recompute=1, sequence_parallel=True)
    eager = _op(plan, keeps_unread=True)
    compiled = _op(plan, keeps_unread=False)
    assert eager == pytest.approx(2 * ((3 * H + KV + F) / 8 + H + 2 * H / 8))
    assert compiled == pytest.approx(2 * (3 * H + KV + F) / 8)


def test_the_kernel_style_decides_what_is_kept() -> None:
    """activation_sizes reads the stack: eager keeps fc2's output (2h bytes for each of the
    8,192 tokens of a micro-batch), compiled not."""
    d = degrees(cluster(64), run(64), Plan(tp=1, pp=1, recompute=1))
    model = llama8b()
    per_layer = {}
    for kernels in ("eager", "compiled"):
        eff = DEFAULT_EFFICIENCY.with_(kernels=kernels, selective_recompute="op")
        per_layer[kernels] = float(activation_bytes_per_layer(model, d, **activation_sizes(
            run(64), eff)))
    assert per_layer["eager"] - per_layer["compiled"] == pytest.approx(2 * H * S)  # fc2 out


def test_no_recompute_keeps_the_whole_layer_whatever_the_selective_policy() -> None:
    """The op policy describes selective recompute only: a plan without recompute keeps
    every tensor, as under Megatron's policy."""
    d = degrees(cluster(64), run(64), Plan(tp=1, pp=1, recompute=0))
    sizes = dict(act_bytes=2.0, input_bytes=2.0, flash_attention=True)
    op = activation_bytes_per_layer(llama8b(), d, selective_policy="op", **sizes)
    attention = activation_bytes_per_layer(llama8b(), d, **sizes)
    assert float(op) == float(attention)


def test_dtensor_keeps_the_output_layers_input_gathered() -> None:
    """tp 8 with sequence parallelism, micro-batch 2: DTensor's ColwiseParallel saves the
    all-gathered input, 2 x 8,192 tokens x 4096 x 2 bytes = 128 MiB per GPU; Megatron keeps
    it sharded (left out), as does anything at tp 1 or without sequence parallelism."""
    def held(plan: Plan, gathered: bool) -> float:
        d = degrees(cluster(64), run(64), plan)
        return float(head_input_bytes(llama8b(), d, act_bytes=2.0, gathered_inputs=gathered))
    sp8 = Plan(tp=8, pp=1, micro_batch=2, sequence_parallel=True)
    assert held(sp8, True) == 2 * S * 2 * H == 128 * 2**20
    assert held(sp8, False) == 0.0
    assert held(Plan(tp=1, pp=1, micro_batch=2), True) == 0.0
    assert held(Plan(tp=8, pp=1, micro_batch=2, sequence_parallel=False), True) == 0.0


def test_dtensor_without_recompute_keeps_the_gemm_inputs_gathered() -> None:
    """No recompute, tp 8 with sequence parallelism: DTensor saves the QKV and fc1 inputs
    gathered, 2 x 2h bytes per token where Megatron keeps 2 x 2h / 8."""
    d = degrees(cluster(64), run(64), Plan(tp=8, pp=1, recompute=0, sequence_parallel=True))
    sizes = dict(act_bytes=2.0, input_bytes=2.0, flash_attention=True)
    gathered = activation_bytes_per_layer(llama8b(), d, gathered_inputs=True, **sizes)
    sharded = activation_bytes_per_layer(llama8b(), d, **sizes)
    assert float(gathered - sharded) / S == pytest.approx(2 * 2 * H * (1 - 1 / 8))
