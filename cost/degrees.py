"""A plan resolved on its cluster and batch: the degrees as float arrays of one shape."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .inputs import Array, ClusterSpec, Plan, TrainingSpec

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
    shard_group: Array  # ranks of one ZeRO shard (HSDP), resolved: all dp·cp where unset
    gpus: Array
    micro_batches: Array
    ep: Array  # expert-parallel degree (1 for a dense model)
    etp: Array  # tensor-parallel degree inside an expert

    @property
    def edp(self) -> Array:
        """Expert data-parallel degree: the attention ranks of a stage, tp·cp·dp, folded
        into ep·etp expert ranks (Megatron-Core's MoE parallel folding, arXiv 2504.14960)."""
        return self.tp * self.cp * self.dp / (self.ep * self.etp)

    @property
    def shape(self) -> tuple[int, ...]:
        return np.shape(self.tp)

    @property
    def shard(self) -> Array:
        """Divisor of the activations outside tensor-parallel regions: tp with sequence
        parallelism, else 1."""
        return np.where(self.sp > 0, self.tp, 1.0)


def degrees(cluster: ClusterSpec, training: TrainingSpec, plan: Plan) -> Degrees:
    """The plan's degrees on `cluster` for `training`'s batch."""
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
    )
