"""A workload's layer as the unit of an uneven pipeline split over GPUs of several types
(cost.hetero_pipeline): what Workload.layer_costs gives. Imported only for such a split, so that
a cluster of one GPU type does not make its class (issue 14)."""

from __future__ import annotations

from dataclasses import dataclass

from .inputs import Array
from .workload import StateBytes

__all__ = ["LayerCosts"]


@dataclass(frozen=True, eq=False, slots=True, kw_only=True)
class LayerCosts:
    """One of a workload's identical layers on one GPU, per micro-batch, and what the two ends
    of a pipeline add: what a split of the layers over stages of different GPUs needs (stage j
    of L_j layers takes L_j x layer_s, plus last_s on the last stage), and what each stage's
    GPUs hold."""

    layers: int  # identical layers of the model
    layer_s: Array  # forward, backward, recompute and exposed tp/cp traffic of one layer
    forward_s: Array  # one layer's forward pass
    backward_s: Array  # one layer's backward pass
    recompute_s: Array
    tp_comm_s: Array
    cp_comm_s: Array
    host_s: Array  # host seconds to launch one layer's kernels (the GPU waits where longer)
    last_s: Array  # the last stage's end work (logits and loss) per micro-batch
    layer_params: Array  # parameters of one layer on one GPU
    end_params: Array  # parameters an end stage adds on one GPU (embedding or logits)
    layer_activation_bytes: Array  # what one layer keeps per micro-batch in flight
    last_buffer_bytes: Array  # transient buffers of the last stage (logits and their gradient)
    buffer_bytes: Array  # transient buffers of every stage (a layer rebuilt by recompute)
    copy_bytes_per_param: float  # transient copies of the weights (autocast's 16-bit ones)
    send_bytes: Array  # one pipeline send between stages
    state: StateBytes
