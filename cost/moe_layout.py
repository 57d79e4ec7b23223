"""How a mixture of experts' layers split into pipeline stages, and what one stage holds.

Megatron-Core splits a model evenly where the chunks (pp · virtual_stages) divide the layers,
or the layers plus the embedding and the loss (cost.transformer.embedding_and_loss_split); any
other count runs with a pipeline layout (--pipeline-model-parallel-layout, or
--decoder-first/last-pipeline-num-layers), as DeepSeek-V3's 61 layers run on 16 stages
(Megatron-Bridge's 'Et*4|(t*4|)*14tmL'), a layout that gives the last stage fewer layers to
make room for the loss and the multi-token-prediction module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .degrees import Degrees
from .inputs import Array, Value
from .transformer_time import StageShape, stage_shape

if TYPE_CHECKING:
    from .moe import MoEModelSpec

__all__ = ["balanced_layers", "even_split", "moe_stage_shape", "stage_mix"]


def even_split(model: MoEModelSpec, d: Degrees) -> Array:
    """True where the transformer's even split applies (chunks divide layers or layers + 2)."""
    from .transformer import embedding_and_loss_split

    return (np.isclose(np.mod(model.layers, d.pp * d.vs), 0.0)
            | (embedding_and_loss_split(model.layers, d.pp, d.vs) > 0))


def moe_stage_shape(model: MoEModelSpec, d: Degrees) -> StageShape:
    """The transformer's stage shape where the even split applies; else the fullest stage
    takes ceil(layers / pp) layers and the last one fewer (what memory is sized by)."""
    even = stage_shape(model, d)
    fits = even_split(model, d)
    per_stage = np.ceil(model.layers / d.pp)
    return StageShape(
        layers_per_stage=np.where(fits, even.layers_per_stage, per_stage),
        last_stage_layers=np.where(fits, even.last_stage_layers, per_stage - 1.0),
        tokens_per_micro_batch=even.tokens_per_micro_batch)


def balanced_layers(model: MoEModelSpec, d: Degrees, shape: StageShape, *,
                    end_layers: Value) -> tuple[Array, Array]:
    """(layers of the fullest stage, layers of the last stage). Even split: the shape's. A
    layout: the last stage's ends (logits, loss, multi-token prediction) weigh `end_layers`
    layers, so it takes what is left of a balanced stage, ceil((layers + ends) / pp) less the
    ends, and the other pp - 1 stages share the rest."""
    pp = np.maximum(d.pp, 1.0)
    last = np.clip(np.floor(np.ceil((model.layers + end_layers) / pp) - end_layers), 0.0,
                   model.layers)
    full = np.ceil((model.layers - last) / np.maximum(pp - 1.0, 1.0))
    even = even_split(model, d) | (d.pp <= 1)
    return (np.where(even, shape.layers_per_stage, full),
            np.where(even, shape.last_stage_layers, last))


def stage_mix(model: MoEModelSpec, layers: Value) -> tuple[Array, Array]:
    """(MoE layers, dense layers) of a stage of `layers` layers where experts are densest:
    every moe_layer_freq-th layer past the leading dense layers."""
    from .moe import moe_layer_count

    moe = np.minimum(np.ceil(np.asarray(layers, dtype=np.float64) / model.moe_layer_freq),
                     moe_layer_count(model))
    return moe, layers - moe
