"""Built-in networks given by their layers (shared/SPEC.md `kind: layers`): ResNets, built from
their published definitions so that every layer's FLOPs, parameters and activations are exact.

ResNet-50/101: He et al., "Deep Residual Learning for Image Recognition", CVPR 2016, Table 1
(ImageNet, 224x224, bottleneck blocks, projection shortcuts); resnet-50-v1.5 is torchvision's
(the stride on the 3x3 convolution, so each stage's first 1x1 convolution runs at the larger
size: 4.1 GMACs). ResNet-32: the same paper, sec. 4.2 (CIFAR-10, 32x32, 3 stages of 5 basic
blocks of 16/32/64 channels, identity shortcuts). resnet-15-t2t and resnet-32-t2t are
Tensor2Tensor's resnet_cifar_15/32 as CM-DARE (Li et al., ICDCS'20) trained them: a 7x7 stem of
16 channels, pre-activation blocks of 32/64/128 channels with a projection shortcut opening
each stage (tensor2tensor/models/resnet.py in cake-lab/CM-DARE; 0.69M and 1.86M parameters).

Per sample: FLOPs count a multiply-add as 2; a convolution followed by batch norm and ReLU
keeps two tensors of its output for the backward pass (the convolution's output for batch
norm, the activation's for the next convolution), a projection shortcut one (its batch-norm
output feeds the residual add, which keeps nothing): `activation_bytes` counts them in fp32.
"""

from __future__ import annotations

import functools
from types import MappingProxyType

from cost import Layer, LayersModel

__all__ = ["network_catalog"]

_BYTES = 4.0


def _conv(name: str, cin: int, cout: int, k: int, size: int, *, kept: int = 2) -> Layer:
    """A k x k convolution with batch norm producing `cout` maps of size x size, keeping
    `kept` tensors of its output for the backward pass."""
    elements = float(cout * size * size)
    return Layer(name=name, forward_flops=2.0 * k * k * cin * elements,
                 params=float(k * k * cin * cout + 2 * cout),
                 activation_bytes=kept * elements * _BYTES, outputs=elements)


def _dense(name: str, cin: int, cout: int) -> Layer:
    return Layer(name=name, forward_flops=2.0 * cin * cout, params=float(cin * cout + cout),
                 activation_bytes=cout * _BYTES, outputs=float(cout))


def _bottleneck(name: str, cin: int, width: int, size: int, project: bool,
                v1_5: bool) -> list[Layer]:
    out = 4 * width
    first = 2 * size if project and v1_5 and cin != 64 else size
    layers = [_conv(f"{name}.conv1", cin, width, 1, first),
              _conv(f"{name}.conv2", width, width, 3, size),
              _conv(f"{name}.conv3", width, out, 1, size)]
    if project:
        layers.append(_conv(f"{name}.shortcut", cin, out, 1, size, kept=1))
    return layers


def resnet_imagenet(name: str, blocks: tuple[int, int, int, int], *,
                    v1_5: bool = False) -> LayersModel:
    """A bottleneck ResNet on 224x224 images; `v1_5`: torchvision's stride placement."""
    layers = [_conv("conv1", 3, 64, 7, 112)]
    cin, size = 64, 56
    for stage, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512), strict=True)):
        if stage:
            size //= 2
        for b in range(count):
            layers += _bottleneck(f"stage{stage + 1}.{b}", cin, width, size, project=b == 0,
                                  v1_5=v1_5)
            cin = 4 * width
    layers.append(_dense("fc", cin, 1000))
    return LayersModel(name=name, layers=tuple(layers))


def resnet_cifar(name: str, depth: int, *, projection: bool = False) -> LayersModel:
    """He et al.'s CIFAR ResNet of 6n + 2 layers; `projection`: 1x1 convolutions on the
    shortcuts that change size (option B) instead of identity (option A)."""
    n = (depth - 2) // 6
    layers = [_conv("conv1", 3, 16, 3, 32)]
    cin, size = 16, 32
    for stage, width in enumerate((16, 32, 64)):
        if stage:
            size //= 2
        for b in range(n):
            layers += [_conv(f"stage{stage + 1}.{b}.conv1", cin, width, 3, size),
                       _conv(f"stage{stage + 1}.{b}.conv2", width, width, 3, size)]
            if projection and cin != width:
                layers.append(_conv(f"stage{stage + 1}.{b}.shortcut", cin, width, 1, size,
                                    kept=1))
            cin = width
    layers.append(_dense("fc", 64, 10))
    return LayersModel(name=name, layers=tuple(layers))


def resnet_t2t(name: str, blocks: int) -> LayersModel:
    """Tensor2Tensor's resnet_cifar (CM-DARE's): a 7x7 stem, `blocks` pre-activation blocks
    per stage of 32, 64 and 128 channels at 32, 16 and 8 pixels, a projection opening each
    stage, a dense classifier."""
    layers = [_conv("stem", 3, 16, 7, 32)]
    cin, size = 16, 32
    for stage, width in enumerate((32, 64, 128)):
        if stage:
            size //= 2
        for b in range(blocks):
            if b == 0:
                layers.append(_conv(f"stage{stage + 1}.shortcut", cin, width, 1, size, kept=1))
            layers += [_conv(f"stage{stage + 1}.{b}.conv1", cin, width, 3, size),
                       _conv(f"stage{stage + 1}.{b}.conv2", width, width, 3, size)]
            cin = width
    layers.append(_dense("logits", 128, 10))
    return LayersModel(name=name, layers=tuple(layers))


@functools.cache
def network_catalog() -> MappingProxyType[str, LayersModel]:
    """Catalog name -> network: resnet-32 (CIFAR-10), resnet-15-t2t and resnet-32-t2t
    (CM-DARE's CIFAR-10 ResNets), resnet-50, resnet-50-v1.5 and resnet-101 (ImageNet)."""
    return MappingProxyType({
        "resnet-32": resnet_cifar("resnet-32", 32),
        "resnet-15-t2t": resnet_t2t("resnet-15-t2t", 2),
        "resnet-32-t2t": resnet_t2t("resnet-32-t2t", 5),
        "resnet-50": resnet_imagenet("resnet-50", (3, 4, 6, 3)),
        "resnet-50-v1.5": resnet_imagenet("resnet-50-v1.5", (3, 4, 6, 3), v1_5=True),
        "resnet-101": resnet_imagenet("resnet-101", (3, 4, 23, 3)),
    })
