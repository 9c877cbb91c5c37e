"""The golden corpus's zoo networks, written with ai8x_torch as a vendor model file would be.

Each definition follows the case's `network.yaml` (operators, kernels, padding, pooling,
activations, the wide linear output) and its checkpoint's key names and shapes; the
layer attribute names are the checkpoint's layer names, so `load_state_dict` is strict.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

import ai8x_torch as ai8x


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.view(x.size(0), -1)


class MnistNet(nn.Module):
    """ai85net5: 1x28x28 -> four 3x3 convolutions -> wide linear (ai85-mnist)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = ai8x.FusedConv2dReLU(1, 60, 3, padding=1, bias=False)
        self.conv2 = ai8x.FusedMaxPoolConv2dReLU(60, 60, 3, pool_size=2, pool_stride=2,
                                                 padding=2, bias=False)
        self.conv3 = ai8x.FusedMaxPoolConv2dReLU(60, 56, 3, pool_size=2, pool_stride=2,
                                                 padding=1, bias=False)
        self.conv4 = ai8x.FusedAvgPoolConv2dReLU(56, 12, 3, pool_size=2, pool_stride=2,
                                                 padding=1, bias=False)
        self.fc = ai8x.Linear(12 * 4 * 4, 10, bias=True, wide=True)

    def forward(self, x):
        x = self.conv4(self.conv3(self.conv2(self.conv1(x))))
        return self.fc(_flat(x))


class KwsNet(nn.Module):
    """ai85kws20netv3 / ai87kws20netv3: 1-D convolutions over 128 time steps of 128
    channels, then a wide linear layer (ai85-kws20_v3, ai87-kws20_v3_1)."""

    def __init__(self, pool_pad: int, last_kernel: int, fc_in: int, bias: bool) -> None:
        super().__init__()
        self.voice_conv1 = ai8x.FusedConv1dReLU(128, 100, 1, padding=0, bias=bias)
        self.voice_conv2 = ai8x.FusedConv1dReLU(100, 96, 3, padding=0, bias=bias)
        self.voice_conv3 = ai8x.FusedMaxPoolConv1dReLU(96, 64, 3, pool_size=2, pool_stride=2,
                                                       padding=pool_pad, bias=bias)
        self.voice_conv4 = ai8x.FusedConv1dReLU(64, 48, 3, padding=0, bias=bias)
        self.kws_conv1 = ai8x.FusedMaxPoolConv1dReLU(48, 64, 3, pool_size=2, pool_stride=2,
                                                     padding=pool_pad, bias=bias)
        self.kws_conv2 = ai8x.FusedConv1dReLU(64, 96, 3, padding=0, bias=bias)
        self.kws_conv3 = ai8x.FusedAvgPoolConv1dReLU(96, 100, 3, pool_size=2, pool_stride=2,
                                                     padding=pool_pad, bias=bias)
        self.kws_conv4 = ai8x.FusedMaxPoolConv1dReLU(100, 64, last_kernel, pool_size=2,
                                                     pool_stride=2, padding=pool_pad,
                                                     bias=bias)
        self.fc = ai8x.Linear(fc_in, 21, bias=bias, wide=True)

    def forward(self, x):
        for layer in (self.voice_conv1, self.voice_conv2, self.voice_conv3, self.voice_conv4,
                      self.kws_conv1, self.kws_conv2, self.kws_conv3, self.kws_conv4):
            x = layer(x)
        return self.fc(_flat(x))


