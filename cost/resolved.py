"""A plan resolved against its model, cluster and training run: broadcast arrays of degrees."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .inputs import Array, ClusterSpec, ModelSpec, Plan, TrainingSpec

__all__ = ["Resolved", "element_bytes", "resolve"]

_WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 2.0, "fp32": 4.0}
_GRAD_BYTES = {"bf16": 4.0, "fp16": 2.0, "fp8": 4.0, "fp32": 4.0}
_OPTIMIZER_BYTES = {"bf16": 12.0, "fp16": 12.0, "fp8": 12.0, "fp32": 8.0}


def element_bytes(precision: str) -> dict[str, float]:
    """Bytes per element by role for mixed-precision training (Micikevicius et al. 2018):
    weights and activations in 16 bits, gradients reduced in fp32 for bf16/fp8 (Megatron's
    main grads) and fp16 for fp16, Adam state as fp32 master copy + two moments (ZeRO, sec. 3)."""
    return {
        "weight": _WEIGHT_BYTES[precision],
        "activation": 4.0 if precision == "fp32" else 2.0,
        "gradient": _GRAD_BYTES[precision],
        "optimizer": _OPTIMIZER_BYTES[precision],
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """Degrees as float arrays of one shape; `micro_batches` = batch / (dp · micro_batch)."""

    tp: Array
    pp: Array
    dp: Array
    cp: Array
    vs: Array
    mb: Array
    recompute: Array
    sp: Array
    zero: Array
    offload: Array
    sync: Array
    parameter_servers: Array
    gpus: Array
    micro_batches: Array
    layers_per_stage: Array  # transformer layers of the fullest stage
    last_stage_layers: Array  # transformer layers of the last stage (beside the logits)
    tokens_per_micro_batch: Array  # tokens of one micro-batch on one GPU: mb · seq / cp

    @property
    def shard(self) -> Array:
        """Divisor of the replicated (non tensor-parallel) activations: tp with sequence
        parallelism, else 1."""
        return np.where(self.sp > 0, self.tp, 1.0)


def embedding_and_loss_split(layers: int, pp: Array, vs: Array) -> Array:
    """1.0 where the pipeline counts the embedding and the loss as one layer each: pp·v does
    not divide the layers but divides layers + 2 into chunks of two or more, so the first and
    the last stage each take one transformer layer fewer and keep at least one
    (Megatron-Core's --account-for-embedding-in-pipeline-split and
    --account-for-loss-in-pipeline-split; Llama 3 405B's 126 layers on 16 stages, BLOOM's 70
    on 12)."""
    chunks = np.maximum(pp * vs, 1.0)
    even = np.isclose(np.mod(layers, chunks), 0.0)
    plus_two = np.isclose(np.mod(layers + 2.0, chunks), 0.0) & (2.0 * chunks <= layers + 2.0)
    return np.where(~even & plus_two & (pp > 1), 1.0, 0.0)


def resolve(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, plan: Plan) -> Resolved:
    a = plan.arrays(cluster.gpus)
    split = embedding_and_loss_split(model.layers, a["pp"], a["virtual_stages"])
    mb, dp, cp = a["micro_batch"], a["dp"], a["cp"]
    return Resolved(
        tp=a["tp"], pp=a["pp"], dp=dp, cp=cp, vs=a["virtual_stages"], mb=mb,
        recompute=a["recompute"], sp=np.where(a["tp"] > 1, a["sequence_parallel"], 0.0),
        zero=a["zero"], offload=a["offload"], sync=a["sync"],
        parameter_servers=a["parameter_servers"], gpus=a["gpus"],
        micro_batches=training.global_batch / (dp * mb),
        layers_per_stage=(model.layers + 2.0 * split) / a["pp"],
        last_stage_layers=(model.layers + 2.0 * split) / a["pp"] - split,
        tokens_per_micro_batch=mb * model.seq_len / cp,
    )
