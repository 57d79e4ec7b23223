"""The mixture-of-experts workload: dispatch bytes by hand, a one-expert MoE is the dense model,
expert parallelism inside a node never touches the NIC, memory falls as ep grows, the rules."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from cost import (
    ClusterSpec,
    InvalidPlanError,
    MoEModelSpec,
    Plan,
    TrainingSpec,
    check_plan,
    evaluate,
    plan_violations,
)
from cost.degrees import degrees
from cost.efficiency import DEFAULT_EFFICIENCY
from cost.moe_time import dispatch_bytes
from tests.factories import a100, run, small_model

TOKENS = 1000.0


def moe(**overrides: Any) -> MoEModelSpec:
    fields: dict[str, Any] = dict(name="moe", layers=8, hidden=1024, heads=16, vocab=8000,
                                  seq_len=512, gated_mlp=True, experts=16, top_k=2,
                                  expert_ffn_hidden=512)
    return MoEModelSpec(**{**fields, **overrides})


def cluster(nodes: int = 4, **overrides: Any) -> ClusterSpec:
    return ClusterSpec.of(a100(), nodes=nodes, **overrides)


def _bytes(model: MoEModelSpec, c: ClusterSpec, *, dedup: bool, **plan: Any) -> tuple[float, ...]:
    d = degrees(c, TrainingSpec(global_batch=64), Plan(**plan))
    sent = dispatch_bytes(model, c, d, tokens=TOKENS, act_bytes=2.0,
                          eff=DEFAULT_EFFICIENCY.with_(ep_dedup=dedup))
    return float(sent.remote_bytes) / TOKENS, float(sent.local_bytes) / TOKENS


def test_dispatch_bytes_per_token_inside_a_node_by_hand() -> None:
    # 2 copies of a 1024-wide bf16 token (4096 bytes), 7 of 8 ranks elsewhere, all on NVLink
    remote, local = _bytes(moe(), cluster(), dedup=True, ep=8)
    assert remote == 0.0
    assert local == pytest.approx(2 * 1024 * 2 * 7 / 8)


def test_dispatch_bytes_per_token_across_nodes_by_hand() -> None:
    # ep=16 over two 8-GPU nodes: half the copies leave the node, 7/16 go to node peers
    remote, local = _bytes(moe(), cluster(), dedup=False, ep=16)
    assert remote == pytest.approx(2 * 2048 * 8 / 16)
    assert local == pytest.approx(2 * 2048 * 7 / 16)
    # deduplicated: the token crosses once to the other node when one of its 2 experts is
    # there: 1 - (8/16)(7/15) = 23/30; the copies are fanned out over NVLink (7/8 of them)
    remote, local = _bytes(moe(), cluster(), dedup=True, ep=16)
    assert remote == pytest.approx(2048 * (1 - (8 / 16) * (7 / 15)))
    assert local == pytest.approx(2 * 2048 * 7 / 8)


def test_group_limited_routing_crosses_to_fewer_domains() -> None:
    # 16 experts in 4 groups of 4, each token's 2 experts from 2 groups; ep=16 over two
    # nodes, each node holding 2 whole groups. The other node is missed when neither of its
    # groups is chosen (1/6), or one is (4/6) and both experts fall in the other chosen group
    # (4/8 * 3/7)
    grouped = moe(expert_groups=4, group_top_k=2)
    remote, _ = _bytes(grouped, cluster(), dedup=True, ep=16)
    miss = 1 / 6 + 4 / 6 * (4 / 8) * (3 / 7)
    assert remote == pytest.approx(2048 * (1 - miss))
    assert remote < _bytes(moe(), cluster(), dedup=True, ep=16)[0]


def test_dispatch_bytes_scale_with_imbalance_and_etp_stride() -> None:
    c = cluster()
    d = degrees(c, TrainingSpec(global_batch=64), Plan(ep=8, etp=2))
    sent = dispatch_bytes(moe(), c, d, tokens=TOKENS, act_bytes=2.0,
                          eff=DEFAULT_EFFICIENCY.with_(expert_imbalance=1.5))
    # ranks spaced 2 apart: 4 per node, 2 nodes; no dedup gain on the local share
    assert float(sent.local_bytes) / TOKENS == pytest.approx(1.5 * 4096 * 3 / 4)


def _dense_pair() -> tuple[Any, MoEModelSpec]:
    dense = small_model(layers=8, hidden=512, heads=8, gated_mlp=True, ffn_hidden=1536,
                        seq_len=256)
    single = MoEModelSpec(name="small", layers=8, hidden=512, heads=8, vocab=dense.vocab,
                          seq_len=256, gated_mlp=True, experts=1, top_k=1,
                          expert_ffn_hidden=1536)
    return dense, single


STACKS = [{}, {"cross_entropy": "te", "activation_offload_layers": 1},
          {"activation_offload_layers": 3, "reshard_after_forward": False}]


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("recompute", [0, 2])
def test_one_expert_top_1_is_the_dense_model(recompute: int, stack: dict[str, Any]) -> None:
    """Also under the stack's memory mechanisms (cross-entropy, offloaded activations,
    FSDP resharding), which the MoE footprint takes as the transformer's."""
    dense, single = _dense_pair()
    c = cluster(nodes=1)
    training = TrainingSpec(global_batch=32)
    plan = Plan(tp=1, pp=8, dp=1, micro_batch=np.array([1.0, 2.0, 4.0]), recompute=recompute,
                virtual_stages=np.array([1.0, 1.0, 1.0]))
    eff = DEFAULT_EFFICIENCY.with_(**stack)
    a = evaluate(dense, c, training, plan, efficiency=eff)
    b = evaluate(single, c, training, plan, efficiency=eff)
    for name, x in a.step.as_dict(0).items():
        assert b.step.as_dict(0)[name] == pytest.approx(x, rel=1e-9, abs=1e-12), name
    np.testing.assert_allclose(b.step_time_s, a.step_time_s, rtol=1e-9)
    for name, x in a.memory.as_dict(2).items():
        assert b.memory.as_dict(2)[name] == pytest.approx(x, rel=1e-9), name
    assert single.parameters() == dense.parameters()
    assert single.model_flops_per_step(training) == pytest.approx(
        dense.model_flops_per_step(training), rel=1e-12)


