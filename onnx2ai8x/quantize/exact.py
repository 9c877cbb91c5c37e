"""Exact recovery of models that already hold the accelerator's integers (issue 13).

The vendor's training repository exports its layers as float ONNX: convolution weights
that are integers (a quantized `-q` checkpoint) or fake-quantized fractions (QAT weights,
the quantization folded to constants), a multiplication by 2**output_shift and the 8-bit
output clamp Clip(-1, 127/128) with activations scaled to [-1, 1); the hardware's rounding
is dropped. The float front end folds the multiplication into the weights and bias and
records the clamp, so each layer computes y = conv(x, W') + B' in float units, with input
codes of u_in and output codes of u_out (u = 1/128 for [-1, 1) activations).

The hardware layer computes y_int = floor(0.5 + (sum(q * W_int) + 128 * bias_hw) * 2**T /
128) (custom_ops/README.md; seed 000, "Output Shift"). The float layer is that layer
without the rounding exactly when

    W' = W_int * unit with W_int in the b-bit range and unit a power of two,
    2**T = 128 * u_in * unit / u_out with T an integer in [-15, 15], and
    bias_hw = B' / (u_out * 2**T) an integer in [-128, 127].

W_int is the representation that uses the b-bit range best (what quantization with a
power-of-two scale produces), b the fewest bits that hold the weights exactly. A wide
(32-bit) output layer has no shift: float = u_in * unit * (sum(q * W_int) + 128 bias_hw).
When every layer passes, no calibration is needed; otherwise the model is an ordinary
float model.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..network import ACT_ABS, ACT_RELU, Layer

BITS = (1, 2, 4, 8)
_TOL = 1e-6


def _is_int(a: np.ndarray) -> bool:
    return bool(np.all(np.abs(a - np.round(a)) <= _TOL * np.maximum(1.0, np.abs(a))))


def _pow2(v: float) -> int | None:
    if v <= 0 or not math.isfinite(v):
        return None
    k = round(math.log2(v))
    return k if abs(v - 2.0 ** k) <= 1e-9 * v else None


def integer_weights(w: np.ndarray) -> list[tuple[int, float, np.ndarray]]:
    """Every (bits, unit, W_int) with w == W_int * unit exactly, fewest bits first and,
    per width, the finest unit (the best use of the range) first."""
    w = np.asarray(w, np.float64)
    peak = float(np.max(np.abs(w))) if w.size else 0.0
    if peak == 0.0:
        return [(8, 1.0, np.zeros(w.shape, np.int64))]
    found = []
    for bits in BITS:
        lo, hi = (-1, 0) if bits == 1 else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        # the smallest power-of-two unit that keeps the values within the range
        unit = 2.0 ** (math.ceil(math.log2(peak / max(hi, 1))) - 1)
        for k in range(12):
            u = unit * 2.0 ** k
            q = w / u
            if not _is_int(q):
                break  # a coarser unit cannot divide the values either
            if q.min() >= lo - _TOL and q.max() <= hi + _TOL:
                found.append((bits, u, np.round(q).astype(np.int64)))
    return found


def recover(fm) -> tuple[tuple[Layer, ...], float, tuple[float, ...]] | None:
    """The integer layers, the input scale and every layer's output scale of `fm` (a
    FloatModel) when it is an exact export of hardware layers; None when it is not."""
    return recover_or_why(fm)[0]


def recover_or_why(fm):
    """`recover`'s result, or None and (layer name, why it is not exact)."""
    net = fm.network
    clips = [info.clip_max for info in fm.layers if info.clip_max is not None]
    if not clips:
        return None, ("model", "no layer ends with the 8-bit clamp")
    canonical = fm.canonical
    if canonical is not None and canonical.fact("activation_quant") is not None:
        # A quantized model (dialects/qdq) states its grids: exact only where every
        # scale is a power of two with zero point 0; the input's is its own.
        u = canonical.fact("input_scale")
        if not canonical.fact("pow2") or u is None:
            return None, ("model", "the quantized model's scales are not all powers of two")
        u = u * fm.input_gain  # the codes layer 0 reads, after the model's own scaling
    else:
        # One code size for the whole network (the vendor's [-1, 1) activations: 1/128).
        u = clips[0] / 127.0
        if any(abs(c / 127.0 - u) > _TOL * u for c in clips):
            return None, ("model", "the layers' clamps differ")
    # The weight bits an exporter dialect read from the model (the vendor export's QAT
    # quantization factors): preferred among the exact representations.
    stated = {} if canonical is None else canonical.fact("weight_bits", {}) or {}
    outputs = set(fm.outputs)
    units: list[float] = []
    layers: list[Layer] = []
    for i, lay in enumerate(net.layers):
        sources = lay.in_sequences or (i - 1,)
        ins = [u if s < 0 else units[s] for s in sources]
        if any(abs(v - ins[0]) > _TOL * ins[0] for v in ins):
            # operands the hardware adds or concatenates code by code must share one
            # code size; a source that rescales them before combining is not exact
            return None, (lay.name, "its operands have different scales")
        u_in = ins[0]
        if lay.operator.passthrough:
            layers.append(lay)
            units.append(u_in)
            continue
        info = fm.layers[i]
        chosen, why = _exact_layer(lay, info, i in outputs, u_in,
                                   stated.get(info.nodes[0] if info.nodes else None))
        if chosen is None:
            return None, (lay.name, why)
        bits, wq, shift, u_out, bias_hw, wide = chosen
        has_bias = bool(np.any(bias_hw != 0))
        layers.append(replace(
            lay, weights=wq, quantization=bits, output_shift=int(shift),
            output_width=32 if wide else 8, bias_hw=bias_hw if has_bias else None,
            bias=bias_hw * 128 if has_bias else None))
        units.append(u_out)
    # the mapping takes the user's input: q = x * gain / u
    return (tuple(layers), u / fm.input_gain, tuple(units)), None


