"""Unit tests of the terms added for fidelity at scale (issue 12), each against a hand count."""

from __future__ import annotations

import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY, ClusterSpec, Plan, evaluate, model_flops_per_token
from cost.collectives import all_gather_s, group_link, reduce_scatter_s
from cost.degrees import degrees
from cost.kernels import gemm_shape_factor
from cost.memory import gathered_bytes
from cost.precision import state_bytes
from cost.schedule import launch_bound_s
from cost.transformer_memory import activation_bytes_per_layer
from cost.transformer_time import host_s
from cost.workload import Footprint, ParamGroup, StageCost, StateBytes
from search_spaces import gpu_catalog
from tests.factories import cluster, gpt, run

H, F, KV = 8192, 28672, 1024  # Llama 3 70B: hidden, ffn, kv heads x head_dim


def llama(**overrides: object):  # type: ignore[no-untyped-def]
    fields = dict(layers=80, hidden=H, heads=64, kv_heads=8, ffn_hidden=F, vocab=128256,
                  seq_len=8192, gated_mlp=True, dropout=False)
    return gpt(**{**fields, **overrides})


def per_token(model, *, act: float, q: float, tp: int = 1, sp: bool = False) -> float:  # type: ignore[no-untyped-def]
    d = degrees(cluster(8), run(64), Plan(tp=tp, pp=1, sequence_parallel=sp))
    total = activation_bytes_per_layer(model, d, act_bytes=act, input_bytes=q,
                                       flash_attention=True)
    return float(total) / model.seq_len


def test_a_llama_layer_stores_its_tensors_and_no_dropout_masks() -> None:
    """bf16, no tp: norm inputs 2·2h, GEMM inputs 2·2h; Q, K, V 2(h + 2kv), attention output
    2h; SwiGLU input 2·2f, fc2 input 2f."""
    expected = 8 * H + 2 * (H + 2 * KV) + 2 * H + 4 * F + 2 * F
    assert per_token(llama(), act=2, q=2) == pytest.approx(expected)


def test_fp8_keeps_one_byte_copies_of_the_gemm_inputs() -> None:
    """fp8: QKV and fc1 inputs 1 byte, a 1-byte copy of the projection input beside the
    attention output, a 1-byte fc2 input."""
    expected = (4 * H + 2 * H) + 2 * (H + 2 * KV) + 2 * H + H + 4 * F + F
    assert per_token(llama(), act=2, q=1) == pytest.approx(expected)


def test_dropout_adds_two_mask_bytes_per_hidden_element() -> None:
    assert per_token(llama(dropout=True), act=2, q=2) - per_token(llama(), act=2, q=2) \
        == pytest.approx(2 * H)


def test_state_bytes_follow_the_stack() -> None:
    eff = DEFAULT_EFFICIENCY
    assert state_bytes("bf16", eff) == StateBytes(weight=2, gradient=4, optimizer=12)
    assert state_bytes("fp8", eff) == StateBytes(weight=1, gradient=4, optimizer=12)
    assert state_bytes("bf16", eff.with_(params="fp32", main_grads="bf16")) == \
        StateBytes(weight=4, gradient=2, optimizer=8)


def test_a_micro_batch_waits_for_the_host_only_beyond_its_device_time() -> None:
    """host - device where positive: 3 s of launching for 2 s of work idles the GPU 1 s."""
    def stage(host: float) -> StageCost:
        z = np.float64(0.0)
        return StageCost(compute_s=np.float64(2.0), recompute_s=z, tp_comm_s=z, cp_comm_s=z,
                         forward_s=z, backward_s=z, bubble_unit_s=z, send_bytes=z,
                         host_s=host)
    assert float(launch_bound_s(stage(3.0))) == 1.0
    assert float(launch_bound_s(stage(1.0))) == 0.0