def test_expert_parallelism_inside_a_node_never_uses_the_nic() -> None:
    model, training = moe(), TrainingSpec(global_batch=64)
    plan = Plan(tp=1, pp=1, ep=np.array([2.0, 4.0, 8.0]), micro_batch=1)
    slow = evaluate(model, cluster(scale_out_bandwidth_bytes_per_s=1e3), training, plan)
    fast = evaluate(model, cluster(scale_out_bandwidth_bytes_per_s=1e12), training, plan)
    np.testing.assert_array_equal(slow.step.ep_comm_s, fast.step.ep_comm_s)
    across = Plan(tp=1, pp=1, ep=16, micro_batch=1)
    assert (evaluate(model, cluster(scale_out_bandwidth_bytes_per_s=1e9), training, across)
            .step.ep_comm_s > evaluate(model, cluster(), training, across).step.ep_comm_s)


def test_fp8_expert_casts_by_hand() -> None:
    # delayed scaling moves 4 bytes per element quantised (read 2, write the fp8 copy and its
    # transpose); forward: each routed copy's 512-wide second-GEMM input and its 1024-wide
    # permuted input; backward: the gated first GEMM's 2 x 512 output gradient and the copy's
    # 1024-wide gradient
    from cost.moe_time import _expert_fp8_casts_s

    c = cluster()
    d = degrees(c, TrainingSpec(global_batch=64), Plan(ep=8))
    hbm = c.gpu.hbm_bandwidth_bytes_per_s * DEFAULT_EFFICIENCY.hbm_fraction
    forward, backward = _expert_fp8_casts_s(moe(), TrainingSpec(global_batch=64, precision="fp8"),
                                            d, DEFAULT_EFFICIENCY, routed=np.float64(TOKENS),
                                            hbm_bytes_per_s=c.gpu.hbm_bandwidth_bytes_per_s)
    assert float(forward) == pytest.approx(4.0 * TOKENS * (512 + 1024) / hbm)
    assert float(backward) == pytest.approx(4.0 * TOKENS * (2 * 512 + 1024) / hbm)
    bf16 = _expert_fp8_casts_s(moe(), TrainingSpec(global_batch=64), d, DEFAULT_EFFICIENCY,
                               routed=np.float64(TOKENS), hbm_bytes_per_s=1.0)
    assert float(bf16[0]) == float(bf16[1]) == 0.0


