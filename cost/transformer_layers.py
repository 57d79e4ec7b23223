"""A transformer's layer as the unit of an uneven pipeline split (cost.layer_costs.LayerCosts):
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
from .layer_costs import LayerCosts
from .precision import element_bytes, state_bytes
from .software import held_logits_bytes
from .transformer_memory import activation_bytes_per_layer, activation_sizes, head_input_bytes
from .transformer_time import host_s, layer_times, logits_s, stage_shape

if TYPE_CHECKING:
    from .transformer import ModelSpec

__all__ = ["layer_costs"]


def layer_costs(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                eff: Efficiency) -> LayerCosts:
    """One layer per micro-batch on one GPU of `cluster` with the plan's tp, cp and micro-batch,
    and the host seconds to launch its kernels (cost.transformer_time.host_s: where longer
    than the layer, the GPU waits); the logits and the loss of the last stage; the vocabulary
    matrix of each end (tp-sharded); the activations one layer keeps per micro-batch (as
    cost.transformer_memory counts them); the logits on the last stage and, under full
    recompute, one layer rebuilt at a time (Korthikanti et al., MLSys'23, sec. 4); autocast's
    16-bit copy of every weight (2 bytes per parameter, as cost.transformer_memory holds it)."""
    act = element_bytes(training.precision)["activation"]
    tokens = stage_shape(model, d).tokens_per_micro_batch
    t = layer_times(model, cluster, training, d, eff)
    sizes = activation_sizes(training, eff)
    kept = activation_bytes_per_layer(model, d, **sizes)
    rebuilt = activation_bytes_per_layer(model, replace(d, recompute=0.0 * d.recompute),
                                         **sizes)
    return LayerCosts(
        layers=model.layers,
        layer_s=t.forward_s + t.backward_s + t.recompute_s + t.tp_comm_s + t.cp_comm_s,
        forward_s=t.forward_s, backward_s=t.backward_s, recompute_s=t.recompute_s,
        tp_comm_s=t.tp_comm_s, cp_comm_s=t.cp_comm_s,
        host_s=host_s(model, d, eff, np.ones(d.shape)),
        last_s=logits_s(model, cluster, training, tokens, d, eff),
        layer_params=np.broadcast_to(layer_parameters(model) / d.tp, d.shape),
        end_params=model.vocab * model.hidden / d.tp + model.hidden,
        layer_activation_bytes=kept,
        last_buffer_bytes=(held_logits_bytes(eff, tp=d.tp) * tokens * model.vocab / d.tp
                           + head_input_bytes(model, d, **sizes)),
        buffer_bytes=np.where(d.recompute >= 2, rebuilt, 0.0),
        copy_bytes_per_param=2.0 if eff.autocast else 0.0,
        send_bytes=act * tokens * model.hidden / d.tp,
        state=state_bytes(training.precision, eff),
    )
