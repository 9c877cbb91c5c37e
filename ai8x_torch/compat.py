"""Smaller helpers of the vendor's `ai8x` module that training scripts and data loaders use.

The layer modules do not use these (their arithmetic is in modules.py); they exist so
code written against the vendor's module keeps running after
`sys.modules["ai8x"] = ai8x_torch`. Each follows the numeric mode `set_device` selected.
"""
from __future__ import annotations

import torch
from torch import nn

from .device import Device, current_device, make_device
from .modules import Empty
from .quant import straight_through


class Clamp(nn.Module):
    """Saturate to [min_val, max_val] (either bound may be None)."""

    def __init__(self, min_val: float | None = None, max_val: float | None = None) -> None:
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, min=self.min_val, max=self.max_val)


class Quantize(nn.Module):
    """Round to a `num_bits` grid with a straight-through gradient.

    Training: floor(x * 2**(bits - extra - 1) + 0.5) / 2**(bits - 1). Simulate (values are
    integers scaled by 2**(bits - 1)): floor(x / 2**(bits + extra - 1) + 0.5) for
    bits > 1, floor(x * 2**(1 - bits - extra) + 0.5) for bits < 1 (the vendor's
    `QuantizationFunction`).
    """

    def __init__(self, num_bits: int = 8, num_extra_bit_shift: int = 0) -> None:
        super().__init__()
        self.num_bits = num_bits
        self.num_extra_bit_shift = num_extra_bit_shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bits, extra = self.num_bits, self.num_extra_bit_shift
        if current_device().simulate:
            if bits > 1:
                y = torch.floor(x / 2.0 ** (bits + extra - 1) + 0.5)
            elif bits < 1:
                y = torch.floor(x * 2.0 ** (1 - bits - extra) + 0.5)
            else:
                y = torch.floor(x + 0.5)
        else:
            y = torch.floor(x * 2.0 ** (bits - extra - 1) + 0.5) / 2.0 ** (bits - 1)
        return straight_through(x, y)


