"""The `plan` section: the parallel strategy, in the user's names; any value may be a choice."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from cost import OFFLOAD, RECOMPUTE, SYNC, Plan

from .choices import Choosable, IntChoosable, fixed
from .fields import Count, Frozen

__all__ = ["PLAN_FIELDS", "PlanSection"]

ZeroStage = Annotated[int, Field(strict=True, ge=0, le=3)]
StrictBool = Annotated[bool, Field(strict=True)]
Recompute = Literal["none", "selective", "full"]
Offload = Literal["none", "optimizer", "optimizer+weights"]
Sync = Literal["ring", "tree", "hierarchical", "direct", "parameter_server"]

PLAN_FIELDS = ("tp", "pp", "dp", "cp", "virtual_stages", "micro_batch", "recompute",
               "sequence_parallel", "zero", "offload", "sync", "parameter_servers")
"""The plan fields the cost model uses, in cost.Plan's order."""


class PlanSection(Frozen):
    """Degrees of tensor, pipeline, data and context parallelism and the memory savers.

    `dp` left out fills the cluster; `sync` left out takes the fastest collective for the
    message; `parameter_servers` counts the servers of `sync: parameter_server`."""

    tp: IntChoosable[Count] = 1
    pp: IntChoosable[Count] = 1
    dp: IntChoosable[Count] | None = None
    cp: IntChoosable[Count] = 1
    virtual_stages: IntChoosable[Count] = 1
    micro_batch: IntChoosable[Count] = 1
    recompute: Choosable[Recompute] = "none"
    sequence_parallel: Choosable[StrictBool] = False
    zero: IntChoosable[ZeroStage] = 0
    offload: Choosable[Offload] = "none"
    sync: Choosable[Sync] | None = None
    parameter_servers: IntChoosable[Count] | None = None

    def to_plan(self) -> Plan:
        """The cost model's plan for a section without choices (codes for the strings)."""
        v = {name: fixed(getattr(self, name), field=f"plan.{name}") for name in PLAN_FIELDS}
        v["dp"] = v["dp"] or 0
        v["recompute"] = RECOMPUTE.index(v["recompute"])
        v["offload"] = OFFLOAD.index(v["offload"])
        v["sync"] = -1 if v["sync"] is None else SYNC.index(v["sync"])
        v["parameter_servers"] = v["parameter_servers"] or 1
        return Plan(**v)
