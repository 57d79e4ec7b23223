"""The search space: choices derived from the model, and Space.count() against a brute-force
enumeration of every combination with cost.plan_violations."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import cost
import cost.codec
from search_spaces import Space, SpecError, parse_spec

TINY = {"name": "tiny", "layers": 8, "hidden": 256, "heads": 8, "vocab": 1000, "seq_len": 128}


def tiny_data(plan: dict[str, Any] | None = None, **cluster: Any) -> dict[str, Any]:
    """A spec for the tiny model on a100-80gb nodes (1 node by default), plan as given."""
    return {
        "model": dict(TINY),
        "training": {"global_batch": 32, "precision": "bf16"},
        "cluster": {"gpu": "a100-80gb", "nodes": 1, "gpus_per_node": 8, **cluster},
        "plan": plan or {},
    }


def space_of(data: dict[str, Any]) -> Space:
    return Space.from_spec(parse_spec(data, file="tiny.yaml", name="tiny"))


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def brute_force_count(data: dict[str, Any]) -> int:
    """Every combination of the written values (nodes and plan knobs), kept when
    cost.plan_violations finds nothing, less sequence parallelism at tp = 1 (a no-op) where
    the plan without it is written too."""
    plan_values = {k.name: as_list(data["plan"].get(k.name, getattr(k.default, "value", k.default)))
                   for k in cost.KNOBS}
    total = 0
    for nodes in as_list(data["cluster"]["nodes"]):
        fixed = parse_spec({**data, "cluster": {**data["cluster"], "nodes": nodes}, "plan": {}})
        model, cluster, training, _ = fixed.to_cost_inputs(check=False)
        for combo in itertools.product(*plan_values.values()):
            v = dict(zip(plan_values, combo, strict=True))
            if v["sequence_parallel"] and v["tp"] == 1 \
                    and False in plan_values["sequence_parallel"]:
                continue
            plan = cost.Plan(**{k: float(cost.codec.encode(k, [x])[0]) for k, x in v.items()})
            total += cost.plan_violations(model, cluster, training, plan) == []
    return total


def test_tp_values_that_do_not_divide_the_heads_are_dropped() -> None:
    space = space_of(tiny_data({"tp": [1, 2, 3, 4, 6, 8]}))
    assert space.choices["tp"] == (1, 2, 4, 8)


def test_tp_must_also_divide_the_kv_heads() -> None:
    data = tiny_data({"tp": [1, 2, 4, 8]})
    data["model"]["kv_heads"] = 2
    assert space_of(data).choices["tp"] == (1, 2)


def test_pp_values_that_do_not_divide_the_layers_are_dropped() -> None:
    space = space_of(tiny_data({"pp": [1, 2, 3, 4, 5, 8]}))
    assert space.choices["pp"] == (1, 2, 4, 8)


def test_a_range_is_filtered_like_a_list() -> None:
    space = space_of(tiny_data({"pp": {"min": 1, "max": 8}}))
    assert space.choices["pp"] == (1, 2, 4, 8)


@pytest.mark.parametrize(("knob", "values"), [("tp", [3, 5]), ("pp", [3, 5, 7]),
                                              ("micro_batch", [3, 5])])
def test_a_knob_with_no_valid_value_names_the_field(knob: str, values: list[int]) -> None:
    with pytest.raises(SpecError) as info:
        space_of(tiny_data({knob: values}))
    assert info.value.field == f"plan.{knob}"
    assert f"plan.{knob}" in str(info.value) and "tiny.yaml" in str(info.value)


@pytest.mark.parametrize(("plan", "words"), [
    ({"tp": 8, "pp": 8}, "tp·pp·cp = 64 does not divide the 8 GPUs"),
    ({"tp": [4, 8], "pp": [4, 8]}, "tp·pp·cp = 16 does not divide the 8 GPUs"),
    ({"micro_batch": [3, 5]}, "does not divide global_batch=32"),
])
def test_a_knob_with_no_valid_value_says_what_the_rule_needs(plan: dict[str, Any],
                                                             words: str) -> None:
    """Not only which rule failed but why, on an example of the values written: a layout
    larger than the cluster's GPUs is no matter of the model's heads or layers."""
    with pytest.raises(SpecError) as info:
        space_of(tiny_data(plan))
    assert words in info.value.message, info.value.message
    assert "(8,)" not in info.value.message


def test_a_fixed_spec_has_one_plan() -> None:
    space = space_of(tiny_data({"tp": 2, "pp": 2}))
    assert space.searched == []
    assert space.count() == 1


SMALL_PLANS = {
    "dp": {"tp": [1, 2, 3, 4, 8], "pp": [1, 2, 3, 4, 8], "dp": [1, 2, 4, 8, 16],
           "micro_batch": [1, 2, 4], "sequence_parallel": [False, True]},
    "interleaved": {"tp": [1, 2, 4], "pp": [1, 2, 4, 8], "virtual_stages": [1, 2, 4],
                    "micro_batch": [1, 2, 4, 8], "recompute": ["none", "full"],
                    "zero": [0, 1, 3]},
    "context": {"tp": [1, 2, 4, 8], "pp": [1, 2, 4], "cp": [1, 2, 4],
                "sequence_parallel": [False, True], "recompute": ["none", "selective"]},
    "everything": {"tp": [1, 2, 4], "pp": [1, 2, 4], "cp": [1, 2], "virtual_stages": [1, 2],
                   "micro_batch": [1, 4],
                   "sequence_parallel": [False, True], "zero": [0, 2], "dp": [1, 2, 8]},
    "sequence_parallel_on": {"tp": [1, 2, 4], "pp": [1, 2], "micro_batch": [1, 2],
                             "sequence_parallel": True},
}


@pytest.mark.parametrize("nodes", [1, 3, 4])
@pytest.mark.parametrize("case", sorted(SMALL_PLANS))
def test_count_is_the_brute_force_count(case: str, nodes: int) -> None:
    data = tiny_data(SMALL_PLANS[case], nodes=nodes)
    expected = brute_force_count(data)
    assert expected > 0 or nodes == 3  # 24 GPUs: no dp divides the batch of 32
    try:
        count = space_of(data).count()
    except SpecError as err:  # no valid plan at all, and one rule alone says which knob
        assert expected == 0 and err.field.startswith("plan.")
        return
    assert count == expected


def test_sequence_parallel_on_keeps_its_tp_1_plans() -> None:
    """`sequence_parallel: true` asks for it where it applies: the plans at tp 1 (where it is
    a no-op) stay in the space, in the flat plans and in the grids alike; they were dropped as
    duplicates of plans the spec did not allow, so a sweep called 'optimal' missed them."""
    space = space_of(tiny_data({"tp": [1, 2], "pp": 1, "sequence_parallel": True}))
    cluster = space.cluster(next(space.cluster_combinations()))
    flat = {int(tp) for plans in space.plans(cluster) for tp in np.ravel(plans.tp)}
    gridded = {int(tp) for grid in space.grids(cluster) for tp in grid.layouts["tp"]}
    assert flat == gridded == {1, 2}
    both = space_of(tiny_data({"tp": [1, 2], "pp": 1, "sequence_parallel": [False, True]}))
    assert both.count() == space.count() + 1  # tp 2 with and without, tp 1 once


@pytest.mark.parametrize("case", ["dp", "everything", "sequence_parallel_on"])
def test_count_with_a_cluster_choice_sums_the_clusters(case: str) -> None:
    data = tiny_data(SMALL_PLANS[case], nodes=[1, 2])
    space = space_of(data)
    assert space.searched[0] == "cluster.nodes"
    count = space.count()
    assert count == brute_force_count(data)
    per_node = [space_of(tiny_data(SMALL_PLANS[case], nodes=n)).count() for n in (1, 2)]
    assert count == sum(per_node)
