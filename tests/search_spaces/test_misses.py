"""search_spaces.misses: which infeasible plan is nearest to feasible. A plan that fits in
memory comes before one that does not, however far either misses the user's limits; then the
least excess; earlier plans win ties."""

from __future__ import annotations

import numpy as np

from search_spaces.misses import miss_key, nearest_index


def test_a_plan_that_runs_comes_before_a_cheaper_one_that_cannot() -> None:
    # plan 0: 4x the HBM, 10x the budget; plan 1: fits, 40x the budget; plan 2: fits, 20x
    constraints = {"hbm": np.array([3.0, -0.2, -0.5]), "expansion": np.array([-1.0, -1.0, -1.0]),
                   "max_cost": np.array([9.0, 39.0, 19.0])}
    over, rest = miss_key(constraints)
    assert over.tolist() == [3.0, 0.0, 0.0] and rest.tolist() == [9.0, 39.0, 19.0]
    assert nearest_index(constraints) == 2


def test_where_none_fits_the_least_memory_then_the_least_excess() -> None:
    constraints = {"hbm": np.array([0.5, 0.2, 0.2]), "max_days": np.array([0.1, 3.0, 2.0])}
    assert nearest_index(constraints) == 2
    assert nearest_index(constraints, np.array([True, True, False])) == 1  # eligible only


def test_without_limits_the_memory_alone_and_ties_to_the_earlier() -> None:
    constraints = {"hbm": np.array([0.3, 0.1, 0.1]), "expansion": np.array([0.0, 0.0, 0.0])}
    over, rest = miss_key(constraints)
    assert over.tolist() == [0.3, 0.1, 0.1] and rest.tolist() == [-np.inf] * 3
    assert nearest_index(constraints) == 1


def test_one_plans_floats_give_a_key_to_compare() -> None:
    fits = tuple(map(float, miss_key({"hbm": -0.1, "max_cost": 50.0})))
    does_not = tuple(map(float, miss_key({"hbm": 0.01, "max_cost": 0.5})))
    assert fits == (0.0, 50.0) and fits < does_not
