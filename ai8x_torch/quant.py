"""Rounding and quantization functions with straight-through gradients.

Quantization-aware training rounds in the forward pass and passes the gradient through
unchanged (a straight-through estimator): rounding has a zero gradient almost everywhere,
which would stop training otherwise.
"""
from __future__ import annotations

import torch


def straight_through(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """`y` in the forward pass, the identity's gradient with respect to `x` backwards."""
    return x + (y - x).detach()


def round_half_up(x: torch.Tensor) -> torch.Tensor:
    """floor(x + 0.5): the accelerator's rounding of the output stage (seed 000,
    "Data Format"), with a straight-through gradient."""
    return straight_through(x, torch.floor(x + 0.5))


def truncate(x: torch.Tensor) -> torch.Tensor:
    """Rounding toward zero: the accelerator's average pooling (the vendor calls it
    "floor"; its simulator takes the integer mean, which truncates)."""
    return straight_through(x, torch.trunc(x))


def round_half_away(x: torch.Tensor) -> torch.Tensor:
    """Rounding to nearest, halves away from zero (average pooling with the vendor's
    `--avg-pool-rounding`)."""
    return straight_through(x, torch.sign(x) * torch.floor(torch.abs(x) + 0.5))


def quantize(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Round `x` (a value in [-1, 1)) to the grid of a `bits`-bit two's complement
    fraction: floor(x * 2**(bits-1) + 0.5) / 2**(bits-1)."""
    scale = float(2 ** (bits - 1))
    return round_half_up(x * scale) / scale


def clamp_fraction(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Saturate to the range of a `bits`-bit fraction, [-1, (2**(bits-1) - 1) / 2**(bits-1)]."""
    scale = float(2 ** (bits - 1))
    return torch.clamp(x, -1.0, (scale - 1.0) / scale)
