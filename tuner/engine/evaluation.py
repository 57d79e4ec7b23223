"""Evaluate the valid plans of a cluster in vectorised chunks and keep the best ones."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cost import (
    ClusterSpec,
    CostReport,
    Efficiency,
    MixedCluster,
    Plan,
    PlanResult,
    evaluate,
    evaluate_grid,
    plan_result,
)
from search_spaces import GPUSection

from .limits import limit_messages
from .scoring import DIRECTIONS, Scores, best_index, score

if TYPE_CHECKING:  # annotations only: `tuner evaluate` imports neither
    from search_spaces import Space
    from search_spaces.grid import PlanGrid

__all__ = ["Candidate", "Evaluated", "best_plan", "cluster_values", "evaluate_chunks",
           "flat_scores", "label", "one_plan", "result_of"]


def label(value: Any) -> Any:
    """A value Optuna can store as a categorical choice (custom GPUs by name)."""
    return value.name if isinstance(value, GPUSection) else value


@dataclass(frozen=True)
class Evaluated:
    """One grid of plans (search_spaces.grid.PlanGrid), its report (arrays broadcast to the
    grid's shape) and its scores, flat: plan i of the grid is row i (np.ravel order)."""

    grid: PlanGrid
    report: CostReport
    scores: Scores
    valid: np.ndarray  # flat: structurally valid (all True but for rules of grid knobs)

    @property
    def plans(self) -> Plan:
        """The grid's plans as a flat Plan, in the order of the scores."""
        return self.grid.flat_plan(np.arange(self.grid.size))


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
    """The cost model and the scores on every valid plan of `cluster` with `fixed` knobs,
    grid by grid (cost.evaluate_grid)."""
    eff = space.efficiency if efficiency is None else efficiency
    for grid in space.grids(cluster, fixed):
        report = evaluate_grid(space.model, cluster, space.training, grid.plan(), efficiency=eff)
        yield Evaluated(grid, report, flat_scores(score(report, space.spec.objective,
                                                        space.spec.constraints)),
                        np.broadcast_to(report.valid, grid.shape).ravel())


def flat_scores(scores: Scores) -> Scores:
    """Scores of a grid (arrays of the grid's shape) as one row per plan."""
    k = scores.objectives.shape[-1]
    return Scores(objectives=scores.objectives.reshape(-1, k),
                  constraints={n: np.ravel(v) for n, v in scores.constraints.items()})


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
        scores, rows = chunk.scores, np.flatnonzero(chunk.valid)
        if len(rows) < chunk.grid.size:
            scores = Scores(objectives=scores.objectives[rows],
                            constraints={k: v[rows] for k, v in scores.constraints.items()})
        if not len(rows):
            continue
        i = best_index(scores, directions)
        evaluated += len(rows)
        feasible += int(np.count_nonzero(scores.feasible))
        picks.append(Candidate(
            cluster=cluster, plan=one_plan(chunk.grid.flat_plan(rows[i:i + 1]), 0),
            objectives=tuple(float(x) for x in scores.objectives[i]),
            constraints={k: float(v[i]) for k, v in scores.constraints.items()}))
    if not picks:
        return None
    stacked = Scores(objectives=np.array([p.objectives for p in picks]),
                     constraints={k: np.array([p.constraints[k] for p in picks])
                                  for k in picks[0].constraints})
    best = picks[best_index(stacked, directions)]
    return Candidate(cluster=best.cluster, plan=best.plan, objectives=best.objectives,
                     constraints=best.constraints, evaluated=evaluated, feasible_plans=feasible)


def result_of(space: Space, candidate: Candidate) -> PlanResult:
    """The PlanResult of a candidate (one more scalar evaluation), its feasibility and
    violations including the spec's constraints."""
    report = evaluate(space.model, candidate.cluster, space.training, candidate.plan,
                      efficiency=space.efficiency)
    result = plan_result(space.model, candidate.cluster, space.training, candidate.plan, report)
    messages = limit_messages(space.spec.constraints, candidate.constraints, result)
    return result.with_limits(candidate.constraints, messages)
