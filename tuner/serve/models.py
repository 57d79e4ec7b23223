"""The API's response bodies as pydantic models, for the OpenAPI schema (/openapi.json) and
its docs (/docs). The request body is the project's own spec model (search_spaces.StudySpec,
added to the schema by tuner.serve.app); the plan results are PlanResult.as_dict objects (the
`tuner evaluate --json` object of shared/SPEC.md), described here field by field. The server
answers with the very JSON the command line prints (`--json`), so these models document it
and tests check that real answers validate against them; they never reshape it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["BestPlans", "ErrorBody", "PlanResultJSON", "StudyCreated", "StudyDeleted",
           "StudyState", "StudyStatus", "StudyStopped", "StudySummary", "TrialPlanJSON"]

StudyState = Literal["running", "done", "stopped", "timed_out"]
_OPEN = ConfigDict(extra="allow", protected_namespaces=())
"""Open to fields beyond those listed; `model_*` field names (shared/SPEC.md's
model_flops_per_gpu) are the result's own, not pydantic's (which warned of them before 2.10)."""


class ErrorBody(BaseModel):
    """Every error: one line naming the input (`request`, or `request[i]` in a list), the
    field and what to change, as the command line prints it after `error: `."""

    error: str


class PlanResultJSON(BaseModel):
    """One plan's answer: PlanResult.as_dict (shared/SPEC.md, `tuner evaluate --json`).
    Seconds, bytes, FLOP/s and USD; a non-finite number is null."""

    model_config = _OPEN
    model: str
    workload: str
    plan: dict[str, Any]
    cluster: dict[str, Any]
    feasible: bool
    violations: list[str]
    step_time_s: float | None
    tokens_per_s: float | None
    model_flops_per_gpu: float | None
    mfu: float | None
    mfu_palm: float | None = None
    memory_per_gpu_bytes: dict[str, float | None]
    hbm_usable_bytes: float | None
    time_breakdown_s: dict[str, float | None]
    dominant: str
    cost_per_hour_usd: float | None
    time_to_train_days: float | None
    cost_to_train_usd: float | None
    revocation_overhead: float | None
    checkpoint_interval_s: float | None
    constraints: dict[str, float | None] | None = None
    pools: list[dict[str, Any]] | None = None
    bottleneck: str | None = None


class TrialPlanJSON(PlanResultJSON):
    """A stored trial's plan (TrialResult.as_dict): its number, objective value(s) and the
    plans of other trials with the same result."""

    trial: int
    value: float | list[float] | None
    equivalent: list[dict[str, Any]] | None = None


class BestPlans(BaseModel):
    """`tuner best NAME --json`: the best plans, or the Pareto front."""

    study: str
    best: list[TrialPlanJSON]
    nearest: TrialPlanJSON | None = None  # where none is feasible: the nearest miss


class StudySummary(BaseModel):
    """One study of `tuner studies --json`: trials by state and best value(s)."""

    model_config = _OPEN
    name: str
    directions: list[str]
    objectives: list[str]
    target_trials: int
    trials: int
    complete: int
    pruned: int
    fail: int
    running: int
    best_values: list[float | None] | None
    cost_model_version: str | None
    target: int | None = None  # target_trials, complete and fail as the status names them
    completed: int | None = None
    failed: int | None = None


class StudyCreated(BaseModel):
    """A study accepted (202): where to ask for its status, how it is searched and by how
    many worker processes of this server (0: nothing left to run), and how many live
    workers outside it run it too (`outside_workers`: `tuner worker` started by hand,
    another server; this server's workers join them)."""

    study: str
    location: str
    sampler: str | None
    requested_sampler: str | None
    target: int
    workers: int
    outside_workers: int = 0


class StudyStatus(BaseModel):
    """A study's progress: `state` (running: worker processes at work; done: the target
    reached or the space swept; stopped: unfinished with no worker, see `error`; timed_out:
    its search.timeout passed), complete trials of the target, trials running, waiting,
    failed and pruned, the sampler used and the one asked for, whether the best plan is
    proven optimal (an exhaustive sweep), the plans evaluated, the live workers of this
    server (`workers`) and those outside it (`outside_workers`: `tuner worker` started by
    hand, another server; seen in the storage's running trials and their heartbeats)."""

    study: str
    state: StudyState
    target: int
    completed: int
    running: int
    waiting: int
    failed: int
    pruned: int
    sampler: str | None
    requested_sampler: str | None
    optimal: bool
    evaluated: int
    feasible_plans: int | None = None
    directions: list[str]
    workers: int
    outside_workers: int = 0
    error: str | None = None


class StudyStopped(BaseModel):
    """A study whose worker processes were stopped (POST /v1/studies/{name}/stop), as Ctrl-C
    stops `tuner search`: each put its running trial back in the queue (`waiting`, retried
    with the same parameters when the study is resumed by POSTing its spec again). `state`
    is the study's state once they exited (stopped, or done if the last trial reached the
    target); `completed` of `target` trials are stored."""

    study: str
    state: StudyState
    workers_stopped: int
    completed: int
    target: int
    waiting: int


class StudyDeleted(BaseModel):
    """A study deleted from the storage (optuna.delete_study), with its count of trials."""

    study: str
    deleted_trials: int
