"""The matrix's rows as PyTorch modules, built from a kit of layers: plain `torch.nn`
(make_torch.py) or Brevitas' quantized layers (make_brevitas.py), so that one definition
gives both.

`kit.q()` marks where a quantized model requantizes (Brevitas: a `QuantIdentity`;
plain torch: nothing); `kit.inp()` quantizes the input. Weights are seeded defaults and
BatchNorm statistics are seeded non-trivial values (an untrained BatchNorm would be the
identity and test nothing).
"""
from __future__ import annotations

import torch
from torch import nn


class FloatKit:
    """Plain torch.nn."""

    def conv2d(self, cin, cout, k, **kw):
        return nn.Conv2d(cin, cout, k, **kw)

    def conv1d(self, cin, cout, k, **kw):
        return nn.Conv1d(cin, cout, k, **kw)

    def convt2d(self, cin, cout, k, **kw):
        return nn.ConvTranspose2d(cin, cout, k, **kw)

    def linear(self, cin, cout, **kw):
        return nn.Linear(cin, cout, **kw)

    def relu(self):
        return nn.ReLU()

    def q(self):
        return nn.Identity()

    def inp(self):
        return nn.Identity()

    can_relu6 = True


class Pair(nn.Module):
    """Two branches of one input, joined by `op` (add, sub, mul, cat)."""

    def __init__(self, a: nn.Module, b: nn.Module, op: str, after: nn.Module) -> None:
        super().__init__()
        self.a, self.b, self.op, self.after = a, b, op, after

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        if self.op == "add":
            y = a + b
        elif self.op == "sub":
            y = a - b
        elif self.op == "mul":
            y = a * b
        else:
            y = torch.cat([a, b], 1)
        return self.after(y)


class Residual(nn.Module):
    """x + body(x), then `after`."""

    def __init__(self, body: nn.Module, after: nn.Module) -> None:
        super().__init__()
        self.body, self.after = body, after

    def forward(self, x):
        return self.after(x + self.body(x))


class Flatten(nn.Module):
    def forward(self, x):
        return torch.flatten(x, 1)


class Abs(nn.Module):
    def forward(self, x):
        return torch.abs(x)


class Normalize(nn.Module):
    """(x - mean) / std per channel, as torchvision's Normalize writes it."""

    def __init__(self, mean, std) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).reshape(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).reshape(1, -1, 1, 1))

    def forward(self, x):
        return (x - self.mean) / self.std


def _bn(c: int, dims: int = 2) -> nn.Module:
    bn = nn.BatchNorm2d(c) if dims == 2 else nn.BatchNorm1d(c)
    g = torch.Generator().manual_seed(c)
    with torch.no_grad():
        bn.weight.copy_(0.5 + torch.rand(c, generator=g))
        bn.bias.copy_(0.2 * torch.randn(c, generator=g))
        bn.running_mean.copy_(0.3 * torch.randn(c, generator=g))
        bn.running_var.copy_(0.5 + torch.rand(c, generator=g))
    return bn


