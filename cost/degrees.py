"""A plan resolved on its cluster and batch: the degrees as float arrays of one shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .inputs import Array, ClusterSpec, Plan, TrainingSpec

if TYPE_CHECKING:
    from .pools import MixedCluster

__all__ = ["Degrees", "degrees", "grid_degrees"]


@dataclass(frozen=True, eq=False, slots=True, kw_only=True)
class Degrees:
    """Every knob of a plan broadcast to one shape, dp resolved (GPUs / (tp·pp·cp) where the
    plan leaves it out), and the micro-batches of a step: batch / (dp · micro_batch)."""

    tp: Array
    pp: Array
    dp: Array
    cp: Array
    vs: Array
    mb: Array
    recompute: Array
    sp: Array  # sequence parallelism, only where tp > 1
    zero: Array
    offload: Array
    sync: Array
    parameter_servers: Array
    shard_group: Array  # ranks of one ZeRO shard (HSDP), resolved: all dp·cp where unset
    gpus: Array
    micro_batches: Array
    ep: Array  # expert-parallel degree (1 for a dense model)
    etp: Array  # tensor-parallel degree inside an expert
    placement: Array  # cost.codec.Placement code (clusters of several GPU types)
    shares: Array  # cost.codec.Shares code

    @property
    def edp(self) -> Array:
        """Expert data-parallel degree: the attention ranks of a stage, tp·cp·dp, folded
        into ep·etp expert ranks (Megatron-Core's MoE parallel folding, arXiv 2504.14960)."""
        return self.tp * self.cp * self.dp / (self.ep * self.etp)

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the plans: every field's shape broadcast (on a grid of plans each knob
        keeps its own axes, grid_degrees)."""
        return np.broadcast(*(getattr(self, name) for name in _FIELDS)).shape

    @property
    def shard(self) -> Array:
        """Divisor of the activations outside tensor-parallel regions: tp with sequence
        parallelism, else 1."""
        return np.where(self.sp > 0, self.tp, 1.0)


_FIELDS = ("tp", "pp", "dp", "cp", "vs", "mb", "recompute", "sp", "zero", "offload", "sync",
           "parameter_servers", "shard_group", "gpus", "micro_batches", "ep", "etp",
           "placement", "shares")


def degrees(cluster: ClusterSpec | MixedCluster, training: TrainingSpec, plan: Plan
            ) -> Degrees:
    """The plan's degrees on `cluster` (the GPUs a mixed cluster's plan uses) for
    `training`'s batch."""
    a = plan.arrays(cluster.gpus)
    dp, mb = a["dp"], a["micro_batch"]
    return Degrees(
        tp=a["tp"], pp=a["pp"], dp=dp, cp=a["cp"], vs=a["virtual_stages"], mb=mb,
        recompute=a["recompute"], sp=np.where(a["tp"] > 1, a["sequence_parallel"], 0.0),
        zero=a["zero"], offload=a["offload"], sync=a["sync"],
        parameter_servers=a["parameter_servers"],
        shard_group=np.where(a["shard_group"] > 0, a["shard_group"], dp * a["cp"]),
        gpus=a["gpus"],
        micro_batches=training.global_batch / (dp * mb), ep=a["ep"], etp=a["etp"],
        placement=a["placement"], shares=a["batch_shares"],
    )


def grid_degrees(cluster: ClusterSpec, training: TrainingSpec, plan: Plan) -> Degrees:
    """The degrees of a grid of plans: `plan`'s fields are arrays whose shapes broadcast
    together (each knob on its own axes), and each degree keeps the shape of the knobs it is
    made of (dp: of tp, pp, cp and the cluster's size where the plan leaves it out). Every
    formula then runs once per distinct combination of the knobs it reads, and numpy's
    broadcasting gives the same numbers as the flat plans of `degrees`."""
    f = {name: np.asarray(getattr(plan, name), dtype=np.float64) for name in (
        "tp", "pp", "dp", "cp", "virtual_stages", "micro_batch", "recompute",
        "sequence_parallel", "zero", "offload", "sync", "parameter_servers", "shard_group",
        "ep", "etp", "placement", "batch_shares")}
    gpus = np.asarray(cluster.gpus, dtype=np.float64)
    dp = f["dp"]
    if np.any(dp <= 0):
        dp = np.where(dp > 0, dp, gpus / (f["tp"] * f["pp"] * f["cp"]))
    mb = f["micro_batch"]
    return Degrees(
        tp=f["tp"], pp=f["pp"], dp=dp, cp=f["cp"], vs=f["virtual_stages"], mb=mb,
        recompute=f["recompute"], sp=np.where(f["tp"] > 1, f["sequence_parallel"], 0.0),
        zero=f["zero"], offload=f["offload"], sync=f["sync"],
        parameter_servers=f["parameter_servers"], gpus=gpus,
        shard_group=np.where(f["shard_group"] > 0, f["shard_group"], dp * f["cp"]),
        micro_batches=training.global_batch / (dp * mb), ep=f["ep"], etp=f["etp"],
        placement=f["placement"], shares=f["batch_shares"],
    )
