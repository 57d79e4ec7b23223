"""Exhaustive search: every valid plan of every cluster, evaluated in vectorised chunks.

Records the best plans (top K, or the Pareto front of two objectives) as trials of the study,
not a trial per plan, with the counts of plans evaluated and feasible as study attributes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.distributions import CategoricalDistribution

from cost.codec import encode
from search_spaces import Space, SpecError
from studies import RESULT_ATTR

from .evaluation import Candidate, evaluate_chunks, one_plan, result_of
from .objective import label
from .scoring import DIRECTIONS

__all__ = ["SweepSummary", "pareto_mask", "sweep", "write_sweep"]

TOP = 10


@dataclass(frozen=True)
class SweepSummary:
    best: list[tuple[Candidate, dict[str, Any]]]  # candidate and its knob values
    evaluated: int
    feasible: int
    seconds: float


def pareto_mask(points: np.ndarray) -> np.ndarray:
    """Non-dominated rows of a (n, 2) array to minimise: sort by the first column and keep
    the rows that improve the running minimum of the second (Kung et al. 1975)."""
    if len(points) == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((points[:, 1], points[:, 0]))
    second = points[order, 1]
    running = np.minimum.accumulate(second)
    keep_sorted = np.concatenate(([True], second[1:] < running[:-1]))
    mask = np.zeros(len(points), dtype=bool)
    mask[order[keep_sorted]] = True
    return mask


def _keep(pool: list[tuple[np.ndarray, Candidate, dict[str, Any]]], two: bool
          ) -> list[tuple[np.ndarray, Candidate, dict[str, Any]]]:
    """The best TOP of the pool (single objective) or its Pareto front (two)."""
    if not pool:
        return pool
    keys = np.array([p[0] for p in pool])
    if two:
        return [p for p, k in zip(pool, pareto_mask(keys), strict=True) if k]
    return [pool[i] for i in np.argsort(keys[:, 0], kind="stable")[:TOP]]


def sweep(space: Space) -> SweepSummary:
    """Evaluate the whole space; keep the best feasible plans."""
    start = time.perf_counter()
    signs = np.array([-1.0 if DIRECTIONS[o] == "maximize" else 1.0
                      for o in space.spec.objective])
    two = len(signs) == 2
    pool: list[tuple[np.ndarray, Candidate, dict[str, Any]]] = []
    evaluated = feasible = 0
    for values in space.cluster_combinations():
        try:
            cluster = space.cluster(values)
        except SpecError:
            continue
        for chunk in evaluate_chunks(space, cluster, {}):
            ok = chunk.scores.feasible
            evaluated += ok.size
            feasible += int(np.count_nonzero(ok))
            keys = chunk.scores.objectives * signs
            idx = np.flatnonzero(ok)
            if two:
                idx = idx[pareto_mask(keys[idx])]
            else:
                idx = idx[np.argsort(keys[idx, 0], kind="stable")[:TOP]]
            for i in idx:
                cand = Candidate(cluster=cluster, plan=one_plan(chunk.plans, int(i)),
                                 objectives=tuple(float(x) for x in chunk.scores.objectives[i]),
                                 constraints={k: float(v[i])
                                              for k, v in chunk.scores.constraints.items()})
                pool.append((keys[i], cand, _knobs(space, values, chunk.plans, int(i))))
            pool = _keep(pool, two)
    best = [(c, k) for _, c, k in pool]
    return SweepSummary(best=best, evaluated=evaluated, feasible=feasible,
                        seconds=time.perf_counter() - start)


def _knobs(space: Space, values: dict[str, Any], plans: Any, i: int) -> dict[str, Any]:
    """The searched knobs' user values of plan i (the trial's params)."""
    out: dict[str, Any] = {}
    for name in space.searched:
        if name.startswith("cluster."):
            out[name] = label(values[name[len("cluster."):]])
            continue
        number = float(np.ravel(getattr(plans, name))[i])
        codes = encode(name, space.choices[name])
        out[name] = label(space.choices[name][int(np.flatnonzero(codes == number)[0])])
    return out


def write_sweep(study: optuna.Study, space: Space, summary: SweepSummary) -> None:
    """Add the sweep's best plans to the study as finished trials; counts as attributes."""
    distributions = {k: CategoricalDistribution([label(v) for v in space.choices[k]])
                     for k in space.searched}
    for candidate, knobs in summary.best:
        trial = optuna.trial.create_trial(
            params=knobs, distributions={k: distributions[k] for k in knobs},
            values=list(candidate.objectives),
            user_attrs={RESULT_ATTR: result_of(space, candidate).as_dict(), "exhaustive": True},
            system_attrs={f"constraints:{k}": v for k, v in candidate.constraints.items()},
        )
        study.add_trial(trial)
    study.set_user_attr("evaluated", summary.evaluated)
    study.set_user_attr("feasible_plans", summary.feasible)
    study.set_user_attr("exhaustive_seconds", summary.seconds)