def test_dropless_sync_leaves_the_gpu_waiting_for_the_host() -> None:
    # fused kernels: 11 of the dense layer, 40 of routing, 2 GEMMs per local expert (16 / 8)
    from cost.moe_time import sync_wait_s

    d = degrees(cluster(), TrainingSpec(global_batch=64), Plan(ep=8))
    launch = DEFAULT_EFFICIENCY.launch_s
    host = (11 + 40 + 2 * 2) * launch
    assert float(sync_wait_s(moe(), d, DEFAULT_EFFICIENCY, device_s=np.float64(0.0),
                             precision="bf16")) == \
        pytest.approx(host)
    assert float(sync_wait_s(moe(), d, DEFAULT_EFFICIENCY, device_s=np.float64(1.0),
                             precision="bf16")) == 0.0
    graphs = DEFAULT_EFFICIENCY.with_(cuda_graphs=True)
    assert float(sync_wait_s(moe(), d, graphs, device_s=np.float64(0.0),
                             precision="bf16")) == 0.0
    one = moe(experts=1, top_k=1)
    assert float(sync_wait_s(one, d, DEFAULT_EFFICIENCY, device_s=np.float64(0.0),
                             precision="bf16")) == 0.0


def test_fp8_expert_quantisation_kernels_by_hand() -> None:
    # Transformer Engine's split_quantize: 2 calls forward (fc1, fc2 inputs) and 2 backward
    # (their output gradients); 2 local experts (16 / 8). MXFP8 and blockwise: 1 kernel per
    # expert and call; current scaling 3 (amax, scale, cast); delayed: 1 fused kernel per call
    from cost.moe_time import _routing_host_s, quantize_kernels, sync_wait_s

    def recipe(name: str) -> Any:
        return DEFAULT_EFFICIENCY.with_(fp8_recipe=name)

    assert float(quantize_kernels("fp8", recipe("mxfp8"), 2.0)) == 2 * 2 * 1
    assert float(quantize_kernels("fp8", recipe("blockwise"), 2.0)) == 2 * 2 * 1
    assert float(quantize_kernels("fp8", recipe("current"), 2.0)) == 2 * 2 * 3
    assert float(quantize_kernels("fp8", recipe("delayed"), 2.0)) == 2 * 1
    assert float(quantize_kernels("bf16", recipe("mxfp8"), 2.0)) == 0.0
    d = degrees(cluster(), TrainingSpec(global_batch=64), Plan(ep=8))
    launch = DEFAULT_EFFICIENCY.launch_s
    # forward: 11 dense, 40 routing, 2 GEMMs per local expert, 2 x 2 quantisations
    wait = sync_wait_s(moe(), d, recipe("mxfp8"), device_s=np.float64(0.0), precision="fp8")
    assert float(wait) == pytest.approx((11 + 40 + 2 * 2 + 2 * 2) * launch)
    # per layer: 40 + 22 routing, 6 GEMMs per local expert, (2 + 2) x 2 x 3 current scaling
    host = _routing_host_s(moe(), d, recipe("current"), 3.0, precision="fp8")
    assert float(host) == pytest.approx(3 * (40 + 22 + 6 * 2 + 4 * 2 * 3) * launch)
    graphs = recipe("mxfp8").with_(cuda_graphs=True)
    assert float(_routing_host_s(moe(), d, graphs, 3.0, precision="fp8")) == 0.0


