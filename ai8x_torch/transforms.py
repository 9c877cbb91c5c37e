"""Data transforms and software layers of the vendor's `ai8x` module."""
from __future__ import annotations

import torch
from torch import nn

from .device import current_device


class normalize:  # noqa: N801 - the vendor's name, used by existing data loaders
    """Scale an image in [0, 1] to the accelerator's signed 8-bit input.

    (x - 0.5) * 256, rounded and saturated to [-128, 127]; divided by 128 (the [-1, 1)
    training range) unless `args.act_mode_8bit` (seed 000, "Data Format").
    """

    def __init__(self, args) -> None:
        self.args = args

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        q = torch.clamp(torch.round((img - 0.5) * 256.0), -128, 127)
        return q if getattr(self.args, "act_mode_8bit", False) else q / 128.0


class fold:  # noqa: N801 - the vendor's name
    """Data folding: move `fold_ratio` x `fold_ratio` pixel phases into channels
    (seed 000, "Data Folding"). Channel order: for each row phase i, column phase j,
    all channels of img[:, i::r, j::r]."""

    def __init__(self, fold_ratio: int) -> None:
        self.fold_ratio = fold_ratio

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        r = self.fold_ratio
        if r == 1:
            return img
        return torch.cat([img[:, i::r, j::r] for i in range(r) for j in range(r)], dim=0)


def unfold_batch(img_batch: torch.Tensor, fold_ratio: int) -> torch.Tensor:
    """Undo `fold` on a batch (N, C * r * r, H / r, W / r) -> (N, C, H, W)."""
    r = fold_ratio
    if r == 1:
        return img_batch
    n, c_folded, h, w = img_batch.shape
    c = c_folded // (r * r)
    out = img_batch.new_zeros((n, c, h * r, w * r))
    for k, (i, j) in enumerate((i, j) for i in range(r) for j in range(r)):
        out[:, :, i::r, j::r] = img_batch[:, k * c:(k + 1) * c]
    return out


class FusedSoftwareLinearReLU(nn.Module):
    """A linear layer computed by the CPU, not the accelerator (the vendor's AI84 helper).

    It is not a hardware layer: export rejects it. In simulate mode the result is
    rounded and saturated to the vendor's 16-bit software activation range.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool | None = None,
                 relu: bool = True) -> None:
        super().__init__()
        self.op = nn.Linear(in_features, out_features, bias is True)
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.op(x)
        if self.relu:
            x = torch.relu(x)
        if current_device().simulate:
            bits = current_device().FC_ACTIVATION_BITS
            x = torch.floor(x / 2 ** (current_device().DATA_BITS - 1) + 0.5)
            return torch.clamp(x, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return torch.clamp(x, -1.0, 127.0 / 128.0)


class SoftwareLinear(FusedSoftwareLinearReLU):
    """A software linear layer without ReLU."""

    def __init__(self, in_features: int, out_features: int, **kwargs) -> None:
        super().__init__(in_features, out_features, relu=False, **kwargs)
