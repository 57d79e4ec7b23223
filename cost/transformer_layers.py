"""A transformer's layer as the unit of an uneven pipeline split (cost.workload.LayerCosts):
one layer's time and memory on one GPU and what the embedding and the logits add at the ends,
from the same terms as the even split (cost.transformer_time, cost.transformer_memory)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from .degrees import Degrees
from .efficiency import Efficiency
from .flops import layer_parameters
from .inputs import ClusterSpec, TrainingSpec
from .precision import element_bytes
from .transformer_memory import activation_bytes_per_layer
from .transformer_time import _logits_s, layer_times, stage_shape
from .workload import LayerCosts, StateBytes

if TYPE_CHECKING:
    from .transformer import ModelSpec

__all__ = ["layer_costs"]


def layer_costs(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                eff: Efficiency) -> LayerCosts:
    """One layer per micro-batch on one GPU of `cluster` with the plan's tp, cp and micro-batch;
    the logits and the loss of the last stage; the vocabulary matrix of each end (tp-sharded);
    the activations one layer keeps per micro-batch; fp32 logits on the last stage and, under
    full recompute, one layer rebuilt at a time (Korthikanti et al., MLSys'23, sec. 4)."""
    sizes = element_bytes(training.precision)
    act = sizes["activation"]
    tokens = stage_shape(model, d).tokens_per_micro_batch
    t = layer_times(model, cluster, training, d, eff)
    kept = activation_bytes_per_layer(model, d, act_bytes=act, flash_attention=eff.flash_attention)
    rebuilt = activation_bytes_per_layer(model, replace(d, recompute=0.0 * d.recompute),
                                         act_bytes=act, flash_attention=eff.flash_attention)
    return LayerCosts(
        layers=model.layers,
        layer_s=t.forward_s + t.backward_s + t.recompute_s + t.tp_comm_s + t.cp_comm_s,
        forward_s=t.forward_s, backward_s=t.backward_s, recompute_s=t.recompute_s,
        tp_comm_s=t.tp_comm_s, cp_comm_s=t.cp_comm_s,
        last_s=_logits_s(model, cluster, training, tokens, d, eff),
        layer_params=np.broadcast_to(layer_parameters(model) / d.tp, d.shape),
        end_params=model.vocab * model.hidden / d.tp + model.hidden,
        layer_activation_bytes=kept,
        last_buffer_bytes=8.0 * tokens * model.vocab / d.tp,
        buffer_bytes=np.where(d.recompute >= 2, rebuilt, 0.0),
        send_bytes=act * tokens * model.hidden / d.tp,
        state=StateBytes(weight=sizes["weight"], gradient=sizes["gradient"],
                         optimizer=sizes["optimizer"]),
    )
