"""Composite blocks of the vendor's `ai8x_blocks` module, built from ai8x_torch layers.

Vendor model files (MobileNetV2, EfficientNetV2, SqueezeNet-style networks) import
`ai8x_blocks` next to `ai8x`; with

    sys.modules["ai8x"] = ai8x_torch
    sys.modules["ai8x_blocks"] = ai8x_torch.blocks

they run unchanged. The sub-module attribute names (`conv1`, `resid`, `expand_conv`, ...)
are the vendor's, so its checkpoints load strictly.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from . import modules as _m
from .modules import FAMILIES

_F = FAMILIES  # the generated layer families (FusedConv2dBNReLU, ...)


class _NoResidual(nn.Module):
    """Where a block has no skip connection: returns its first argument."""

    def forward(self, *x: torch.Tensor) -> torch.Tensor:
        return x[0]


class Fire(nn.Module):
    """SqueezeNet fire block: a 1x1 squeeze, then 1x1 and 3x3 expansions concatenated on
    the channels (all with ReLU)."""

    def __init__(self, in_planes: int, squeeze_planes: int, expand1x1_planes: int,
                 expand3x3_planes: int, bias: bool = True, **kwargs) -> None:
        super().__init__()
        relu = _F["FusedConv2dReLU"]
        self.squeeze_layer = relu(in_channels=in_planes, out_channels=squeeze_planes,
                                  kernel_size=1, bias=bias, **kwargs)
        self.expand1x1_layer = relu(in_channels=squeeze_planes, out_channels=expand1x1_planes,
                                    kernel_size=1, bias=bias, **kwargs)
        self.expand3x3_layer = relu(in_channels=squeeze_planes, out_channels=expand3x3_planes,
                                    kernel_size=3, padding=1, bias=bias, **kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.squeeze_layer(x)
        return torch.cat([self.expand1x1_layer(s), self.expand3x3_layer(s)], 1)


def _expand(in_channels: int, hidden: int, bias: bool, kwargs: dict) -> nn.Module:
    # No expansion layer when the factor keeps the width (the vendor's `Empty`).
    if hidden == in_channels:
        return _m.Empty()
    return _F["FusedConv2dBNReLU"](in_channels, hidden, 1, padding=0, bias=bias, **kwargs)


class ResidualBottleneck(nn.Module):
    """MobileNetV2 inverted residual with ReLU (the hardware has no ReLU6): 1x1 expansion
    (BN, ReLU), 3x3 depthwise (ReLU; BN when `depthwise_bias`; a stride is max pooling
    of that size), 1x1 projection (BN), and an `Add` skip when the shape is kept."""

    NoResidual = _NoResidual

    def __init__(self, in_channels: int, out_channels: int, expansion_factor: float,
                 stride: int = 1, bias: bool = False, depthwise_bias: bool = False,
                 **kwargs) -> None:
        super().__init__()
        self.stride = stride
        hidden = int(round(in_channels * expansion_factor))
        self.conv1 = _expand(in_channels, hidden, bias, kwargs)
        bn = "BN" if depthwise_bias else ""
        if stride == 1:
            self.conv2 = _F[f"FusedDepthwiseConv2d{bn}ReLU"](
                hidden, hidden, 3, padding=1, stride=stride, bias=depthwise_bias, **kwargs)
        else:
            self.conv2 = _F[f"FusedMaxPoolDepthwiseConv2d{bn}ReLU"](
                hidden, hidden, 3, padding=1, pool_size=stride, pool_stride=stride,
                bias=depthwise_bias, **kwargs)
        self.conv3 = _F["FusedConv2dBN"](hidden, out_channels, 1, bias=bias, **kwargs)
        self.resid = _m.Add() if stride == 1 and in_channels == out_channels \
            else _NoResidual()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.resid(self.conv3(self.conv2(self.conv1(x))), x)


class ConvResidualBottleneck(nn.Module):
    """`ResidualBottleneck` with an ordinary 3x3 convolution (no activation) in place of
    the depthwise one and no projection layer."""

    NoResidual = _NoResidual

    def __init__(self, in_channels: int, out_channels: int, expansion_factor: float,
                 stride: int = 1, bias: bool = False, depthwise_bias: bool = False,
                 **kwargs) -> None:
        super().__init__()
        self.stride = stride
        hidden = int(round(in_channels * expansion_factor))
        self.conv1 = _expand(in_channels, hidden, bias, kwargs)
        if stride == 1:
            cls = _F["FusedConv2dBN"] if depthwise_bias else _m.Conv2d
            self.conv2 = cls(hidden, out_channels, 3, padding=1, stride=stride,
                             bias=depthwise_bias, **kwargs)
        else:
            cls = _F["FusedMaxPoolConv2dBN"] if depthwise_bias else _F["FusedMaxPoolConv2d"]
            self.conv2 = cls(hidden, out_channels, 3, padding=1, pool_size=stride,
                             pool_stride=stride, bias=depthwise_bias, **kwargs)
        self.resid = _m.Add() if stride == 1 and in_channels == out_channels \
            else _NoResidual()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.resid(self.conv2(self.conv1(x)), x)


class MBConvBlock(nn.Module):
    """EfficientNetV2 block: optional expansion (1x1, or kxk when `fused`), a depthwise
    kxk convolution unless `fused`, optional squeeze-and-excitation (computed in
    software: global average, sigmoid), 1x1 projection, and an `Add` skip when the
    shape is kept. BatchNorm layers use eps 1e-3 and momentum 0.01."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3,
                 stride: int = 1, bias: bool = False, se_ratio: float | None = None,
                 expand_ratio: int = 1, fused: bool = False, **kwargs) -> None:
        super().__init__()
        self.has_se = se_ratio is not None and 0 < se_ratio <= 1
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.stride = stride
        self.expand_ratio = expand_ratio
        self.fused = fused
        width = in_channels * expand_ratio
        bn = dict(batchnorm="Affine", bias=bias, eps=1e-03, momentum=0.01)
        bn_relu = _F["FusedConv2dBNReLU"]
        if expand_ratio != 1:
            if fused is True:
                self.expand_conv = bn_relu(in_channels, width, kernel_size=kernel_size,
                                           padding=1, **bn, **kwargs)
            else:
                self.expand_conv = bn_relu(in_channels, width, 1, **bn, **kwargs)
        if fused is not True:
            self.depthwise_conv = bn_relu(in_channels=width, out_channels=width, groups=width,
                                          padding=1, kernel_size=kernel_size, stride=stride,
                                          **bn, **kwargs)
        if self.has_se:
            squeezed = max(1, int(in_channels * se_ratio))
            self.se_reduce = _F["FusedConv2dReLU"](in_channels=width, out_channels=squeezed,
                                                   kernel_size=1, stride=1, bias=bias,
                                                   **kwargs)
            self.se_expand = _m.Conv2d(in_channels=squeezed, out_channels=width,
                                       kernel_size=1, stride=1, bias=bias, **kwargs)
        self.project_conv = _F["FusedConv2dBN"](in_channels=width, out_channels=out_channels,
                                                kernel_size=1, **bn, **kwargs)
        self.resid = _m.Add()

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        x = inputs
        if self.expand_ratio != 1:
            x = self.expand_conv(x)
        if self.fused is not True:
            x = self.depthwise_conv(x)
        if self.has_se:
            s = self.se_expand(self.se_reduce(F.adaptive_avg_pool2d(x, 1)))
            x = torch.sigmoid(s) * x
        x = self.project_conv(x)
        if self.stride == 1 and self.in_channels == self.out_channels:
            x = self.resid(x, inputs)
        return x


__all__ = ["ConvResidualBottleneck", "Fire", "MBConvBlock", "ResidualBottleneck"]
