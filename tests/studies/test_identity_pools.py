"""A study's identity holds the catalog values of every GPU it resolves to: each pool's on a
cluster of several GPU types, and the base of a GPU mapping, so that a changed catalog entry
under either is refused as for a plain `cluster.gpu`."""

from __future__ import annotations

from pathlib import Path

from search_spaces import load_spec, parse_spec
from studies.identity import problem

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
