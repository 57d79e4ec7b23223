"""Evaluate the valid plans of a cluster in vectorised chunks and keep the best ones."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cost import (
    ClusterSpec,
    CostReport,
    Efficiency,
    MixedCluster,
    Plan,
    PlanResult,
    evaluate,
    plan_result,
)
from search_spaces import Space

from .scoring import DIRECTIONS, Scores, best_index, score

__all__ = ["Candidate", "Evaluated", "best_plan", "cluster_values", "evaluate_chunks",
           "one_plan", "result_of"]


@dataclass(frozen=True)
class Evaluated:
    """One vectorised chunk: its plans, their report and their scores."""

    plans: Plan
    report: CostReport
    scores: Scores


@dataclass(frozen=True)
class Candidate:
    """One plan picked from a chunk: where it came from and its numbers."""

    cluster: ClusterSpec | MixedCluster
    plan: Plan  # scalar fields
    objectives: tuple[float, ...]
    constraints: dict[str, float]
    evaluated: int = 0
    feasible_plans: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return all(v <= 0 for v in self.constraints.values())


def cluster_values(space: Space, chosen: Mapping[str, Any]) -> dict[str, Any]:
    """Every cluster knob's value: the chosen ones (keys "cluster.<knob>"), else the only one."""
    return {k: chosen.get(f"cluster.{k}", space.choices[f"cluster.{k}"][0])
            for k in space.cluster_knobs}


def evaluate_chunks(space: Space, cluster: ClusterSpec | MixedCluster, fixed: Mapping[str, Any],
                    efficiency: Efficiency | None = None) -> Iterator[Evaluated]:
    """The cost model and the scores on every valid plan of `cluster` with `fixed` knobs."""
    eff = space.efficiency if efficiency is None else efficiency
    for plans in space.plans(cluster, fixed):
        report = evaluate(space.model, cluster, space.training, plans, efficiency=eff)
        yield Evaluated(plans, report, score(report, space.spec.objective,
                                             space.spec.constraints))


def one_plan(plans: Plan, i: int) -> Plan:
    """Plan number i of an array of plans, as scalars."""
    return Plan(**{k: float(np.ravel(getattr(plans, k))[i]) if np.ndim(getattr(plans, k))
                   else getattr(plans, k) for k in Plan.__dataclass_fields__})


def best_plan(space: Space, cluster: ClusterSpec | MixedCluster, fixed: Mapping[str, Any]
              ) -> Candidate | None:
    """The best valid plan of `cluster` with the `fixed` knobs (None when there is none):
    the feasible one best by the first objective, else the one closest to its limits."""
    directions = [DIRECTIONS[o] for o in space.spec.objective]
    picks: list[Candidate] = []
    evaluated = feasible = 0
    for chunk in evaluate_chunks(space, cluster, fixed):
        i = best_index(chunk.scores, directions)
        evaluated += int(chunk.scores.objectives.shape[0])
        feasible += int(np.count_nonzero(chunk.scores.feasible))
        picks.append(Candidate(
            cluster=cluster, plan=one_plan(chunk.plans, i),
            objectives=tuple(float(x) for x in chunk.scores.objectives[i]),
            constraints={k: float(v[i]) for k, v in chunk.scores.constraints.items()}))
    if not picks:
        return None
    stacked = Scores(objectives=np.array([p.objectives for p in picks]),
                     constraints={k: np.array([p.constraints[k] for p in picks])
                                  for k in picks[0].constraints})
    best = picks[best_index(stacked, directions)]
    return Candidate(cluster=best.cluster, plan=best.plan, objectives=best.objectives,
                     constraints=best.constraints, evaluated=evaluated, feasible_plans=feasible)


_LIMITS = {"max_cost": "cost to train", "max_days": "days to train", "max_gpus": "GPUs",
           "max_hourly_cost": "cost per hour"}


def result_of(space: Space, candidate: Candidate) -> PlanResult:
    """The PlanResult of a candidate (one more scalar evaluation), its feasibility and
    violations including the spec's constraints."""
    report = evaluate(space.model, candidate.cluster, space.training, candidate.plan,
                      efficiency=space.efficiency)
    result = plan_result(space.model, candidate.cluster, space.training, candidate.plan, report)
    messages = []
    for name, what in _LIMITS.items():
        excess = candidate.constraints.get(name, 0.0)
        if excess > 0:
            limit = getattr(space.spec.constraints, name)
            messages.append(f"{what} is {100 * excess:.0f}% over constraints.{name} = {limit:g}")
    return result.with_limits(candidate.constraints, messages)
