"""Searching clusters of several GPU types: two pools are never worse than either alone and
never better than both alone together; exhaustive enumeration, a brute-force loop and TPE
agree on a small mixed space; a pools spec searches the pools' sizes and GPU types."""

from __future__ import annotations

import itertools
from typing import Any

import optuna
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search_spaces import Space, load_spec
from studies import best_results
from tuner.engine.exhaustive import sweep
from tuner.engine.search import SearchOptions, run_search

from .specs import EXAMPLES, each_valid_plan, space, spec

MODEL = {"name": "mini", "layers": 8, "hidden": 1024, "heads": 16, "vocab": 8000,
         "seq_len": 512}
PLAN = {"tp": [1, 2, 4, 8], "pp": [1, 2, 4], "micro_batch": [1, 2, 4], "zero": [0, 1]}
GPUS = ("a100-80gb", "h100-80gb", "v100-32gb")


def pools_data(name: str, pools: list[dict[str, Any]], **plan: Any) -> dict[str, Any]:
    return {"name": name, "model": dict(MODEL),
            "training": {"global_batch": 64, "precision": "fp16", "tokens": 1e9},
            "cluster": {"pools": pools}, "plan": {**PLAN, **plan},
            "search": {"sampler": "tpe", "trials": 20, "seed": 0}}


def alone_data(name: str, gpu: str, nodes: int) -> dict[str, Any]:
    return {**pools_data(name, []), "cluster": {"gpu": gpu, "nodes": nodes}}


def fastest(data: dict[str, Any]) -> float:
    summary = sweep(space(data))
    return summary.best[0][0].objectives[0] if summary.best else 0.0


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(GPUS), st.sampled_from(GPUS), st.integers(1, 2), st.integers(1, 2))
def test_two_pools_beat_either_alone_and_never_both_together(
        gpu_a: str, gpu_b: str, nodes_a: int, nodes_b: int) -> None:
    mixed = fastest(pools_data("mixed", [{"gpu": gpu_a, "nodes": nodes_a},
                                         {"gpu": gpu_b, "nodes": nodes_b}]))
    a = fastest(alone_data("a", gpu_a, nodes_a))
    b = fastest(alone_data("b", gpu_b, nodes_b))
    assert a > 0 and b > 0
    assert mixed >= max(a, b) * (1 - 1e-9)
    assert mixed <= (a + b) * (1 + 1e-9)


SMALL = pools_data("small-mixed", [{"name": "owned", "gpu": "a100-80gb", "nodes": 1},
                                   {"name": "rented", "gpu": ["h100-80gb", "v100-32gb"],
                                    "nodes": [0, 1]}],
                   tp=[2, 4, 8], pp=[1, 2], micro_batch=[1, 2], zero=[0, 1],
                   batch_shares=["balanced", "equal"])
"""Two GPU types for the rented pool, 0 or 1 of its nodes, both placements and shares."""


def every_plan(data: dict[str, Any]) -> list[tuple[dict[str, Any], float]]:
    """Every combination of every knob on every cluster, one scalar cost.evaluate each, kept
    when it is structurally valid and fits (no vectorisation, no Space.plans)."""
    s = space(data)
    out = []
    clusters = [dict(zip(s.cluster_knobs, combo, strict=True)) for combo in
                itertools.product(*(s.choices[f"cluster.{k}"] for k in s.cluster_knobs))]
    for values in clusters:
        for v, report in each_valid_plan(s, s.cluster(values)):
            if bool(report.fits):
                out.append(({**v, **values}, float(report.tokens_per_s)))
    return out


def test_exhaustive_finds_the_brute_force_optimum_on_pools() -> None:
    brute = max(t for _, t in every_plan(SMALL))
    result = sweep(space(SMALL))
    assert result.best[0][0].objectives[0] == pytest.approx(brute, rel=1e-9)


def test_tpe_finds_the_exhaustive_optimum_on_pools() -> None:
    optimum = sweep(space(SMALL)).best[0][0].objectives[0]
    study = run_search(spec(SMALL), "", optuna.storages.InMemoryStorage(),
                       SearchOptions(sampler="tpe", trials=20, seed=0))
    best = best_results(study)[0].result
    assert best.tokens_per_s == pytest.approx(optimum, rel=1e-9)
    assert best.pools and best.bottleneck
    assert best.cluster.pools[1]["gpu"] in ("h100-80gb", "v100-32gb")


def test_the_pools_example_tpe_reaches_the_exhaustive_optimum() -> None:
    """The shipped llama3-70b-owned-a100-plus-rented example (5,184 plans over 36 clusters),
    searched as it is written (TPE, its trials and seed): the days to train of the exhaustive
    sweep's optimum."""
    example = EXAMPLES / "llama3-70b-owned-a100-plus-rented.yaml"
    spec_ = load_spec(example)
    optimum = sweep(Space.from_spec(spec_)).best[0][0]
    study = run_search(spec_, "", optuna.storages.InMemoryStorage(),
                       SearchOptions(sampler=spec_.search.sampler, trials=spec_.search.trials,
                                     seed=spec_.search.seed))
    best = best_results(study)[0].result
    assert best.time_to_train_days == pytest.approx(optimum.objectives[0], rel=1e-9)
