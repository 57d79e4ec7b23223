"""Clusters of several GPU types: a pool alone is its own cluster, CM-DARE's mixed workers
follow from the single-type rates, batch shares balance, the slowest link bounds the
reduction, a pipeline across pools gives the faster GPUs more layers."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pytest

from cost import (
    DEFAULT_EFFICIENCY,
    SYNC,
    ClusterSpec,
    MixedCluster,
    MoEModelSpec,
    Plan,
    TrainingSpec,
    evaluate,
    plan_result,
)
from cost.codec import Placement, Shares, encode
from cost.degrees import degrees
from cost.hetero_dp import data_parallel
from cost.pools import MixedStep
from cost.sync import server_service_s
from cost.validity import rules
from search_spaces import gpu_catalog, model_catalog
from search_spaces.networks import network_catalog
from tests.factories import small_model

CMDARE = network_catalog()["resnet-32-t2t"]
PS = float(SYNC.index("parameter_server"))
SERVER_BW = 1e9  # 8 Gbit/s


def vm(gpu: str, workers: int) -> ClusterSpec:
    """Google Cloud VMs of one GPU each (CM-DARE): 16 Gbit/s workers, 8 Gbit/s servers."""
    return ClusterSpec.of(gpu_catalog()[gpu], nodes=workers, gpus_per_node=1,
                          scale_up_domain_gpus=1, scale_out_bandwidth_bytes_per_s=2e9,
                          parameter_server_bandwidth_bytes_per_s=SERVER_BW)


def mix(*pools: ClusterSpec, inter: float = 2e9) -> MixedCluster:
    return MixedCluster(pools=pools, names=tuple(c.gpu.name for c in pools),
                        inter_pool_bandwidth_bytes_per_s=inter)


def images_per_s(cluster: ClusterSpec | MixedCluster, servers: int = 1) -> float:
    training = TrainingSpec(global_batch=int(128 * cluster.gpus), precision="fp32")
    plan = Plan(micro_batch=128, sync=PS, parameter_servers=servers)
    return float(evaluate(CMDARE, cluster, training, plan).tokens_per_s)


def test_a_pool_alone_is_its_own_cluster() -> None:
    a100, h100 = (ClusterSpec.of(gpu_catalog()[g], nodes=1) for g in ("a100-80gb", "h100-80gb"))
    training = TrainingSpec(global_batch=16, precision="bf16")
    plan = Plan(tp=np.array([1.0, 2.0, 4.0]), micro_batch=2.0)
    alone = evaluate(small_model(), a100, training, plan)
    mixed = evaluate(small_model(), mix(a100, replace(h100, nodes=0)), training, plan)
    for f in fields(alone.step):
        np.testing.assert_allclose(getattr(mixed.step, f.name), getattr(alone.step, f.name))
    np.testing.assert_allclose(mixed.memory.total_bytes, alone.memory.total_bytes)
    assert float(np.ravel(mixed.price.cost_per_hour_usd)[0]) == pytest.approx(
        float(np.ravel(alone.price.cost_per_hour_usd)[0]))


def _single_worker_think_s(gpu: str, service: float) -> float:
    """A worker's own cycle (compute, push, pull) from its single-worker rate: one worker
    alone waits for no other, so its step is Z + S exactly."""
    return 128.0 / images_per_s(vm(gpu, 1)) - service


def test_cm_dare_mixed_workers_follow_from_the_single_type_rates() -> None:
    """One K80 and one P100 worker at one server: the two-class mean value analysis by hand
    from the single-type rates. Each worker's own cycle Z comes from its rate alone
    (128 / (Z + S)); at the shared server each sees the other's queue X R less half the
    other's residual service X S / 2: R = S (1 + X' R' - X' S / 2), X = 1 / (Z + R)."""
    nbytes = CMDARE.params * 4.0
    service = float(server_service_s(nbytes, 1.0, server_bw=SERVER_BW * 0.8,
                                     eff=DEFAULT_EFFICIENCY))
    z_k, z_p = _single_worker_think_s("k80", service), _single_worker_think_s("p100", service)
    r_k = r_p = service
    for _ in range(100):
        x_k, x_p = 1.0 / (z_k + r_k), 1.0 / (z_p + r_p)
        r_k, r_p = (service * (1.0 + x_p * r_p - 0.5 * x_p * service),
                    service * (1.0 + x_k * r_k - 0.5 * x_k * service))
    expected = 128.0 * (1.0 / (z_k + r_k) + 1.0 / (z_p + r_p))
    got = images_per_s(mix(vm("k80", 1), vm("p100", 1)))
    assert got == pytest.approx(expected, rel=1e-6)
    assert got < images_per_s(vm("k80", 1)) + images_per_s(vm("p100", 1))  # one server


def test_a_busy_server_caps_the_mix_and_an_idle_one_adds_the_rates() -> None:
    many = mix(vm("v100-16gb", 32), vm("p100", 32))
    nbytes = CMDARE.params * 4.0
    service = float(server_service_s(nbytes, 1.0, server_bw=SERVER_BW * 0.8,
                                     eff=DEFAULT_EFFICIENCY))
    assert images_per_s(many) == pytest.approx(128.0 / service, rel=0.02)
    fast = DEFAULT_EFFICIENCY.with_(ps_update_s=0.0, ps_bytes_per_s=1e15)
    training = TrainingSpec(global_batch=128 * 3, precision="fp32")
    plan = Plan(micro_batch=128, sync=PS, parameter_servers=1)
    wide = [replace(vm(g, n), parameter_server_bandwidth_bytes_per_s=1e15)
            for g, n in (("k80", 1), ("v100-16gb", 2))]
    together = float(evaluate(CMDARE, mix(*wide), training, plan, efficiency=fast)
                     .tokens_per_s)
    parts = [float(evaluate(CMDARE, c, TrainingSpec(global_batch=128 * int(c.gpus),
                                                     precision="fp32"), plan,
                            efficiency=fast).tokens_per_s) for c in wide]
    assert together == pytest.approx(sum(parts), rel=1e-3)


def _data_plan(shares: str, **knobs: float) -> Plan:
    return Plan(tp=8.0, micro_batch=1.0, placement=float(encode("placement", ["data"])[0]),
                batch_shares=float(encode("batch_shares", [shares])[0]), **knobs)


def _both(model: object, cluster: MixedCluster, training: TrainingSpec, plan: Plan
          ) -> MixedStep:
    """The plan run on both pools, whole replicas on each (not the fastest way: that may
    leave one idle)."""
    both = cluster.using((0, 1))
    return data_parallel(model, both, training, degrees(both, training, plan),  # type: ignore[arg-type]
                         DEFAULT_EFFICIENCY)


def test_balanced_shares_give_the_faster_pool_more_and_finish_together() -> None:
    a100, h100 = (ClusterSpec.of(gpu_catalog()[g], nodes=1) for g in ("a100-80gb", "h100-80gb"))
    cluster = mix(a100, h100)
    model = small_model(hidden=2048, heads=16, layers=8, seq_len=4096)
    training = TrainingSpec(global_batch=64)
    balanced = _both(model, cluster, training, _data_plan("balanced"))
    equal = _both(model, cluster, training, _data_plan("equal"))
    assert float(balanced.step.total_s) < float(equal.step.total_s)
    owned, rented = balanced.pools
    m_owned, m_rented = float(owned.micro_batches), float(rented.micro_batches)
    assert m_rented > m_owned and m_owned + m_rented >= 64
    per_micro_batch = max(float(owned.busy_s) / m_owned, float(rented.busy_s) / m_rented)
    assert abs(float(owned.busy_s) - float(rented.busy_s)) <= per_micro_batch
    assert float(balanced.bottleneck) in (0.0, 1.0)
    assert [float(u.micro_batches) for u in equal.pools] == [32.0, 32.0]


def test_balanced_shares_make_the_batch_and_no_more() -> None:
    """Llama 3 70B, tp 4 pp 4, on 16 H100 and 8 B200 nodes: at the balanced step time the
    H100s' 8 replicas fit 62 micro-batches and the B200s' 4 fit 133, 1,028 samples for a batch
    of 1,024, which tuner evaluate showed and the exports' notes told a user to launch. Each
    plan's replicas now do the batch exactly where a pool can give back whole micro-batches
    (here 132 on the B200s); the step is not longer for it."""
    h100, b200 = (ClusterSpec.of(gpu_catalog()[g], nodes=n) for g, n in (("h100-80gb", 16),
                                                                          ("b200", 8)))
    cluster = mix(h100, b200, inter=50e9)
    model = model_catalog()["llama3-70b"]
    training = TrainingSpec(global_batch=1024)
    plan = Plan(tp=np.array([4.0, 8.0, 2.0, 4.0]), pp=np.array([4.0, 2.0, 4.0, 2.0]),
                micro_batch=np.array([1.0, 1.0, 1.0, 2.0]), sequence_parallel=1.0, zero=1.0,
                placement=float(encode("placement", ["data"])[0]),
                batch_shares=float(encode("batch_shares", [Shares.BALANCED])[0]))
    step = _both(model, cluster, training, plan)
    d = degrees(cluster.using((0, 1)), training, plan)
    samples = sum(np.broadcast_to(u.replicas * u.micro_batches, d.shape) for u in step.pools)
    assert np.all(samples * d.mb == 1024), samples
    assert [float(np.ravel(u.micro_batches)[0]) for u in step.pools] == [62.0, 132.0]
    assert float(np.ravel(step.pools[1].busy_s)[0]) < float(np.ravel(step.pools[0].busy_s)[0])


def test_replicas_that_cannot_give_back_a_whole_micro_batch_each_do_one_fewer() -> None:
    """Llama 3 8B on 5 A100 and 8 H100, one replica a GPU, a batch of 256: at the balanced step
    the A100s' 5 replicas fit 10 micro-batches and the H100s' 8 fit 26, 258 for 256, and
    neither pool can give one back on every replica. evaluate showed 5 x 10 and its share of
    258; now 2 of the A100 replicas (the busier pool, which has replicas enough) do 9: the
    pools do 256 between them, the shares add up to the batch, the step is unchanged."""
    a100 = ClusterSpec.of(gpu_catalog()["a100-80gb"], nodes=1, gpus_per_node=5)
    h100 = ClusterSpec.of(gpu_catalog()["h100-80gb"], nodes=1)
    cluster = mix(a100, h100, inter=50e9)
    training = TrainingSpec(global_batch=256)
    plan = Plan(tp=1.0, micro_batch=1.0, recompute=2.0, zero=1.0,
                placement=float(encode("placement", ["data"])[0]),
                batch_shares=float(encode("batch_shares", [Shares.BALANCED])[0]))
    step = _both(model_catalog()["llama3-8b"], cluster, training, plan)
    owned, rented = step.pools
    assert (float(owned.micro_batches), float(rented.micro_batches)) == (10.0, 26.0)
    assert (float(owned.fewer), float(rented.fewer)) == (2.0, 0.0)
    done = sum(float(u.replicas * u.micro_batches - u.fewer) for u in step.pools)
    assert done == 256.0
    assert float(owned.share) == pytest.approx(48 / 256)
    assert float(owned.share + rented.share) == pytest.approx(1.0)
    assert float(owned.busy_s) >= float(rented.busy_s)  # the step is the 10s' time


def test_launch_bound_replicas_run_at_the_hosts_pace_on_any_gpu() -> None:
    """Micro-batches of 128 tokens at tp=8 take less time on either GPU than launching their
    kernels: both pools wait for the same host, so balanced shares are the equal ones."""
    a100, h100 = (ClusterSpec.of(gpu_catalog()[g], nodes=1) for g in ("a100-80gb", "h100-80gb"))
    model, training = small_model(hidden=2048, heads=16, layers=8), TrainingSpec(global_batch=64)
    balanced = _both(model, mix(a100, h100), training, _data_plan("balanced"))
    assert float(balanced.step.launch_s) > float(balanced.step.compute_s)
    assert [float(u.micro_batches) for u in balanced.pools] == [32.0, 32.0]


def test_a_launch_bound_pipeline_across_pools_splits_the_layers_evenly() -> None:
    """Where launching a layer's kernels takes longer than running them on either GPU, each
    stage holds the host's pace: the split is even and the wait is the step's launch term
    (as cost.schedule.launch_bound_s on one GPU type); large layers split by speed."""
    a100, h100 = (ClusterSpec.of(gpu_catalog()[g], nodes=1) for g in ("a100-80gb", "h100-80gb"))
    cluster = mix(a100, h100, inter=50e9).using((0, 1))
    training = TrainingSpec(global_batch=32)
    plan = Plan(tp=8.0, pp=2.0, micro_batch=1.0,
                placement=float(encode("placement", [Placement.PIPELINE])[0]))
    small = small_model(hidden=1024, heads=16, layers=16)
    report = evaluate(small, cluster, training, plan)
    a, h = plan_result(small, cluster, training, plan, report).pools
    assert a["layers"] == h["layers"] == 8
    assert float(report.step.launch_s) > float(report.step.compute_s)
    large = small_model(hidden=4096, heads=32, layers=32, seq_len=2048, vocab=32000)
    report = evaluate(large, cluster, training, plan)
    a, h = plan_result(large, cluster, training, plan, report).pools
    assert h["layers"] > a["layers"] and float(report.step.launch_s) == 0.0


def _broken(workload: object, cluster: MixedCluster, training: TrainingSpec, plan: Plan
            ) -> list[str]:
    """The rules a plan breaks with every pool of `cluster` in use (not the fastest way:
    one pool alone may run it)."""
    d = degrees(cluster, training, plan)
    return [r.message(d) for r in rules(workload, cluster, training)  # type: ignore[arg-type]
            if bool(np.ravel(r.broken(d))[0])]


def test_a_mixture_of_experts_trains_data_parallel_across_pools() -> None:
    """Dense and expert layers differ: no uneven split by one layer's speed (placement:
    pipeline refused); whole replicas per pool keep each expert group inside a pool."""
    moe = MoEModelSpec(name="tiny-moe", layers=4, hidden=512, heads=8, vocab=1000, seq_len=128,
                       experts=8, top_k=2, expert_ffn_hidden=256)
    a100, h100 = (ClusterSpec.of(gpu_catalog()[g], nodes=1) for g in ("a100-80gb", "h100-80gb"))
    cluster = mix(a100, replace(h100, gpus_per_node=4.0)).using((0, 1))
    training = TrainingSpec(global_batch=48)
    piped = Plan(tp=4.0, pp=1.0, micro_batch=1.0, sequence_parallel=1.0,
                 placement=float(encode("placement", [Placement.PIPELINE])[0]))
    assert any("not alike" in v for v in _broken(moe, cluster, training, piped))
    spread = Plan(tp=1.0, micro_batch=1.0, ep=8.0,
                  batch_shares=float(encode("batch_shares", [Shares.EQUAL])[0]))
    found = _broken(moe, cluster, training, spread)
    assert any("expert group stays inside a pool" in v for v in found), found
    assert not _broken(moe, cluster, training, replace(spread, ep=4.0))


def test_the_reduction_across_pools_runs_at_the_slowest_link() -> None:
    a100, h100 = (ClusterSpec.of(gpu_catalog()[g], nodes=2) for g in ("a100-80gb", "h100-80gb"))
    model, training = small_model(hidden=4096, heads=32, layers=4), TrainingSpec(global_batch=64)
    plan = _data_plan("equal", zero=0.0)
    dp = [float(_both(model, mix(a100, h100, inter=bw), training, plan).step.dp_comm_s)
          for bw in (1e9, 2e9, 200e9, 400e9)]
    assert dp[1] < dp[0]  # the link between pools is the slowest: faster helps
    assert dp[2] == pytest.approx(dp[3])  # the pools' own NICs are: no more to gain


def test_a_pipeline_across_pools_gives_the_faster_gpus_more_layers() -> None:
    a100, h100 = (ClusterSpec.of(gpu_catalog()[g], nodes=1) for g in ("a100-80gb", "h100-80gb"))
    cluster = mix(a100, h100, inter=50e9)
    model = small_model(hidden=4096, heads=32, layers=32, seq_len=2048, vocab=32000)
    training = TrainingSpec(global_batch=32)
    plan = Plan(tp=8.0, pp=2.0, micro_batch=1.0,
                placement=float(encode("placement", [Placement.PIPELINE])[0]))
    report = evaluate(model, cluster, training, plan)
    result = plan_result(model, cluster, training, plan, report)
    a, h = result.pools
    assert a["role"] == h["role"] == "pipeline" and result.feasible
    assert h["layers"] > a["layers"] and a["share"] + h["share"] == pytest.approx(1.0)
    even = evaluate(model, ClusterSpec.of(gpu_catalog()["a100-80gb"], nodes=2), training,
                    Plan(tp=8.0, pp=2.0, micro_batch=1.0))
    assert float(report.step_time_s) < float(even.step_time_s)


def test_every_pool_is_paid_for_and_owned_gpus_cost_nothing() -> None:
    owned = ClusterSpec.of(gpu_catalog()["a100-80gb"], nodes=2, price_usd_per_gpu_hour=0.0)
    rented = ClusterSpec.of(gpu_catalog()["h100-80gb"], nodes=1)
    report = evaluate(small_model(), mix(owned, rented), TrainingSpec(global_batch=16),
                      Plan(tp=8.0, batch_shares=float(encode("batch_shares", [Shares.EQUAL])[0])))
    assert float(np.ravel(report.price.cost_per_hour_usd)[0]) == pytest.approx(
        8 * gpu_catalog()["h100-80gb"].price_usd_per_hour)
    assert float(report.gpus) == 24


def test_a_pool_holding_only_the_last_stage_shows_that_stage_s_layers() -> None:
    """Llama 3 70B across 16 A100 and 16 H200 nodes, one stage each: the H200 stage holds the
    layers the A100 stage leaves (80 in all) with the logits; its `layers` were the count a
    stage without the logits would take (59 for 58), which tuner evaluate/explain/report
    showed and the step's per-layer terms (tensor-parallel traffic) were charged for."""
    a100, h200 = (ClusterSpec.of(gpu_catalog()[g], nodes=16) for g in ("a100-80gb", "h200"))
    cluster = mix(a100, h200, inter=25e9).using((0, 1))
    model = model_catalog()["llama3-70b"]
    training = TrainingSpec(global_batch=512)
    plan = Plan(tp=4.0, pp=2.0, micro_batch=1.0, sequence_parallel=1.0, zero=1.0,
                placement=float(encode("placement", [Placement.PIPELINE])[0]))
    report = evaluate(model, cluster, training, plan)
    a, h = plan_result(model, cluster, training, plan, report).pools
    assert a["stages"] == h["stages"] == 1
    assert a["layers"] + h["layers"] == model.layers
    assert h["share"] == pytest.approx(h["layers"] / model.layers)
