"""A study's identity holds the catalog values of every GPU it resolves to: each pool's on a
cluster of several GPU types, and the base of a GPU mapping, so that a changed catalog entry
under either is refused as for a plain `cluster.gpu`."""

from __future__ import annotations

from pathlib import Path

from search_spaces import load_spec, parse_spec
from studies.identity import problem, problem_differences

EXAMPLE = Path(__file__).resolve().parents[2] / "search_spaces" / "examples" / \
    "llama3-70b-owned-a100-plus-rented.yaml"


def test_every_pools_gpus_are_in_the_identity() -> None:
    gpus = problem(load_spec(EXAMPLE))["catalog"]["gpus"]
    assert set(gpus) == {"a100-80gb", "h100-80gb", "h200"}
    assert gpus["h200"]["hbm_capacity_bytes"] > gpus["h100-80gb"]["hbm_capacity_bytes"]


def test_a_gpu_mappings_base_is_in_the_identity() -> None:
    data = {"model": "llama3-8b", "training": {"global_batch": 64, "precision": "bf16"},
            "cluster": {"gpu": {"base": "h100-80gb", "price_per_hour": 2.1}, "nodes": 1}}
    assert set(problem(parse_spec(data))["catalog"]["gpus"]) == {"h100-80gb"}


def _pools(*pools: dict[str, object]) -> dict[str, object]:
    return problem(parse_spec({"model": "llama3-8b",
                               "training": {"global_batch": 64, "precision": "bf16"},
                               "cluster": {"pools": list(pools)}}))


def test_a_changed_pool_is_named_by_its_index_and_field() -> None:
    """'cluster.pools[0].nodes differs: stored 2, now 1', not both lists of pools in full."""
    a100, h100 = {"gpu": "a100-80gb", "nodes": 2}, {"gpu": "h100-80gb", "nodes": 1}
    said = problem_differences(_pools(a100, h100), _pools({**a100, "nodes": 1}, h100))
    assert said == "cluster.pools[0].nodes differs: stored 2, now 1"


def test_a_pool_added_says_how_many_and_which() -> None:
    a100, h100 = {"gpu": "a100-80gb", "nodes": 2}, {"gpu": "h100-80gb", "nodes": 1}
    said = problem_differences(_pools(a100), _pools(a100, h100))
    assert said == "cluster.pools differs: stored 1 item, now 2"