def test_the_waits_at_host_reads_are_not_added_to_a_host_bound_stage() -> None:
    """2 s of work, 0.5 s of waits at the host's reads of the GPU (dropless routing's token
    counts): launching in 3 s idles the GPU 1 s, whose waits are part of it (not 1.5 s);
    launching in 1 s still idles it 0.5 s at the reads. A faster GPU (1 s of work, its waits
    up to 0.5 s longer) never makes the stage's work and waits together longer."""
    def stage(host: float, device: float = 2.0, wait: float = 0.5) -> StageCost:
        z = np.float64(0.0)
        return StageCost(compute_s=np.float64(device), recompute_s=z, tp_comm_s=z,
                         cp_comm_s=z, forward_s=z, backward_s=z, bubble_unit_s=z,
                         send_bytes=z, host_s=host, host_wait_s=wait)
    assert float(launch_bound_s(stage(3.0))) == 1.0
    assert float(launch_bound_s(stage(1.0))) == 0.5
    for host in (1.0, 2.0, 3.0, 4.0):
        slow = 2.0 + float(launch_bound_s(stage(host)))
        fast = 1.0 + float(launch_bound_s(stage(host, device=1.0, wait=1.0)))
        assert fast <= slow, host


def test_host_time_counts_the_kernels_of_each_layer() -> None:
    """eager PyTorch, GELU MLP: (16 + 30) kernels per layer, plus 16 x the checkpoint factor
    under full recompute, at launch_s each."""
    eff = DEFAULT_EFFICIENCY.with_(kernels="eager", launch_s=1e-5)
    d = degrees(cluster(8), run(64), Plan(tp=8, pp=8, recompute=np.array([0.0, 2.0])))
    got = host_s(gpt(), d, eff, np.array([12.0, 12.0]))
    assert got[0] == pytest.approx(12 * 46 * 1e-5)
    assert got[1] == pytest.approx(12 * (46 + 16 * eff.checkpoint_host_factor) * 1e-5)
    assert float(np.max(host_s(gpt(), d, eff.with_(cuda_graphs=True), 12.0))) == 0.0


def test_an_fp8_gemm_needs_twice_the_extent_for_the_same_share_of_peak() -> None:
    assert gemm_shape_factor(512.0, 512.0, 512.0, 256.0 * 2) == pytest.approx((0.5) ** 3)


def test_fsdp_gathers_each_layer_apart_and_pays_its_latency_each_time() -> None:
    """ZeRO-3 traffic of one micro-batch of 8 layers with no compute to hide behind: per layer a
    gather before its forward and its backward and a reduce-scatter, each of 1/8 of the
    stage's bytes over the shard group's link (exposed in full)."""
    c = cluster(4)
    eff = DEFAULT_EFFICIENCY.with_(dp_overlap=0.0)
    report = evaluate(gpt(layers=8), c, run(32), Plan(tp=1, pp=1, zero=3), efficiency=eff)
    d = degrees(c, run(32), Plan(tp=1, pp=1, zero=3))
    link = group_link(c, stride=1.0, size=32.0, fraction=eff.network_fraction)
    weights = float(report.memory.weights_bytes) * 32 / 8
    grads = float(report.memory.gradients_bytes) * 32 / 8
    bw, lat = link.bandwidth_bytes_per_s, link.latency_s
    per_mb = 8 * (2 * all_gather_s(weights, 32.0, bw, lat) + reduce_scatter_s(grads, 32.0, bw,
                                                                                 lat))
    assert float(report.step.dp_comm_s) == pytest.approx(float(d.micro_batches * per_mb))


def test_fsdp_holds_two_gathered_layers_and_one_layer_of_gradient() -> None:
    held = Footprint(groups=(ParamGroup(params=np.float64(8e9), replicas=np.float64(64),
                                        stride=np.float64(1)),),
                     state=StateBytes(weight=4, gradient=4, optimizer=8),
                     resident_params=np.float64(2e8), activations_bytes=np.float64(0),
                     buffers_bytes=np.float64(0))
    d = degrees(cluster(8), run(64), Plan(zero=3))
    assert float(gathered_bytes(held, d)) == pytest.approx(2e8 * 2 + 1e8 * 4)


