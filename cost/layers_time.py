"""Time of a layers model's stage (cost.layers): convolutions as implicit GEMMs on a roofline,
batch norm and activation passes through HBM, and the host that issues the kernels.

A convolution with per-sample forward FLOPs F, weights W and output elements E is an implicit
GEMM (cuDNN's and CUTLASS's formulation; Chetlur et al., "cuDNN", 2014, sec. 3) of
M = batch x P output pixels (P = F / 2W), N = E / P output channels and K = W / N input
channels x kernel area; a dense layer is the same with P = 1. Its time is the larger of the
FLOPs at the GPU's layers fraction of peak, discounted per dimension by d / (d + half_dim),
and the bytes of its input and output through HBM; the backward pass runs the data- and
weight-gradient GEMMs of the same shape (2x). In fp32 on GPUs without TF32 tensor cores the
convolutions run on CUDA cores (SIMT), whose kernels come in narrower tiles
(`layers_half_dim_simt` instead of `layers_half_dim`: small CIFAR channel counts lose less),
and cuDNN's Winograd and FFT algorithms do the same work `layers_winograd` times faster.
Batch norm and the activation stream the output `layers_forward_passes` times forward and
`layers_backward_passes` times backward.

The host issues each layer's kernels in `layer_overhead_s` (twice that backward) and runs
ahead of the device; the device runs a layer once it is issued and the last is done, so small
layers and small batches are launch-bound (a CIFAR ResNet at batch 128 on an H100 takes the
same time at batch 512) and large ones device-bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .efficiency import Efficiency
from .inputs import Array, GPUSpec
from .precision import element_bytes

if TYPE_CHECKING:
    from .layers import Layer

__all__ = ["LayerShapes", "stage_seconds"]


@dataclass(frozen=True, slots=True)
class LayerShapes:
    """Per layer (arrays over the layers): implicit-GEMM pixels per sample P, output
    channels N, reduction K, output and input elements per sample."""

    pixels: Array
    channels: Array
    reduction: Array
    outputs: Array
    inputs: Array

    @classmethod
    def of(cls, layers: Sequence[Layer]) -> LayerShapes:
        """The GEMM shapes of `layers`; a layer's input is the previous layer's output (its
        own for the first)."""
        flops = np.array([x.forward_flops for x in layers], dtype=np.float64)
        weights = np.maximum(np.array([x.params for x in layers], dtype=np.float64), 1.0)
        outputs = np.maximum(np.array([x.output_elements for x in layers], dtype=np.float64),
                             1.0)
        pixels = np.clip(flops / (2.0 * weights), 1.0, outputs)
        channels = outputs / pixels
        inputs = np.concatenate((outputs[:1], outputs[:-1]))
        return cls(pixels=pixels, channels=channels, reduction=weights / channels,
                   outputs=outputs, inputs=inputs)


def _shape(d: Array, half: float) -> Array:
    return d / (d + half)


def device_seconds(shapes: LayerShapes, start: int, stop: int, *, gpu: GPUSpec,
                   precision: str, batch: Array, eff: Efficiency) -> tuple[Array, Array]:
    """Device seconds of each layer of [start, stop), forward and backward, for a
    micro-batch of `batch` samples (arrays of the batch's shape plus a last axis of layers)."""
    sl = slice(start, stop)
    p, n, k = shapes.pixels[sl], shapes.channels[sl], shapes.reduction[sl]
    out, inp = shapes.outputs[sl], shapes.inputs[sl]
    b = np.asarray(batch, dtype=np.float64)[..., None]
    act = element_bytes(precision)["activation"]
    hbm = gpu.hbm_bandwidth_bytes_per_s * eff.hbm_fraction
    m = b * p
    simt = precision == "fp32" and not gpu.peak_for("bf16")
    half = eff.layers_half_dim_simt if simt else eff.layers_half_dim
    winograd = eff.layers_winograd if simt else 1.0
    rate = (gpu.peak_for(precision) * eff.layers_fraction_for(gpu) * winograd
            * _shape(m, half) * _shape(k, half) * _shape(n, half))
    gemm = np.maximum(2.0 * m * k * n / np.maximum(rate, 1e-30),
                      act * b * (inp + out) / hbm)
    passes = act * b * out / hbm
    return (gemm + eff.layers_forward_passes * passes,
            2.0 * gemm + eff.layers_backward_passes * passes)


def stage_seconds(shapes: LayerShapes, start: int, stop: int, *, gpu: GPUSpec, precision: str,
                  batch: Array, eff: Efficiency) -> tuple[Array, Array]:
    """Forward and backward seconds of one micro-batch through layers [start, stop): the host
    issues each layer's kernels in layer_overhead_s (twice that backward, in reverse order),
    and the device runs a layer once it is issued and the previous one is done:
    done_i = max(done_(i-1), issued_i) + device_i, a max-plus recursion that is launch-bound
    where layers are small and device-bound where they are large."""
    forward, backward = device_seconds(shapes, start, stop, gpu=gpu, precision=precision,
                                       batch=batch, eff=eff)
    issued = 0.0
    done = np.zeros(np.shape(forward)[:-1])
    for i in range(stop - start):
        issued += eff.layer_overhead_s
        done = np.maximum(done, issued) + forward[..., i]
    forward_s = done
    for i in reversed(range(stop - start)):
        issued += 2.0 * eff.layer_overhead_s
        done = np.maximum(done, issued) + backward[..., i]
    return forward_s, done - forward_s
