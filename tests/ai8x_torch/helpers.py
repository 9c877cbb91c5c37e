"""Shared helpers: give a model random quantized parameters, run both exact paths."""
from __future__ import annotations

import numpy as np
import torch

import ai8x_torch as ai8x
import custom_ops


def fill_layer(layer: ai8x.QuantizationAwareModule, rng: np.random.Generator, *,
               bits: int = 8, binary: bool = False, extreme: int | None = None,
               shift: int | None = None, shift_range: tuple[int, int] = (-3, 2),
               extreme_bias: bool = False) -> None:
    """Random quantized values in one layer, as a -q checkpoint holds them.

    Weights are integers of `bits` bits (or -1/+1 with `binary`, or all `extreme`); the
    stored bias is an 8-bit value (-128 with `extreme_bias`) times 2**(bits - 1) (golden
    README, checkpoint conventions); the stored output shift is `shift` or random in
    `shift_range` (inclusive).
    """
    if layer.op is None:
        return
    w = layer.op.weight
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if extreme is not None:
        values = np.full(w.shape, extreme)
    elif binary:
        values = rng.choice([-1, 1], size=w.shape)
    else:
        values = rng.integers(lo, hi + 1, size=w.shape)
    w.data = torch.from_numpy(values.astype(np.float32))
    if layer.op.bias is not None:
        b = np.full(layer.op.bias.shape, -128) if extreme is not None and extreme_bias \
            else rng.integers(-128, 128, size=layer.op.bias.shape)
        layer.op.bias.data = torch.from_numpy((b * 2.0 ** (bits - 1)).astype(np.float32))
    layer.weight_bits.data = torch.tensor([bits])
    layer.bias_bits.data = torch.tensor([bits])
    layer.quantize_activation.data = torch.tensor([True])
    layer.adjust_output_shift.data = torch.tensor([False])
    s = int(rng.integers(shift_range[0], shift_range[1] + 1)) if shift is None else shift
    layer.output_shift.data = torch.tensor([float(s)])


def randomize(model: torch.nn.Module, rng: np.random.Generator, *, bits: int = 8,
              shift_range: tuple[int, int] = (-3, 2), binary: bool = False,
              extreme: int | None = None) -> None:
    """`fill_layer` on every layer of the model."""
    for layer in model.modules():
        if isinstance(layer, ai8x.QuantizationAwareModule):
            fill_layer(layer, rng, bits=bits, binary=binary, extreme=extreme,
                       shift_range=shift_range)


def simulate(model: torch.nn.Module, x: np.ndarray, device: int = 85,
             round_avg: bool = False) -> list[np.ndarray]:
    model.eval()  # inference: Dropout and BatchNorm statistics must not change anything
    with ai8x.using_device(device, simulate=True, round_avg=round_avg), torch.no_grad():
        out = model(torch.from_numpy(x.astype(np.float32)))
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.numpy() for o in outs]


def reference(model: torch.nn.Module, x: np.ndarray, path, device: int = 85,
              round_avg: bool = False) -> list[np.ndarray]:
    """Export (checking it with the full ONNX checker) and run the onnxruntime reference."""
    with ai8x.using_device(device, round_avg=round_avg):
        ai8x.export_onnx(model, torch.from_numpy(x[:1].astype(np.float32)), path)
    return custom_ops.run(custom_ops.session(path), x)


def assert_same(sim: list[np.ndarray], ref: list[np.ndarray]) -> None:
    assert len(sim) == len(ref)
    for s, r in zip(sim, ref, strict=True):
        r = np.asarray(r)
        s = np.asarray(s)
        assert np.all(s == np.round(s)), "simulate mode gave non-integers"
        np.testing.assert_array_equal(s.reshape(r.shape).astype(np.int64), r.astype(np.int64))
