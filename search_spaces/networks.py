"""Built-in networks given by their layers (shared/SPEC.md `kind: layers`): ResNets, built from
their published definitions so that every layer's FLOPs, parameters and activations are exact.

ResNet-50/101: He et al., "Deep Residual Learning for Image Recognition", CVPR 2016, Table 1
(ImageNet, 224x224, bottleneck blocks, projection shortcuts). ResNet-32: the same paper, sec.
4.2 (CIFAR-10, 32x32, 3 stages of 5 basic blocks of 16/32/64 channels, identity shortcuts).
Per sample, fp32: FLOPs count a multiply-add as 2; activations are each conv's output, its
batch-norm output and its ReLU output (kept for the backward pass), 4 bytes each.
"""

from __future__ import annotations

import functools
from types import MappingProxyType

from cost import Layer, LayersModel

__all__ = ["network_catalog"]

_BYTES = 4.0


def _conv(name: str, cin: int, cout: int, k: int, size: int) -> Layer:
    """A k x k convolution with batch norm producing `cout` maps of size x size."""
    return Layer(name=name, forward_flops=2.0 * k * k * cin * cout * size * size,
                 params=float(k * k * cin * cout + 2 * cout),
                 activation_bytes=3.0 * cout * size * size * _BYTES)


def _bottleneck(name: str, cin: int, width: int, size: int, project: bool) -> list[Layer]:
    out = 4 * width
    layers = [_conv(f"{name}.conv1", cin, width, 1, size),
              _conv(f"{name}.conv2", width, width, 3, size),
              _conv(f"{name}.conv3", width, out, 1, size)]
    if project:
        layers.append(_conv(f"{name}.shortcut", cin, out, 1, size))
    return layers


def resnet_imagenet(name: str, blocks: tuple[int, int, int, int]) -> LayersModel:
    layers = [_conv("conv1", 3, 64, 7, 112)]
    cin, size = 64, 56
    for stage, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512), strict=True)):
        if stage:
            size //= 2
        for b in range(count):
            layers += _bottleneck(f"stage{stage + 1}.{b}", cin, width, size, project=b == 0)
            cin = 4 * width
    layers.append(Layer(name="fc", forward_flops=2.0 * cin * 1000, params=float(cin * 1000 + 1000),
                        activation_bytes=1000 * _BYTES))
    return LayersModel(name=name, layers=tuple(layers))


def resnet_cifar(name: str, depth: int) -> LayersModel:
    n = (depth - 2) // 6
    layers = [_conv("conv1", 3, 16, 3, 32)]
    cin, size = 16, 32
    for stage, width in enumerate((16, 32, 64)):
        if stage:
            size //= 2
        for b in range(n):
            layers += [_conv(f"stage{stage + 1}.{b}.conv1", cin, width, 3, size),
                       _conv(f"stage{stage + 1}.{b}.conv2", width, width, 3, size)]
            cin = width
    layers.append(Layer(name="fc", forward_flops=2.0 * 64 * 10, params=64.0 * 10 + 10,
                        activation_bytes=10 * _BYTES))
    return LayersModel(name=name, layers=tuple(layers))


@functools.cache
def network_catalog() -> MappingProxyType[str, LayersModel]:
    """Catalog name -> network: resnet-32 (CIFAR-10), resnet-50 and resnet-101 (ImageNet)."""
    return MappingProxyType({
        "resnet-32": resnet_cifar("resnet-32", 32),
        "resnet-50": resnet_imagenet("resnet-50", (3, 4, 6, 3)),
        "resnet-101": resnet_imagenet("resnet-101", (3, 4, 23, 3)),
    })