def _exact_layer(lay: Layer, info, is_output: bool, u_in: float, stated: int | None):
    """(bits, W_int, shift, u_out, bias_hw, wide) of one layer, or None and why not."""
    b = np.asarray(lay.bias, np.float64)
    wide = info.clip_max is None and is_output and lay.activation is None
    if not wide and info.clip_max is None:
        return None, "an 8-bit layer without its clamp"
    if wide and lay.activation in (ACT_RELU, ACT_ABS):
        return None, "a wide output layer with an activation"
    candidates = integer_weights(lay.weights)
    if not candidates:
        return None, "the weights are not integers times a power of two"
    if stated is not None:
        candidates.sort(key=lambda c: c[0] != stated)
    # First the representations whose bias also fits the weights' width (how
    # quantization with one power-of-two scale for weights and bias makes them),
    # then any bias the 8-bit bias memory holds.
    for bias_fits_width in (True, False):
        for bits, unit, wq in candidates:
            if wide:
                shift, u_out = 0, u_in * unit
                bias_hw = b / (128.0 * u_out)
            else:
                u_out = info.clip_max / 127.0
                shift = _pow2(128.0 * u_in * unit / u_out)
                if shift is None or not -15 <= shift <= 15:
                    continue
                bias_hw = b / (u_out * 2.0 ** shift)
            lo, hi = (-128, 127) if not bias_fits_width or bits == 1 else (
                -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
            if _is_int(bias_hw) and bias_hw.min() >= lo - 0.5 and \
                    bias_hw.max() <= hi + 0.5:
                return (bits, wq, shift, u_out, np.round(bias_hw).astype(np.int64),
                        wide), None
    return None, ("no output shift in [-15, 15] and integer bias in [-128, 127] "
                  "represent the layer")


__all__ = ["integer_weights", "recover", "recover_or_why"]