def build(row: str, K) -> nn.Module | None:  # noqa: C901 - one branch per row
    """Row `row` built with kit `K` (None: the kit cannot write it)."""
    S = nn.Sequential

    def c2(cin, cout, k=3, act=True, **kw):
        kw.setdefault("padding", k // 2)
        return S(K.conv2d(cin, cout, k, **kw), K.relu() if act else K.q())

    def c1(cin, cout, k=3, act=True, **kw):
        kw.setdefault("padding", k // 2)
        return S(K.conv1d(cin, cout, k, **kw), K.relu() if act else K.q())

    if row == "conv2d_3x3":
        return S(K.inp(), c2(3, 4))
    if row == "conv2d_valid":
        return S(K.inp(), c2(3, 4, padding=0, act=False))
    if row == "conv2d_1x1":
        return S(K.inp(), c2(3, 4, 1), nn.MaxPool2d(2))
    if row == "conv2d_stride2":
        return S(K.inp(), c2(3, 8, stride=2))
    if row == "conv2d_dilation2":
        return S(K.inp(), c2(3, 4, dilation=2, padding=2))
    if row == "conv2d_groups":
        return S(K.inp(), c2(3, 8), nn.MaxPool2d(2), c2(8, 8, groups=2))
    if row == "conv2d_depthwise":
        return S(K.inp(), c2(3, 8), nn.MaxPool2d(2), c2(8, 8, groups=8))
    if row == "conv2d_nobias":
        return S(K.inp(), c2(3, 4, bias=False))
    if row == "conv2d_5x5":
        return S(K.inp(), c2(3, 4, 5), c2(4, 4))
    if row == "conv1d_k9":
        return S(K.inp(), c1(8, 8, 9))
    if row == "conv1d":
        return S(K.inp(), c1(8, 8))
    if row == "conv1d_valid":
        return S(K.inp(), c1(8, 8, padding=0, act=False))
    if row == "conv1d_stride2":
        return S(K.inp(), c1(8, 8, stride=2))
    if row == "conv1d_dilation2":
        return S(K.inp(), c1(8, 8, dilation=2, padding=2))
    if row == "conv1d_depthwise":
        return S(K.inp(), c1(8, 8), c1(8, 8, groups=8))
    if row == "convtranspose2d":
        return S(K.inp(), c2(3, 4), nn.MaxPool2d(2),
                 K.convt2d(4, 4, 3, stride=2, padding=1, output_padding=1), K.relu())
    if row == "maxpool2d":
        return S(K.inp(), c2(3, 8), nn.MaxPool2d(2))
    if row == "avgpool2d":
        return S(K.inp(), c2(3, 8), nn.AvgPool2d(2), K.q())
    if row == "maxpool1d":
        return S(K.inp(), c1(8, 8), nn.MaxPool1d(2))
    if row == "avgpool1d":
        return S(K.inp(), c1(8, 8), nn.AvgPool1d(2), K.q())
    if row == "global_avgpool2d":
        return S(K.inp(), c2(3, 16), nn.AdaptiveAvgPool2d(1), K.q(), Flatten())
    if row == "global_maxpool2d":
        return S(K.inp(), c2(3, 16), nn.AdaptiveMaxPool2d(1), Flatten())
    if row == "global_avgpool1d":
        return S(K.inp(), c1(8, 16), nn.AdaptiveAvgPool1d(1), K.q(), Flatten())
    if row == "adaptive_avgpool2d":
        return S(K.inp(), c2(3, 4), nn.AdaptiveAvgPool2d(4), K.q())
    if row == "flatten_linear":
        return S(K.inp(), c2(3, 8), nn.MaxPool2d(2), Flatten(), K.linear(8 * 16, 10),
                 K.q())
    if row == "mlp":
        return S(K.inp(), Flatten(), K.linear(3 * 64, 16), K.relu(), K.linear(16, 10),
                 K.q())
    if row in ("add", "sub", "mul"):
        return S(K.inp(), c2(3, 4), nn.MaxPool2d(2),
                 Pair(c2(4, 4), c2(4, 4, act=False), row, K.q()))
    if row == "concat":
        return S(K.inp(), c2(3, 4), nn.MaxPool2d(2),
                 Pair(c2(4, 4), c2(4, 4, 1), "cat", K.q()))
    if row == "relu6":
        if not K.can_relu6:
            return None
        return S(K.inp(), K.conv2d(3, 4, 3, padding=1), nn.ReLU6())
    if row == "abs":
        return S(K.inp(), c2(3, 4, act=False), Abs(), K.q())
    if row == "no_activation":
        return S(K.inp(), c2(3, 8, act=False), nn.MaxPool2d(2), c2(8, 4, act=False))
    if row == "bn_fused":
        return S(K.inp(), K.conv2d(3, 4, 3, padding=1, bias=False), _bn(4), K.relu())
    if row == "bn_unfused":
        return S(K.inp(), c2(3, 8), nn.MaxPool2d(2), _bn(8), K.q(),
                 c2(8, 4, padding=0))
    if row == "input_norm":
        return S(Normalize([0.5, 0.3, 0.5], [0.25, 0.2, 0.3]), K.inp(), c2(3, 4),
                 nn.MaxPool2d(2))
    if row == "upsample2d":
        return S(K.inp(), c2(3, 4), nn.MaxPool2d(2), nn.Upsample(scale_factor=2),
                 c2(4, 4))
    if row == "upsample1d":
        return S(K.inp(), c1(8, 4), nn.Upsample(scale_factor=2), c1(4, 4))
    return None