def test_all_to_alls_hide_behind_the_paired_pass_only() -> None:
    # no pipeline, 256 / 16 ranks = 16 micro-batches: 15 of 16 forwards have a partner. The
    # forward's 1 s of all-to-all hides behind the paired 4 s backward; the backward's 3 s
    # behind the paired 2 s forward only, leaving 1 s (+ 15% of what hides) on that share
    from cost.moe_time import paired_exposed_parts_s

    d = degrees(cluster(nodes=2), TrainingSpec(global_batch=256), Plan(ep=16, micro_batch=1))
    eff = DEFAULT_EFFICIENCY.with_(ep_overlap=1.0, overlap_slowdown=0.15)
    share = 15 / 16
    exposed = sum(paired_exposed_parts_s(
        forward_comm_s=np.float64(1.0), backward_comm_s=np.float64(3.0),
        forward_s=np.float64(2.0), backward_s=np.float64(4.0), d=d, eff=eff))
    hidden = min(share * 1.0, 4.0) + min(share * 3.0, 2.0)
    assert float(exposed) == pytest.approx(4.0 - hidden + 0.15 * hidden)


@pytest.mark.parametrize(("plan", "megatron", "dualpipe"), [
    ({"ep": 16, "pp": 1, "vs": 1, "recompute": 0}, 1.0, 1.0),
    ({"ep": 16, "pp": 2, "vs": 1, "recompute": 0}, 0.0, 1.0),  # no interleaving
    ({"ep": 16, "pp": 2, "vs": 2, "recompute": 1}, 1.0, 1.0),
    ({"ep": 16, "pp": 1, "vs": 1, "recompute": 2}, 0.0, 1.0),  # full recompute
    ({"ep": 1, "pp": 1, "vs": 1, "recompute": 0}, 0.0, 0.0),  # nothing to overlap
])
def test_which_plans_the_schedule_overlaps(plan: dict[str, int], megatron: float,
                                           dualpipe: float) -> None:
    """Megatron-Core's TransformerConfig asserts (core_v0.15.0 transformer_config.py
    1441-1480); DualPipe needs expert parallelism only."""
    from cost.moe_time import overlap_refusal, overlap_runs

    d = degrees(cluster(nodes=4), TrainingSpec(global_batch=256),
                Plan(ep=plan["ep"], pp=plan["pp"], virtual_stages=plan["vs"],
                     recompute=plan["recompute"], micro_batch=1))
    for schedule, expected in (("megatron", megatron), ("dualpipe", dualpipe)):
        eff = DEFAULT_EFFICIENCY.with_(ep_overlap_schedule=schedule)
        assert float(overlap_runs(d, eff)) == expected
        why = overlap_refusal(ep=plan["ep"], pp=plan["pp"], virtual_stages=plan["vs"],
                              recompute=plan["recompute"], mtp_layers=0, schedule=schedule)
        assert (why is None) is (expected == 1.0)
    assert float(overlap_runs(d, DEFAULT_EFFICIENCY, mtp_layers=2)) == 0.0
    assert overlap_refusal(ep=16, pp=1, virtual_stages=1, recompute=0, mtp_layers=2) == \
        "it allows one multi-token-prediction layer at most"


def test_a_plan_megatron_cannot_overlap_hides_nothing() -> None:
    """With pp 2 and no virtual stages the exposed all-to-all is the whole of it, overlap
    asked or not; with two virtual stages the overlap hides some."""
    from cost.moe_time import paired_exposed_parts_s

    eff = DEFAULT_EFFICIENCY.with_(ep_overlap=1.0)
    for vs, hides in ((1, False), (2, True)):
        d = degrees(cluster(nodes=4), TrainingSpec(global_batch=256),
                    Plan(ep=16, pp=2, virtual_stages=vs, micro_batch=1))
        exposed = sum(paired_exposed_parts_s(
            forward_comm_s=np.float64(1.0), backward_comm_s=np.float64(3.0),
            forward_s=np.float64(2.0), backward_s=np.float64(4.0), d=d, eff=eff))
        assert (float(exposed) < 4.0) is hides