class CifarNasNet(nn.Module):
    """ai85nascifarnet: ten convolutions (3x3 and 1x1) and a wide linear layer."""

    def __init__(self) -> None:
        super().__init__()
        c = ai8x
        self.conv1_1 = c.FusedConv2dReLU(3, 64, 3, padding=1, bias=True)
        self.conv1_2 = c.FusedConv2dReLU(64, 32, 1, padding=0, bias=True)
        self.conv1_3 = c.FusedConv2dReLU(32, 64, 3, padding=1, bias=True)
        self.conv2_1 = c.FusedMaxPoolConv2dReLU(64, 32, 3, pool_size=2, pool_stride=2,
                                                padding=1, bias=True)
        self.conv2_2 = c.FusedConv2dReLU(32, 64, 1, padding=0, bias=True)
        self.conv3_1 = c.FusedMaxPoolConv2dReLU(64, 128, 3, pool_size=2, pool_stride=2,
                                                padding=1, bias=True)
        self.conv3_2 = c.FusedConv2dReLU(128, 128, 1, padding=0, bias=True)
        self.conv4_1 = c.FusedMaxPoolConv2dReLU(128, 64, 3, pool_size=2, pool_stride=2,
                                                padding=1, bias=True)
        self.conv4_2 = c.FusedConv2dReLU(64, 128, 3, padding=1, bias=True)
        self.conv5_1 = c.FusedMaxPoolConv2dReLU(128, 128, 1, pool_size=2, pool_stride=2,
                                                padding=0, bias=True)
        self.fc = c.Linear(512, 10, bias=True, wide=True)

    def forward(self, x):
        for layer in (self.conv1_1, self.conv1_2, self.conv1_3, self.conv2_1, self.conv2_2,
                      self.conv3_1, self.conv3_2, self.conv4_1, self.conv4_2, self.conv5_1):
            x = layer(x)
        return self.fc(_flat(x))


class CatsDogsNet(nn.Module):
    """ai85cdnet: 3x128x128 -> six 3x3 convolutions -> wide linear (two classes)."""

    def __init__(self) -> None:
        super().__init__()
        c = ai8x
        self.conv1 = c.FusedConv2dReLU(3, 16, 3, padding=1, bias=False)
        self.conv2 = c.FusedMaxPoolConv2dReLU(16, 32, 3, pool_size=2, pool_stride=2,
                                              padding=1, bias=False)
        self.conv3 = c.FusedMaxPoolConv2dReLU(32, 64, 3, pool_size=2, pool_stride=2,
                                              padding=1, bias=False)
        self.conv4 = c.FusedMaxPoolConv2dReLU(64, 32, 3, pool_size=2, pool_stride=2,
                                              padding=1, bias=False)
        self.conv5 = c.FusedMaxPoolConv2dReLU(32, 32, 3, pool_size=2, pool_stride=2,
                                              padding=1, bias=False)
        self.conv6 = c.FusedConv2dReLU(32, 16, 3, padding=1, bias=False)
        self.fc = c.Linear(16 * 8 * 8, 2, bias=True, wide=True)

    def forward(self, x):
        for layer in (self.conv1, self.conv2, self.conv3, self.conv4, self.conv5, self.conv6):
            x = layer(x)
        return self.fc(_flat(x))


ZOO = {
    "ai85-mnist": (85, MnistNet, {}),
    # The checkpoint holds every layer twice: `module.<layer>` without a bias (the
    # spelling the vendor tool reads, it comes first) and `<layer>` with one.
    "ai85-kws20_v3": (85, KwsNet, {"pool_pad": 1, "last_kernel": 6, "fc_in": 256,
                                   "bias": False}),
    "ai85-cifar-10": (85, CifarNasNet, {}),
    "ai85-cats-dogs": (85, CatsDogsNet, {}),
    "ai87-kws20_v3_1": (87, KwsNet, {"pool_pad": 0, "last_kernel": 3, "fc_in": 192,
                                     "bias": False}),
    "ai87-cats-dogs": (87, CatsDogsNet, {}),
}


def zoo_model(name: str) -> nn.Module:
    """The case's network, untrained, built for the case's device."""
    device, cls, kwargs = ZOO[name]
    with ai8x.using_device(device):
        return cls(**kwargs)


def zoo_device(name: str) -> int:
    """The case's device number (85: MAX78000, 87: MAX78002)."""
    return ZOO[name][0]


def load_zoo(name: str, golden: Path | None = None) -> nn.Module:
    """The case's network with its quantized checkpoint loaded strictly (safe unpickling),
    in eval mode. `golden` defaults to the corpus tests/conftest.py points at."""
    if golden is None:
        from tests.conftest import GOLDEN

        golden = GOLDEN
    model = zoo_model(name)
    state = ai8x.checkpoint_state_dict(Path(golden) / name / "checkpoint.pth.tar")
    model.load_state_dict(state, strict=True)
    return model.eval()
