import numpy as np
import pytest

from cost.collectives import (
    all_gather_s,
    allreduce_s,
    group_link,
    p2p_s,
    reduce_scatter_s,
    ring_allreduce_s,
    tree_allreduce_s,
)
from tests.factories import cluster


def test_ring_allreduce_by_hand() -> None:
    got = ring_allreduce_s(1e9, 8.0, 100e9, 1e-6)
    assert got == pytest.approx(2 * 7 / 8 * 1e9 / 100e9 + 14e-6)


def test_one_rank_costs_nothing() -> None:
    for f in (ring_allreduce_s, tree_allreduce_s, reduce_scatter_s, all_gather_s, allreduce_s):
        assert f(1e9, 1.0, 1e9, 1e-5) == 0.0


def test_reduce_scatter_plus_all_gather_is_a_ring_allreduce() -> None:
    args = (3e8, 16.0, 50e9, 5e-6)
    assert reduce_scatter_s(*args) + all_gather_s(*args) == pytest.approx(ring_allreduce_s(*args))


def test_tree_wins_small_messages_on_many_ranks_and_ring_large_ones() -> None:
    small = (1e3, 1024.0, 25e9, 5e-6)
    large = (1e10, 8.0, 25e9, 5e-6)
    assert allreduce_s(*small) == tree_allreduce_s(*small) < ring_allreduce_s(*small)
    assert allreduce_s(*large) == ring_allreduce_s(*large) < tree_allreduce_s(*large)


def test_p2p() -> None:
    assert p2p_s(1e6, 1e9, 1e-6) == pytest.approx(1e-3 + 1e-6)


def test_group_inside_a_node_runs_at_scale_up_speed() -> None:
    link = group_link(cluster(), stride=1.0, size=np.array(8.0), fraction=1.0)
    assert float(link.bandwidth_bytes_per_s) == 300e9
    assert float(link.latency_s) == 2e-6


def test_group_across_nodes_shares_the_nodes_nics() -> None:
    # stride 2, size 8 spans 16 GPUs: 4 members per node drive 4 NICs of 25 GB/s
    link = group_link(cluster(), stride=2.0, size=np.array(8.0), fraction=1.0)
    assert float(link.bandwidth_bytes_per_s) == 100e9
    # one member per node: its own NIC
    link = group_link(cluster(), stride=8.0, size=np.array(8.0), fraction=0.5)
    assert float(link.bandwidth_bytes_per_s) == 12.5e9
    assert float(link.latency_s) == 5e-6
