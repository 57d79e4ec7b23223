"""Unit tests of PyTorch's context parallelism as torchtitan runs it (issue 12,
`stack.context_parallel: torch_allgather`), each against a hand count."""

from __future__ import annotations

import pytest

from cost import DEFAULT_EFFICIENCY, Plan
from cost.collectives import all_gather_s, group_link, p2p_s
from cost.degrees import degrees
from cost.transformer_time import layer_times, stage_shape
from tests.factories import cluster, gpt, run

H = 8192  # Llama 3 70B: 64 query heads x 128


def llama():  # type: ignore[no-untyped-def]
    return gpt(layers=80, hidden=H, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256,
               seq_len=32768, gated_mlp=True, dropout=False)


TORCH = DEFAULT_EFFICIENCY.with_(context_parallel="torch_allgather", attention_kernel="flash2")
MEGATRON = DEFAULT_EFFICIENCY.with_(attention_kernel="flash2")


def test_ring_merges_and_gradient_accumulation_stream_fp32_outputs_per_extra_step() -> None:
    """cp = 4, tp = 1: the slowest rank merges 3 partial outputs of T x h elements at 38 bytes
    each (forward) and accumulates 3 steps' gradients at 20 bytes each (backward), at the
    usable HBM rate (0.85 x the datasheet)."""
    c = cluster(8)
    d = degrees(c, run(64), Plan(tp=1, pp=1, cp=4))
    tokens = float(stage_shape(llama(), d).tokens_per_micro_batch)
    hbm = c.gpu.hbm_bandwidth_bytes_per_s * 0.85
    torch = layer_times(llama(), c, run(64), d, TORCH)
    megatron = layer_times(llama(), c, run(64), d, MEGATRON)
    assert float(torch.attention_forward_s - megatron.attention_forward_s) == pytest.approx(
        38 * 3 * tokens * H / hbm)
    assert float(torch.backward_s - megatron.backward_s) == pytest.approx(
        20 * 3 * tokens * H / hbm)


def test_the_allgather_of_repeated_keys_and_values_hides_only_behind_the_first_step() -> None:
    """tp = 8 inside a node, cp = 4 across nodes (the NIC): keys and values repeated to the 64
    query heads, 2 bytes x seq x 2h / tp per gather; each forward and the backward gather
    once, hidden behind 1/cp of the attention (backward 2.5x); 3 key/value gradient sends of
    a quarter of that, in fp32 (twice the bytes), behind a step's backward each. No recompute
    here."""
    c = cluster(32)
    d = degrees(c, run(64), Plan(tp=8, pp=1, cp=4))
    mb = float(d.mb)
    link = group_link(c, stride=8, size=4, fraction=DEFAULT_EFFICIENCY.network_fraction)
    kv = 2.0 * mb * 32768 * 2 * H / 8
    gather = float(all_gather_s(kv, 4, link.bandwidth_bytes_per_s, link.latency_s))
    send = float(p2p_s(kv / 4 * 2, link.bandwidth_bytes_per_s, link.latency_s))
    torch = layer_times(llama(), c, run(64), d, TORCH)
    step = float(torch.attention_forward_s) / 4
    expected = (max(gather - step, 0.0) + max(gather - 2.5 * step, 0.0)
                + 3 * max(send - 2.5 * step, 0.0))
    assert float(torch.cp_comm_s) == pytest.approx(expected)
    assert float(torch.cp_comm_s) > 0.0


def test_key_value_gradients_pass_around_the_ring_in_fp32() -> None:
    """tp = 8 inside a node, cp = 8 across nodes (A100 nodes, 25 GB/s NICs), so the gradient
    sends outlast a step's backward: 7 sends of 4 bytes x seq/cp x 2h/tp each (torch
    _templated_ring_attention_backward accumulates and sends them in fp32), less 2.5 x a
    step's forward attention each; the gathers as in the test above."""
    c = cluster(64)
    d = degrees(c, run(64), Plan(tp=8, pp=1, cp=8))
    link = group_link(c, stride=8, size=8, fraction=DEFAULT_EFFICIENCY.network_fraction)
    elements = float(d.mb) * 32768 / 8 * 2 * H / 8
    kv = 2.0 * 8 * elements
    gather = float(all_gather_s(kv, 8, link.bandwidth_bytes_per_s, link.latency_s))
    send = float(p2p_s(4.0 * elements, link.bandwidth_bytes_per_s, link.latency_s))
    torch = layer_times(llama(), c, run(64), d, TORCH)
    step = float(torch.attention_forward_s) / 8
    assert send > 2.5 * step
    expected = (max(gather - step, 0.0) + max(gather - 2.5 * step, 0.0)
                + 7 * (send - 2.5 * step))
    assert float(torch.cp_comm_s) == pytest.approx(expected)
