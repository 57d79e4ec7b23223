"""A plan resolved on its cluster and batch: the degrees as float arrays of one shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .inputs import Array, ClusterSpec, Plan, TrainingSpec

if TYPE_CHECKING:
    from .pools import MixedCluster

__all__ = ["Degrees", "degrees"]


@dataclass(frozen=True, slots=True, kw_only=True)
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
    gpus: Array
    micro_batches: Array
    placement: Array  # cost.codec.Placement code (clusters of several GPU types)
    shares: Array  # cost.codec.Shares code

    @property
    def shape(self) -> tuple[int, ...]:
        return np.shape(self.tp)

    @property
    def shard(self) -> Array:
        """Divisor of the activations outside tensor-parallel regions: tp with sequence
        parallelism, else 1."""
        return np.where(self.sp > 0, self.tp, 1.0)


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
        parameter_servers=a["parameter_servers"], gpus=a["gpus"],
        micro_batches=training.global_batch / (dp * mb),
        placement=a["placement"], shares=a["batch_shares"],
    )
