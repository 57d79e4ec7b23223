"""The `plan` section: the parallel strategy, in the user's names; any value may be a choice.

Its vocabulary (recompute, offload, sync) and the mapping to the model's numbers are
cost.codec's: this section only validates what a user writes."""

# Annotations evaluated as written (no `from __future__ import annotations`): pydantic would
# otherwise compile and evaluate each field's annotation from its string when the class is
# made, 4 ms of every start with the spec sections (issue 14).

from typing import Annotated

from pydantic import Field

from cost import PLAN_KNOBS, Offload, Placement, PlanRecord, Recompute, Shares, Sync

from .choices import Choosable, IntChoosable, fixed
from .fields import Count, Frozen

__all__ = ["PLAN_FIELDS", "PlanSection"]

ZeroStage = Annotated[int, Field(strict=True, ge=0, le=3)]
StrictBool = Annotated[bool, Field(strict=True)]

PLAN_FIELDS = PLAN_KNOBS
"""The plan fields the cost model uses, in cost.Plan's order."""


class PlanSection(Frozen):
    """Degrees of tensor, pipeline, data and context parallelism and the memory savers.

    `dp` left out fills the cluster; `sync` left out takes the fastest collective for the
    message; `parameter_servers` counts the servers of `sync: parameter_server`;
    `shard_group` left out shards ZeRO state over every data-parallel rank, else over groups of
    that many ranks, replicated across the groups (hybrid sharding, HSDP); `ep` and `etp` (a
    mixture of experts only) are the expert-parallel degree and the tensor-parallel degree
    inside an expert. On a cluster of several GPU types (cluster.pools), `placement` puts
    whole replicas on each pool (data) or each replica's pipeline stages across them
    (pipeline), and `batch_shares` shares the batch among replicas on different GPUs so that
    they finish together (balanced) or equally. `placement` left out is searched over both on
    pools (data on one GPU type)."""

    tp: IntChoosable[Count] = 1
    pp: IntChoosable[Count] = 1
    dp: IntChoosable[Count] | None = None
    cp: IntChoosable[Count] = 1
    virtual_stages: IntChoosable[Count] = 1
    micro_batch: IntChoosable[Count] = 1
    recompute: Choosable[Recompute] = Recompute.NONE
    sequence_parallel: Choosable[StrictBool] = False
    zero: IntChoosable[ZeroStage] = 0
    offload: Choosable[Offload] = Offload.NONE
    sync: Choosable[Sync] | None = None
    parameter_servers: IntChoosable[Count] | None = None
    shard_group: IntChoosable[Count] | None = None
    ep: IntChoosable[Count] = 1
    etp: IntChoosable[Count] = 1
    placement: Choosable[Placement] | None = None
    batch_shares: Choosable[Shares] = Shares.BALANCED

    def record(self) -> PlanRecord:
        """The plan of a section without choices (SpecError naming the first choice)."""
        v = {name: fixed(getattr(self, name), field=f"plan.{name}") for name in PLAN_FIELDS}
        v["dp"] = v["dp"] or 0
        v["parameter_servers"] = v["parameter_servers"] or 1
        v["shard_group"] = v["shard_group"] or 0
        v["placement"] = v["placement"] or Placement.DATA
        return PlanRecord(**v)
