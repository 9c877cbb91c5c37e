"""Plain numpy statements of the `ai8x` ops and of a whole Network (int64 throughout).

This is the independent check of the ONNX path: it shares no code with the builder or
the FunctionProto kernels. Each function is written next to the hardware rule it
implements (seed 000 = the vendor's MAX78000/MAX78002 guide; the exact arithmetic is the
vendor simulator's, izer/simulate.py and izer/compute.py).
"""
from __future__ import annotations

import numpy as np

from onnx2ai8x.network import (
    ACT_ABS,
    ACT_RELU,
    DATA_BUFFER,
    ELTWISE_ADD,
    ELTWISE_MUL,
    ELTWISE_OR,
    ELTWISE_SUB,
    ELTWISE_XOR,
    Layer,
    Network,
    Op,
)
from onnx2ai8x.network import (
    output_layers as network_output_layers,
)

# ---------------------------------------------------------------------------------------
# The ops


def output_shift(x: np.ndarray, shift: int, weight_bits: int = 8) -> np.ndarray:
    """ai8x.OutputShift: floor(0.5 + x * 2**shift / 128), saturated to int32.

    The output stage divides the accumulator by 128 and applies the layer's shift with
    round-half-up (vendor simulate.py: `floor(0.5 + acc / (128 / 2**output_shift))`).
    Written over exact rationals: (x * 2**shift + 64) / 128 with Python integers.
    """
    del weight_bits  # informational: `shift` already holds the implicit 8 - bits shift
    flat = [int(v) for v in np.asarray(x).ravel()]
    out = []
    for v in flat:
        if shift >= 0:
            num, den = v * 2 ** shift + 64, 128
        else:
            num, den = v + 64 * 2 ** (-shift), 128 * 2 ** (-shift)
        out.append(min(max(num // den, -2 ** 31), 2 ** 31 - 1))
    return np.array(out, dtype=np.asarray(x).dtype).reshape(np.shape(x))


def clamp(x: np.ndarray, lo: int, hi: int, dtype=np.int8) -> np.ndarray:
    """ai8x.Clamp: saturate to [lo, hi] (8-bit output clipping, seed 000 "Data Format")."""
    return np.clip(np.asarray(x, dtype=np.int64), lo, hi).astype(dtype)


def pool_round(mean: np.ndarray, count: int, rounding: str = "truncate") -> np.ndarray:
    """ai8x.PoolRound: an average of `count` int8 values rounded to int8.

    'truncate' is the vendor's default ("floor" there, but numpy's integer mean truncates
    toward zero); 'nearest' is --avg-pool-rounding (half away from zero).
    """
    total = np.rint(np.asarray(mean, dtype=np.float64) * count).astype(np.int64)
    return _round_sum(total, count, rounding)


def _round_sum(total: np.ndarray, count: int, rounding: str) -> np.ndarray:
    mag = np.abs(total)
    if rounding == "nearest":
        q = (2 * mag + count) // (2 * count)
    else:
        q = mag // count
    return np.clip(np.sign(total) * q, -128, 127).astype(np.int8)


# ---------------------------------------------------------------------------------------
# A whole network, one sample


def _pool2d(x: np.ndarray, lay: Layer, rounding: str) -> np.ndarray:
    """Pooling of one operand (C, H, W) as the vendor computes it (compute.pool2d)."""
    (ph, pw), (sh, sw), (dh, dw) = lay.pool, lay.pool_stride, lay.pool_dilation
    if ph == 1 and pw == 1:
        return x[:, ::sh, ::sw]  # a stride without pooling subsamples
    oh, ow = lay.pooled_dim
    out = np.empty((x.shape[0], oh, ow), dtype=np.int64)
    for r in range(oh):
        for c in range(ow):
            win = x[:, r * sh:r * sh + ph * dh:dh, c * sw:c * sw + pw * dw:dw]
            if win.shape[1:] != (ph, pw):
                raise ValueError(f"{lay.name}: pooling window leaves the input")
            if lay.pool_average:
                out[:, r, c] = _round_sum(win.sum(axis=(1, 2)), ph * pw, rounding)
            else:
                out[:, r, c] = win.max(axis=(1, 2))
    return out


def _pool1d(x: np.ndarray, lay: Layer) -> np.ndarray:
    """1-D pooling (compute.pool1d): max ignores the dilation, average always truncates."""
    p, s, d = lay.pool[0], lay.pool_stride[0], lay.pool_dilation[0]
    if p == 1:
        return x[:, ::s]
    n = lay.pooled_dim[0]
    out = np.empty((x.shape[0], n), dtype=np.int64)
    for i in range(n):
        if lay.pool_average:
            win = x[:, i * s:i * s + p * d:d]
            out[:, i] = _round_sum(win.sum(axis=1), p, "truncate")
        else:
            out[:, i] = x[:, i * s:i * s + p].max(axis=1)
    return out


def _eltwise(ops: list[np.ndarray], lay: Layer, wide: bool) -> np.ndarray:
    """Element-wise combination in order (compute.eltwise), then the 8-bit output rule."""
    acc = ops[0].astype(np.int64)
    for other in ops[1:]:
        if lay.eltwise == ELTWISE_ADD:
            acc = acc + other
        elif lay.eltwise == ELTWISE_SUB:
            acc = acc - other
        elif lay.eltwise == ELTWISE_MUL:
            acc = acc * other
        elif lay.eltwise == ELTWISE_OR:
            acc = acc | other
        elif lay.eltwise == ELTWISE_XOR:
            acc = acc ^ other
    if wide:
        return acc
    if lay.eltwise == ELTWISE_MUL:
        return clamp(output_shift(acc, lay.output_shift), -128, 127, np.int64)
    return np.clip(acc, -128, 127)


def _conv(x: np.ndarray, w: np.ndarray, stride, pad, dilation, groups: int) -> np.ndarray:
    """N-D (1 or 2 spatial dims) integer convolution by summing kernel taps."""
    nd = w.ndim - 2
    x = np.pad(x, [(0, 0)] + [(p, p) for p in pad[:nd]])
    spatial = x.shape[1:]
    out_size = [(spatial[i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1
                for i in range(nd)]
    cout, cin_g = w.shape[0], w.shape[1]
    cout_g = cout // groups
    out = np.zeros([cout, *out_size], dtype=np.int64)
    for g in range(groups):
        xs = x[g * cin_g:(g + 1) * cin_g]
        ws = w[g * cout_g:(g + 1) * cout_g]
        for tap in np.ndindex(*w.shape[2:]):
            sl = tuple(slice(tap[i] * dilation[i],
                             tap[i] * dilation[i] + stride[i] * (out_size[i] - 1) + 1, stride[i])
                       for i in range(nd))
            patch = xs[(slice(None), *sl)]
            out[g * cout_g:(g + 1) * cout_g] += np.tensordot(ws[(..., *tap)], patch, axes=1)
    return out


def _layer_compute(x: np.ndarray, lay: Layer) -> np.ndarray:
    """The conv/linear part: integer accumulator including the bias."""
    w = np.asarray(lay.weights, dtype=np.int64)
    if lay.operator == Op.LINEAR or (lay.operator == Op.CONV2D and lay.flatten):
        vec = x.reshape(-1)
        acc = w.reshape(w.shape[0], -1) @ vec
        acc = acc.reshape(-1, 1, 1)
    elif lay.operator == Op.CONV2D:
        acc = _conv(x, w, lay.stride, lay.padding, lay.dilation, lay.conv_groups)
    elif lay.operator == Op.CONV1D:
        acc = _conv(x, w, lay.stride[:1], lay.padding[:1], lay.dilation[:1], lay.conv_groups)
    elif lay.operator == Op.CONVTRANSPOSE2D:
        # Vendor: zero insertion by the stride, flipped kernel with in/out swapped (its
        # izer/checkpoint.py), padding d*(k-1)-p each side plus output_padding at the end.
        wt = np.flip(w, axis=(2, 3)).swapaxes(0, 1).reshape(
            lay.output_channels, lay.input_channels // lay.conv_groups, *w.shape[2:])
        sh, sw = lay.stride
        up = np.zeros((x.shape[0], (x.shape[1] - 1) * sh + 1, (x.shape[2] - 1) * sw + 1),
                      dtype=np.int64)
        up[:, ::sh, ::sw] = x
        pads = [lay.dilation[i] * (lay.kernel_size[i] - 1) - lay.padding[i] for i in (0, 1)]
        up = np.pad(up, ((0, 0), (pads[0], pads[0] + lay.output_padding[0]),
                         (pads[1], pads[1] + lay.output_padding[1])))
        acc = _conv(up, wt, (1, 1), (0, 0), lay.dilation, lay.conv_groups)
    else:
        raise ValueError(f"{lay.name}: operator {lay.operator}")
    if lay.bias is not None:
        acc = acc + np.asarray(lay.bias, dtype=np.int64).reshape(-1, *[1] * (acc.ndim - 1))
    return acc


def _output_stage(acc: np.ndarray, lay: Layer) -> np.ndarray:
    """Output shift with round-half-up, 8-bit clip, then the activation (simulate.py)."""
    if lay.output_width != 32:
        acc = clamp(output_shift(acc, lay.output_shift), -128, 127, np.int64)
    if lay.activation == ACT_RELU:
        acc = np.clip(acc, 0, 127)
    elif lay.activation == ACT_ABS:
        acc = np.clip(np.abs(acc), 0, 127)
    return acc


def run_network(network: Network, x: np.ndarray, *, avg_pool_rounding: bool = False,
                outputs: list[int] | None = None) -> list[np.ndarray]:
    """Every output layer's values for one sample `x` ((C, H, W) or (C, L)), int64.

    Outputs are the layers nobody consumes (or the indices in `outputs`), in order;
    shaped (C, H, W) for 2-D layers, (C, L) for 1-D ones.
    """
    rounding = "nearest" if avg_pool_rounding else "truncate"
    data: dict[int, np.ndarray] = {-1: np.asarray(x, dtype=np.int64)}
    buf = network.data_buffer
    if buf is not None:
        # the data buffer before the first inference: zeros (docs/design.md section 1);
        # a shift layer reads the positions after the ones it drops, an inserting layer
        # writes its output as the newest positions, later readers see the update
        data[DATA_BUFFER] = np.zeros((buf.channels, buf.length), dtype=np.int64)
    for i, lay in enumerate(network.layers):
        seqs = lay.in_sequences if lay.in_sequences is not None else (i - 1,)
        parts = [data[s][:, lay.buffer_shift:] if s == DATA_BUFFER else data[s]
                 for s in seqs]
        one_d = lay.operator.one_d
        in_shape = (lay.input_dim[0],) if one_d else tuple(lay.input_dim)
        if len(parts) > 1 and len({p.shape[1:] for p in parts}) == 1:
            joined = np.concatenate(parts, axis=0)
        elif len(parts) > 1:  # unequal sizes: the vendor joins them along the pixels
            joined = np.hstack([p.reshape(p.shape[0], -1) for p in parts])
        else:
            joined = parts[0]
        ops = [op.reshape(-1, *in_shape) for op in np.split(joined, lay.operands, axis=0)]
        wide = lay.output_width == 32 and lay.operator.passthrough
        if lay.operands > 1 and not lay.pool_first:
            ops = [_eltwise(ops, lay, wide)]
        ops = [_pool1d(op, lay) if one_d else _pool2d(op, lay, rounding) for op in ops]
        if lay.operands > 1 and lay.pool_first:
            cur = _eltwise(ops, lay, wide)
        else:
            cur = ops[0]
        if lay.operator.has_weights:
            cur = _output_stage(_layer_compute(cur, lay), lay)
        data[i] = cur
        if lay.buffer_shift:
            k = lay.buffer_shift
            data[DATA_BUFFER] = np.concatenate(
                [cur.reshape(buf.channels, -1), np.zeros((buf.channels, k), np.int64)], 1)
        if lay.buffer_insert:
            data[DATA_BUFFER] = data[DATA_BUFFER].copy()
            data[DATA_BUFFER][:, -lay.buffer_insert:] = cur.reshape(buf.channels, -1)
    if outputs is None:
        outputs = output_layers(network)
    return [data[i] for i in outputs]


def output_layers(network: Network) -> list[int]:
    """The network's output layers (onnx2ai8x.network.output_layers), as a list."""
    return list(network_output_layers(network))


__all__ = ["clamp", "output_layers", "output_shift", "pool_round", "run_network"]