class Floor(nn.Module):
    """floor(x), straight-through gradient."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return straight_through(x, torch.floor(x))


class AvgPoolFloor(nn.Module):
    """Rounding toward zero (the vendor's average-pool "floor"), straight-through."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return straight_through(x, torch.trunc(x))


class Round(nn.Module):
    """torch.round (half to even), straight-through."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return straight_through(x, torch.round(x))


class Scaler(nn.Module):
    """x * s, floored in simulate mode."""

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        y = x * s
        return straight_through(y, torch.floor(y)) if current_device().simulate else y


class _PoolGrid(nn.Module):
    """Average-pool output rounded to the 8-bit activation grid during QAT (x scaled by
    2**(ACTIVATION_BITS - 1), rounded half to even or toward zero, scaled back), with a
    straight-through gradient: the vendor's RoundQat / FloorQat."""

    def __init__(self, to_even: bool) -> None:
        super().__init__()
        self.to_even = to_even

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        factor = 2.0 ** (current_device().ACTIVATION_BITS - 1)
        y = x * factor
        y = torch.round(y) if self.to_even else torch.trunc(y)
        return straight_through(x, y / factor)


def quantize_clamp(wide: bool, quantize_activation: bool = False,
                   weight_bits: int = 8) -> tuple[nn.Module, nn.Module]:
    """(quantize, clamp) modules for a layer's output in the mode selected now (vendor
    API; its NAS layers, ai8x_nas.py, build their output stage with it).

    Simulate: 8-bit outputs are rounded from the accumulator's DATA_BITS scale and
    saturated to the signed activation range; wide outputs keep DATA_BITS - weight_bits
    + 1 bits and saturate to the full accumulator. Training: activations quantize to
    ACTIVATION_BITS (wide: WIDE_LAYER_RESOLUTION_BITS) only in QAT, and clamp to
    [-1, 127/128] (wide: the accumulator's range above the two 8-bit fractions).
    """
    dev = current_device()
    if dev.simulate:
        if not wide:
            return (Quantize(num_bits=dev.DATA_BITS),
                    Clamp(-(2 ** (dev.ACTIVATION_BITS - 1)), 2 ** (dev.ACTIVATION_BITS - 1) - 1))
        return (Quantize(num_bits=dev.DATA_BITS - weight_bits + 1),
                Clamp(-(2 ** (dev.FULL_ACC_BITS - 1)), 2 ** (dev.FULL_ACC_BITS - 1) - 1))
    quantize: nn.Module = Empty()
    if quantize_activation:
        quantize = Quantize(num_bits=dev.WIDE_LAYER_RESOLUTION_BITS if wide
                            else dev.ACTIVATION_BITS)
    if not wide:
        top = 2.0 ** (dev.ACTIVATION_BITS - 1)
        return quantize, Clamp(-1.0, (top - 1) / top)
    span = 2.0 ** (dev.FULL_ACC_BITS - 2 * (dev.DATA_BITS - 1) - 1)
    return quantize, Clamp(-span, span)


def quantize_clamp_pool(pooling: str | None,
                        quantize_activation: bool = False) -> tuple[nn.Module, nn.Module]:
    """(quantize, clamp) modules after a layer's pooling (vendor API). Only average
    pooling changes values: simulate rounds it (half to even with round_avg, else toward
    zero) and saturates to DATA_BITS; training clamps to [-1, 127/128] and, in QAT, rounds
    to the activation grid."""
    dev = current_device()
    if pooling != "Avg":
        return Empty(), Empty()
    if dev.simulate:
        return (Round() if dev.round_avg else AvgPoolFloor(),
                Clamp(-(2 ** (dev.DATA_BITS - 1)), 2 ** (dev.DATA_BITS - 1) - 1))
    quantize: nn.Module = _PoolGrid(dev.round_avg) if quantize_activation else Empty()
    return quantize, Clamp(-1.0, 127.0 / 128.0)


def quantile(x: torch.Tensor, q: float) -> torch.Tensor:
    """The vendor's quantile for the QAT output shift: linear interpolation over the
    sorted values placed at (2i + 1) / (2n) (differs from `torch.quantile` for q < 1)."""
    from .modules import _vendor_quantile

    return _vendor_quantile(x, q)


def DevAI84(simulate: bool, round_avg: bool) -> Device:  # noqa: N802 - vendor class name
    """The AI84 limits (the vendor's device class, here an immutable record)."""
    return make_device(84, simulate, round_avg)


def DevAI85(simulate: bool, round_avg: bool) -> Device:  # noqa: N802
    """The MAX78000 limits."""
    return make_device(85, simulate, round_avg)


def DevAI87(simulate: bool, round_avg: bool) -> Device:  # noqa: N802
    """The MAX78002 limits."""
    return make_device(87, simulate, round_avg)


def onnx_export_prep(m: nn.Module, simplify: bool = False, remove_clamp: bool = False) -> None:
    """Vendor API that swaps training-only modules before `torch.onnx.export`. Nothing to
    swap here: `ai8x_torch.export_onnx` writes ai8x-ONNX from the quantized layers."""
    del m, simplify, remove_clamp


class bayer_filter:  # noqa: N801 - the vendor's name, used by data loaders
    """An RGB image (3, H, W) sampled through a Bayer mosaic to one channel (1, H, W):
    even rows G B G B ..., odd rows R G R G ... (the vendor's mosaic)."""

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(1, img.shape[1], img.shape[2], dtype=img.dtype)
        out[0, 0::2, 0::2] = img[1, 0::2, 0::2]
        out[0, 0::2, 1::2] = img[2, 0::2, 1::2]
        out[0, 1::2, 0::2] = img[0, 1::2, 0::2]
        out[0, 1::2, 1::2] = img[1, 1::2, 1::2]
        return out