def test_a_hybrid_shard_divides_state_by_its_group_only() -> None:
    plan = Plan(tp=1, pp=1, zero=3, shard_group=np.array([0.0, 8.0]))
    report = evaluate(gpt(layers=8), cluster(8), run(64), plan)
    assert report.memory.optimizer_bytes[1] == pytest.approx(8 * report.memory.optimizer_bytes[0])
    assert bool(np.all(report.valid))


def test_a_group_straddling_two_nvl72_racks_leaves_the_nvlink_domain() -> None:
    """On 144 GB200 (two 72-GPU racks) a group of 8 lies inside a rack; a group of 16 does not
    always (72 is no multiple of 16); a job within one rack never leaves it."""
    gb200 = gpu_catalog()["gb200"]
    two_racks = ClusterSpec.of(gb200, nodes=36)
    up = float(two_racks.scale_up_bandwidth_bytes_per_s) * 0.8
    assert float(group_link(two_racks, stride=1, size=8, fraction=0.8)
                 .bandwidth_bytes_per_s) == pytest.approx(up)
    assert float(group_link(two_racks, stride=1, size=16, fraction=0.8)
                 .bandwidth_bytes_per_s) < up
    one_rack = ClusterSpec.of(gb200, nodes=16)
    assert float(group_link(one_rack, stride=1, size=16, fraction=0.8)
                 .bandwidth_bytes_per_s) == pytest.approx(up)


def test_a_data_parallel_group_shares_the_nics_of_its_whole_nvl72_rack() -> None:
    """A group with one member per 4-GPU tray but 9 per 72-GPU rack reaches 9 NICs' worth
    through NVLink (PXN), capped by the NVLink it is fed from."""
    gb200 = gpu_catalog()["gb200"]
    c = ClusterSpec.of(gb200, nodes=128)
    link = group_link(c, stride=8, size=64, fraction=1.0)
    assert float(link.bandwidth_bytes_per_s) == pytest.approx(
        min(9 * gb200.scale_out_bandwidth_bytes_per_s, gb200.scale_up_bandwidth_bytes_per_s))


def test_mfu_counts_causal_attention_as_computed_and_palm_counts_it_all() -> None:
    model = llama(seq_len=131072)
    report = evaluate(model, cluster(8), run(64), Plan(tp=8, pp=8))
    causal = model_flops_per_token(model)
    palm = model_flops_per_token(model, causal=False)
    assert palm - causal == pytest.approx(6 * 80 * H * 131072)
    assert float(report.mfu_palm) / float(report.mfu) == pytest.approx(palm / causal)


def test_a_launch_bound_pipeline_is_as_slow_as_its_fullest_stage() -> None:
    """30 layers on 8 stages count the embedding and the loss as a layer each: 4 layers a
    stage, 3 on the last, whose logits over a 256k vocabulary run longer than a layer (the
    last stage is the slowest on the device). Where launching kernels takes longer than
    running them (eager, 1 ms a kernel), the slowest stage is the one with 4 layers:
    its host time is 4 layers' (it was the last stage's 3 while stages were compared by device
    time only, so a slower layer could make the step faster)."""
    from cost.transformer_time import stage_cost, stage_shape

    model, c, t = gpt(layers=30, vocab=256000), cluster(8), run(64)
    d = degrees(c, t, Plan(tp=8, pp=8))
    shape = stage_shape(model, d)
    assert (float(shape.layers_per_stage), float(shape.last_stage_layers)) == (4.0, 3.0)
    assert float(stage_cost(model, c, t, d, DEFAULT_EFFICIENCY).units) == 3.0
    eff = DEFAULT_EFFICIENCY.with_(kernels="eager", launch_s=1e-3)
    stage = stage_cost(model, c, t, d, eff)
    assert float(stage.units) == 4.0
    assert float(stage.host_s) == pytest.approx(float(host_s(model, d, eff, np.float64(4.0))))
