"""Gradient synchronisation: textbook costs, and the parameter-server bottleneck of CM-DARE."""

from __future__ import annotations

import pytest

from cost import SYNC, ClusterSpec, Plan, TrainingSpec, evaluate
from cost.sync import (
    direct_allreduce_s,
    hierarchical_allreduce_s,
    parameter_server_s,
)
from search_spaces import gpu_catalog
from search_spaces.networks import network_catalog


def test_direct_has_two_synchronisations_and_the_ring_bandwidth() -> None:
    assert direct_allreduce_s(1e9, 8.0, 1e10, 1e-5) == pytest.approx(2 * 7 / 8 * 0.1 + 2e-5)
    with_messages = direct_allreduce_s(1e9, 8.0, 1e10, 1e-5, 1e-6)
    assert with_messages == pytest.approx(2 * 7 / 8 * 0.1 + 2e-5 + 14e-6)


def test_hierarchical_splits_inside_and_across_nodes() -> None:
    # 16 ranks, 8 per node: 2(7/8) M/up inside, 2(1/2)(M/8)/out across
    got = hierarchical_allreduce_s(8e9, 16.0, 8.0, up_bw=1e11, out_bw=1e10, up_lat=0.0,
                                   out_lat=0.0)
    assert got == pytest.approx(2 * 7 / 8 * 8e9 / 1e11 + 2 * 0.5 * 1e9 / 1e10)


def test_parameter_servers_share_the_load() -> None:
    one = parameter_server_s(1e8, 8.0, 1.0, worker_bw=1e9, server_bw=1e9, lat=0.0)
    two = parameter_server_s(1e8, 8.0, 2.0, worker_bw=1e9, server_bw=1e9, lat=0.0)
    assert one == pytest.approx(2 * 8 * 1e8 / 1e9) and two == pytest.approx(one / 2)


def cm_dare(workers: int, sync: str, servers: int = 1) -> float:
    """Images/s of CM-DARE's ResNet-32 on P100 cloud workers (one GPU per VM, 128 images a
    step)."""
    cluster = ClusterSpec.of(gpu_catalog()["p100"], nodes=workers, gpus_per_node=1,
                             scale_up_domain_gpus=1, scale_out_bandwidth_bytes_per_s=2e9,
                             parameter_server_bandwidth_bytes_per_s=1e9)
    training = TrainingSpec(global_batch=128 * workers, precision="fp32")
    code = -1 if sync == "auto" else SYNC.index(sync)
    plan = Plan(micro_batch=128, sync=code, parameter_servers=servers)
    return float(evaluate(network_catalog()["resnet-32-t2t"], cluster, training, plan).tokens_per_s)


def test_one_parameter_server_caps_a_p100_cluster_and_a_second_lifts_it() -> None:
    one = [cm_dare(n, "parameter_server") for n in (1, 2, 4, 8, 16)]
    assert one[2] > 3.5 * one[0]  # scales while the server keeps up
    assert one[4] < 1.1 * one[3]  # then stops: the server's update rate is the bottleneck
    # a second server halves the bytes each serves, not its per-update overhead
    assert cm_dare(16, "parameter_server", servers=2) > 1.6 * one[4]


def test_ring_allreduce_keeps_scaling() -> None:
    """A ring's traffic per worker does not grow with the workers (a server's does): 4 to 16
    workers scale 3.8x at least. From one worker to four the ring's one bucket (ResNet-32's
    1.9 MB of gradients, its reduction after the backward: cost.schedule.last_bucket_share)
    costs less than an eighth."""
    ring = [cm_dare(n, "ring") for n in (1, 4, 16)]
    assert ring[2] > 3.8 * ring[1]
    assert 3.5 < ring[1] / ring[0] < 4.0


def test_auto_is_the_fastest_collective() -> None:
    collectives = [cm_dare(16, s) for s in ("ring", "tree", "hierarchical")]
    assert cm_dare(16, "auto") == pytest.approx(max(collectives))


def test_pipeline_stages_of_a_layers_model_balance_and_add_a_bubble() -> None:
    from cost.layers import stage_split

    model = network_catalog()["resnet-50"]
    ranges = stage_split(model, 4)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(model.layers)
    flops = [sum(x.forward_flops for x in model.layers[a:b]) for a, b in ranges]
    assert max(flops) < 1.1 * sum(flops) / 4
    cluster = ClusterSpec.of(gpu_catalog()["v100-32gb"], nodes=1)
    training = TrainingSpec(global_batch=256, precision="fp32")
    one = evaluate(model, cluster, training, Plan(pp=1, micro_batch=32))
    four = evaluate(model, cluster, training, Plan(pp=4, micro_batch=8))
    assert bool(one.valid) and bool(four.valid)
    assert float(four.step.pp_bubble_s) > 0 and float(one.step.pp_bubble_s) == 0
    # balanced by FLOPs, the late stages hold most of the weights but never all of them
    assert float(four.memory.weights_bytes) < float(one.memory.weights_bytes)
