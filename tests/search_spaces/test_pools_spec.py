"""`cluster.pools`: parsing, defaults, prices one owns, and one-line errors that say what to
change (never the name of an internal class)."""

from __future__ import annotations

from typing import Any

import pytest

from cost import MixedCluster
from search_spaces import Space, SpecError, gpu_catalog, parse_spec

BASE: dict[str, Any] = {
    "model": {"name": "tiny", "layers": 8, "hidden": 256, "heads": 8, "vocab": 1000,
              "seq_len": 128},
    "training": {"global_batch": 32, "precision": "bf16"},
}


def data(cluster: Any, **plan: Any) -> dict[str, Any]:
    return {**BASE, "cluster": cluster, "plan": plan}


def test_pools_become_a_mixed_cluster_with_each_pools_node_and_price() -> None:
    cluster = {"pools": [{"name": "owned", "gpu": "a100-80gb", "nodes": 16,
                          "price_per_gpu_hour": 0},
                         {"name": "rented", "gpu": "h100-80gb", "nodes": 4,
                          "spot_price_per_node_hour": 80, "pricing": "spot"}],
               "inter_pool_bandwidth": "100 Gbit/s"}
    _, mixed, _, _ = parse_spec(data(cluster)).to_cost_inputs()
    assert isinstance(mixed, MixedCluster)
    owned, rented = mixed.pools
    assert owned.gpu.name == "a100-80gb" and float(owned.nodes) == 16
    assert float(owned.price_usd_per_gpu_hour) == 0.0
    assert float(rented.price_usd_per_gpu_hour) == pytest.approx(10.0)
    assert rented.pricing == "spot"
    assert mixed.inter_pool_bandwidth_bytes_per_s == pytest.approx(12.5e9)
    assert mixed.gpus == 160 and mixed.names == ("owned", "rented")


def test_the_link_between_pools_defaults_to_the_slowest_nic() -> None:
    cluster = {"pools": [{"gpu": "a100-80gb", "nodes": 1},
                         {"gpu": "h100-80gb", "nodes": 1, "scale_out_bandwidth": "100 Gbit/s"}]}
    _, mixed, _, _ = parse_spec(data(cluster, tp=8)).to_cost_inputs()
    assert isinstance(mixed, MixedCluster)
    assert mixed.inter_pool_bandwidth_bytes_per_s == pytest.approx(12.5e9)
    assert gpu_catalog()["a100-80gb"].scale_out_bandwidth_bytes_per_s > 12.5e9


def test_pool_sizes_and_types_are_cluster_knobs_and_zero_nodes_leave_a_pool_out() -> None:
    cluster = {"pools": [{"gpu": "a100-80gb", "nodes": 2},
                         {"gpu": ["h100-80gb", "h200"], "nodes": {"min": 0, "max": 2}}]}
    s = Space.from_spec(parse_spec(data(cluster, tp=[1, 2, 4, 8])))
    assert s.searched[:2] == ["cluster.pools[1].gpu", "cluster.pools[1].nodes"]
    assert [p.value for p in s.choices["placement"]] == ["data", "pipeline"]
    alone = s.cluster({**{k: s.choices[f"cluster.{k}"][0] for k in s.cluster_knobs},
                       "pools[1].nodes": 0})
    assert isinstance(alone, MixedCluster) and alone.gpus == 16


def test_a_pools_gpu_takes_every_form_of_cluster_gpu() -> None:
    """A catalog name, a list (a knob), a catalog GPU with the user's figures and price, and
    a GPU of one's own, as cluster.gpu takes them (search_spaces.gpu)."""
    custom = {"name": "mine", "peak_flops": "400 TFLOP/s", "hbm_capacity": "64 GiB",
              "hbm_bandwidth": "2 TB/s", "price_per_hour": 1.5}
    cluster = {"pools": [{"gpu": {"base": "a100-80gb", "price_per_hour": 0,
                                  "hbm_capacity": "40 GiB"}, "nodes": 1},
                         {"gpu": custom, "nodes": 1},
                         {"gpu": ["h100-80gb", "h200"], "nodes": [0, 1]}]}
    spec = parse_spec(data(cluster, tp=8))
    s = Space.from_spec(spec)
    assert [g for g in s.choices["cluster.pools[2].gpu"]] == ["h100-80gb", "h200"]
    mixed = s.some_cluster()
    assert isinstance(mixed, MixedCluster)
    owned, mine = mixed.pools[:2]
    assert float(owned.price_usd_per_gpu_hour) == 0.0
    assert owned.gpu.hbm_capacity_bytes == 40 * 2**30 and owned.gpu.name == "a100-80gb"
    assert mine.gpu.name == "mine" and float(mine.price_usd_per_gpu_hour) == 1.5