def test_routed_activations_by_hand() -> None:
    # per routed copy: the permuted 1024-wide input, the gated 2 x 512 first-GEMM output
    # (bf16) and the 512-wide second-GEMM input; fp8 keeps both GEMM inputs in one byte;
    # selective recompute (moe_act) drops the second GEMM's input
    from cost.moe_memory import routed_activation_bytes

    copies = 512 * 2  # one micro-batch of 512 tokens, top 2
    for recompute, second in ((0, 512), (1, 0)):
        d = degrees(cluster(), TrainingSpec(global_batch=64),
                    Plan(ep=8, micro_batch=1, recompute=recompute))
        bf16 = routed_activation_bytes(moe(), d, act_bytes=2.0, input_bytes=2.0, imbalance=1.0)
        fp8 = routed_activation_bytes(moe(), d, act_bytes=2.0, input_bytes=1.0, imbalance=1.0)
        assert float(bf16) == pytest.approx(copies * (2 * 1024 + 2 * 2 * 512 + 2 * second))
        assert float(fp8) == pytest.approx(copies * (1024 + 2 * 2 * 512 + second))


def test_memory_per_gpu_falls_as_ep_grows() -> None:
    model, training = moe(), TrainingSpec(global_batch=64)
    eps = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    report = evaluate(model, cluster(), training, Plan(ep=eps, zero=1, micro_batch=1))
    total = report.memory.total_bytes
    assert np.all(np.diff(total) < 0)
    assert np.all(np.diff(report.memory.weights_bytes) < 0)


def test_expert_states_shard_over_expert_data_parallel_ranks() -> None:
    model, training = moe(), TrainingSpec(global_batch=64)
    one = evaluate(model, cluster(), training, Plan(ep=4, zero=0, micro_batch=1))
    sharded = evaluate(model, cluster(), training, Plan(ep=4, zero=1, micro_batch=1))
    assert float(sharded.memory.optimizer_bytes) < float(one.memory.optimizer_bytes) / 4


def test_model_flops_count_active_parameters() -> None:
    model = moe(experts=64, top_k=4)
    wide = replace(model, top_k=8)
    training = TrainingSpec(global_batch=1)
    expert = 3 * 1024 * 512  # weights of one gated expert (no expert_bias)
    per_token = (wide.model_flops_per_step(training)
                 - model.model_flops_per_step(training)) / model.seq_len
    assert per_token == pytest.approx(6 * 4 * expert * model.layers)
    assert model.active_parameters() < model.parameters()


def test_rules_refuse_ep_that_does_not_divide_the_experts_or_fold() -> None:
    training = TrainingSpec(global_batch=64)
    with pytest.raises(InvalidPlanError, match="does not divide experts=16"):
        check_plan(moe(), cluster(), training, Plan(ep=3))
    with pytest.raises(InvalidPlanError, match="ep·etp"):
        check_plan(moe(), cluster(nodes=1), training, Plan(tp=1, dp=4, pp=2, ep=8))
    with pytest.raises(InvalidPlanError, match="sequence_parallel"):
        check_plan(moe(), cluster(), training, Plan(tp=2, ep=2))
    with pytest.raises(InvalidPlanError, match="do not apply"):
        check_plan(small_model(), cluster(), training, Plan(ep=2))
    check_plan(moe(), cluster(), training, Plan(tp=2, sequence_parallel=True, ep=16))


def test_a_layout_that_does_not_fill_the_cluster_is_said_before_the_expert_fold() -> None:
    """tp·pp·cp = 12 on 8 GPUs leaves dp = 2/3: that is the problem to name first, not an
    expert fold into "tp·cp·dp = 2.66667" ranks that only follows from it."""
    with pytest.raises(InvalidPlanError) as err:
        check_plan(moe(), cluster(nodes=1), TrainingSpec(global_batch=64),
                   Plan(tp=4, pp=3, ep=8, sequence_parallel=True))
    assert err.value.violations[0].startswith("tp·pp·cp = 12 does not divide the 8 GPUs")
    assert not any("ep·etp" in v for v in err.value.violations)


def test_layouts_of_any_chunk_size_up_to_layers_plus_two() -> None:
    training = TrainingSpec(global_batch=64)
    model = moe(layers=7)
    check_plan(model, cluster(nodes=1), training, Plan(pp=4, ep=2))  # 2, 2, 2, 1
    check_plan(model, cluster(nodes=1), training, Plan(pp=8, ep=1, micro_batch=1))
    with pytest.raises(InvalidPlanError, match="layers \\+ 2"):
        check_plan(model, cluster(nodes=2), training, Plan(pp=16, micro_batch=1))


def test_catalog_counts_match_the_published_totals() -> None:
    from search_spaces import model_catalog

    published = {"deepseek-v3": 671e9, "qwen3-30b-a3b": 30.5e9, "qwen3-235b-a22b": 235e9,
                 "gpt-oss-20b": 20.91e9, "gpt-oss-120b": 116.83e9, "mixtral-8x7b": 46.7e9,
                 "mixtral-8x22b": 141e9}
    for name, total in published.items():
        assert math.isclose(model_catalog()[name].parameters(), total, rel_tol=0.005), name


def test_offloaded_expert_tensors_leave_all_but_the_layer_in_transit() -> None:
    """Fine-grained offloading by hand: pp = 1, one micro-batch of 512 tokens, top-2: 1024
    routed copies per layer; expert_fc1's input 2 x 1024 bytes a copy, moe_act's input (the
    gated first GEMM's output) 2 x 2 x 512 bytes: 2 MiB a module and layer, taken from 7 of the
    8 layers; full recompute keeps neither."""
    model, c, training = moe(), cluster(nodes=1), TrainingSpec(global_batch=8)
    plan = Plan(tp=1, pp=1, ep=8, micro_batch=1)

    def activations(*modules: str, recompute: int = 0) -> float:
        eff = DEFAULT_EFFICIENCY.with_(offload_modules=modules)
        run = evaluate(model, c, training, replace(plan, recompute=recompute), efficiency=eff)
        return float(run.memory.activations_bytes)

    none = activations()
    assert none - activations("expert_fc1") == pytest.approx(7 * 1024 * 2048)
    assert none - activations("expert_fc1", "moe_act") == pytest.approx(7 * 1024 * 4096)
    assert activations("moe_act", recompute=2) == activations(recompute=2)


def test_whole_layers_offloaded_do_not_offload_their_expert_tensors_again() -> None:
    """Fine-grained offloading beside whole-layer offloading: a routed tensor already on the
    host is not taken out of HBM a second time with its layer. With every layer of the stage
    offloaded whole (the one in transit kept), offloading expert_fc1 and moe_act as well
    frees nothing more; before, their 2 x 7 MiB were subtracted twice and a plan's saved
    activations could come out negative."""
    model, c, training = moe(), cluster(nodes=1), TrainingSpec(global_batch=8)
    plan = Plan(tp=1, pp=1, ep=8, micro_batch=1)

    def activations(*modules: str, layers: int = 0) -> float:
        eff = DEFAULT_EFFICIENCY.with_(offload_modules=modules, activation_offload_layers=layers)
        return float(evaluate(model, c, training, plan, efficiency=eff).memory.activations_bytes)

    whole = activations(layers=8)
    assert activations("expert_fc1", "moe_act", layers=8) == pytest.approx(whole)
    assert whole > 0
    partly = activations(layers=4)  # 3 layers offloaded whole; modules of the other 4 as well
    assert partly - activations("expert_fc1", layers=4) == pytest.approx(4 * 1024 * 2048)


def test_tp_must_divide_the_widths_it_splits_in_a_mixture_of_experts() -> None:
    """tp splits the dense layers' MLP and the shared experts (Megatron-Core's
    SharedExpertMLP is a tensor-parallel MLP); etp the routed experts. A dense width with no
    dense layer is not read."""
    plan = Plan(tp=4, pp=1, ep=4, sequence_parallel=True)
    shared = moe(shared_experts=3, expert_ffn_hidden=510)  # 1530 over tp 4
    (msg,) = [m for m in plan_violations(shared, cluster(), run(64), plan) if "shared" in m]
    assert "shared_experts x expert_ffn_hidden=1530" in msg and "[1, 2]" in msg
    dense = moe(dense_layers=1, ffn_hidden=4098)
    assert any("ffn_hidden=4098" in m for m in plan_violations(dense, cluster(), run(64), plan))
    assert plan_violations(moe(ffn_hidden=4098), cluster(), run(64), plan) == []