def test_a_pool_has_its_own_expansion_tier() -> None:
    """Offload targets each pool's own memory expansion (cluster.expansion moves into the
    pools, as the error for it at the cluster's level says)."""
    cluster = {"pools": [{"gpu": "a100-80gb", "nodes": 1,
                          "expansion": {"capacity": "512 GiB", "bandwidth": "64 GB/s"}},
                         {"gpu": "h100-80gb", "nodes": 1}]}
    _, mixed, _, _ = parse_spec(data(cluster, tp=8)).to_cost_inputs()
    assert isinstance(mixed, MixedCluster)
    assert float(mixed.pools[0].expansion_capacity_bytes) == 512 * 2**30
    assert float(mixed.pools[1].expansion_capacity_bytes) == 0.0
    with pytest.raises(SpecError, match="each pool has its own expansion"):
        parse_spec(data({**cluster, "expansion": {"capacity": "1 TiB", "bandwidth": "64 GB/s"}}))


ERRORS = [
    ("a list of clusters", {"cluster": [{"gpu": "a100-80gb"}, {"gpu": "h100-80gb"}]},
     "cluster", "pools: [{gpu"),
    ("gpu and pools", {"cluster": {"gpu": "a100-80gb", "pools": [{"gpu": "h100-80gb"}]}},
     "cluster.gpu", "not both"),
    ("nodes beside pools", {"cluster": {"nodes": 4, "pools": [{"gpu": "h100-80gb"}]}},
     "cluster.nodes", "each pool has its own nodes"),
    ("no gpu", {"cluster": {"nodes": 4}}, "cluster.gpu", "cluster.pools"),
    ("pools all empty", {"cluster": {"pools": [{"gpu": "h100-80gb", "nodes": 0}]}},
     "cluster.pools", "0 nodes"),
    ("same names", {"cluster": {"pools": [{"name": "x", "gpu": "h100-80gb"},
                                          {"name": "x", "gpu": "a100-80gb"}]}},
     "cluster.pools", "named 'x'"),
    ("unknown pool field", {"cluster": {"pools": [{"gpu": "h100-80gb", "nodez": 1}]}},
     "cluster.pools[0].nodez", "did you mean 'nodes'"),
    ("bare number in a pool", {"cluster": {"pools": [{"gpu": "h100-80gb",
                                                      "scale_out_bandwidth": 400}]}},
     "cluster.pools[0].scale_out_bandwidth", "did you mean \"400 Gbit/s\""),
    ("bare link between pools", {"cluster": {"pools": [{"gpu": "h100-80gb"}],
                                             "inter_pool_bandwidth": 200}},
     "cluster.inter_pool_bandwidth", "has no unit"),
    ("a pool's price twice", {"cluster": {"pools": [{"gpu": "h100-80gb",
                                                     "price_per_gpu_hour": 0,
                                                     "price_per_node_hour": 8}]}},
     "cluster.pools[0].price_per_node_hour", "give the price once"),
    ("spot pool without a spot price",
     {"cluster": {"pools": [{"gpu": "h100-80gb", "price_per_node_hour": 20,
                             "pricing": "spot"}]}},
     "cluster.pools[0].spot_price_per_node_hour", "with spot servers give"),
    ("a pool's node price for two gpus",
     {"cluster": {"pools": [{"gpu": ["h100-80gb", "h200"], "price_per_node_hour": 20}]}},
     "cluster.pools[0].price_per_node_hour", "would price the nodes of 2 GPU types"),
    ("unpriced custom gpu in a pool", {
        "cluster": {"pools": [{"gpu": {"name": "x", "peak_flops": "400 TFLOP/s",
                                       "hbm_capacity": "64 GiB", "hbm_bandwidth": "2 TB/s"}}]},
        "objective": "cost"},
     "cluster.pools[0].gpu.price_per_hour", "has no price"),
    ("placement on one gpu", {"cluster": {"gpu": "a100-80gb"},
                              "plan": {"placement": "pipeline"}},
     "plan", "cluster.pools"),
]


@pytest.mark.parametrize(("what", "section", "field", "says"), ERRORS,
                         ids=[e[0] for e in ERRORS])
def test_bad_pools_say_what_to_change(what: str, section: dict[str, Any], field: str,
                                      says: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec({**BASE, "cluster": {"gpu": "a100-80gb"}, **section},
                   file="s.yaml").to_cost_inputs()
    text = str(err.value)
    assert text.startswith(f"s.yaml: {field}") and says in text, text
    assert "Section" not in text and "instance of" not in text
