"""The numpy definition of every CPU op (onnx2ai8x/cpu/README.md): int64 throughout.

This is what the ONNX nodes (`onnx.py`) and the generated C (`cgen.py`) are checked
against, bit for bit. It shares no code with either.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from onnx2ai8x.errors import Ai8xError

from . import ops as K
from .ops import CpuOp


def requantize(p: np.ndarray, m: np.ndarray, s: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """clamp(floor((p * M + 2**(s-1)) / 2**s), lo, hi) as int8; M and s broadcast
    against p (numpy's >> on int64 is the floor division by 2**s)."""
    p = np.asarray(p, dtype=np.int64) * np.asarray(m, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    half = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    return np.clip(np.right_shift(p + half, s), lo, hi).astype(np.int8)


def _channels(v: np.ndarray, rank: int) -> np.ndarray:
    """A per-channel vector shaped to broadcast over (C, *spatial) of `rank` axes."""
    return np.asarray(v, dtype=np.int64).reshape((-1,) + (1,) * (rank - 1))


def _as_2d(op: CpuOp, x: np.ndarray):
    """1-D ops run as 2-D ones with H = 1: (C, L) -> (C, 1, L), parameters likewise."""
    if len(op.in_shapes[0]) == 3:
        return x, op.kernel, op.strides, op.pads, op.dilations
    k = (1, *op.kernel) if op.kernel else (1, *op.weights.shape[2:])
    pads = (0, op.pads[0], 0, op.pads[1])
    return x[:, None, :], k, (1, *op.strides), pads, (1, *op.dilations)


def _taps(xp: np.ndarray, kernel, strides, dilations, out_hw):
    """Yield (kh, kw, view): the input values under tap (kh, kw) of every window."""
    oh, ow = out_hw
    for kh in range(kernel[0]):
        for kw in range(kernel[1]):
            h0, w0 = kh * dilations[0], kw * dilations[1]
            yield kh, kw, xp[:, h0:h0 + (oh - 1) * strides[0] + 1:strides[0],
                             w0:w0 + (ow - 1) * strides[1] + 1:strides[1]]


def _pad(x: np.ndarray, pads, value: int) -> np.ndarray:
    return np.pad(x, ((0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=value)


def _conv(op: CpuOp, x: np.ndarray) -> np.ndarray:
    x2, kernel, strides, pads, dil = _as_2d(op, x.astype(np.int64))
    w = op.weights.astype(np.int64).reshape(op.weights.shape[0], op.weights.shape[1],
                                            *kernel)
    out_hw = ((op.out_shape[1], op.out_shape[2]) if len(op.out_shape) == 3
              else (1, op.out_shape[1]))
    cout, cin_g = w.shape[0], w.shape[1]
    cout_g = cout // op.group
    acc = np.zeros((cout, *out_hw), dtype=np.int64)
    for kh, kw, view in _taps(_pad(x2, pads, 0), kernel, strides, dil, out_hw):
        for g in range(op.group):
            xs = view[g * cin_g:(g + 1) * cin_g]
            ws = w[g * cout_g:(g + 1) * cout_g, :, kh, kw]
            acc[g * cout_g:(g + 1) * cout_g] += np.einsum("oc,chw->ohw", ws, xs)
    acc += _channels(op.bias, 3)
    y = requantize(acc, _channels(op.multiplier, 3), _channels(op.shift, 3),
                   op.act_min, op.act_max)
    return y.reshape(op.out_shape)


def _dense(op: CpuOp, x: np.ndarray) -> np.ndarray:
    acc = op.weights.astype(np.int64) @ x.astype(np.int64).ravel() + op.bias
    return requantize(acc, op.multiplier, op.shift, op.act_min, op.act_max)


def _pool(op: CpuOp, x: np.ndarray) -> np.ndarray:
    x2, kernel, strides, pads, dil = _as_2d(op, x.astype(np.int64))
    out_hw = ((op.out_shape[1], op.out_shape[2]) if len(op.out_shape) == 3
              else (1, op.out_shape[1]))
    is_max = op.kind == K.MAXPOOL
    # Max pooling never picks a padded position: pad below every int8 value.
    xp = _pad(x2, pads, -1000 if is_max else 0)
    acc = np.full((x2.shape[0], *out_hw), -1000 if is_max else 0, dtype=np.int64)
    for _, _, view in _taps(xp, kernel, strides, dil, out_hw):
        acc = np.maximum(acc, view) if is_max else acc + view
    if is_max:
        return acc.astype(np.int8).reshape(op.out_shape)
    m, s = op.multiplier, op.shift
    if m.size > 1:  # indexed by the window's count of real positions
        count = K.window_counts(op)
        m, s = m[count], s[count]
    return requantize(acc, m, s, K.INT8_MIN, K.INT8_MAX).reshape(op.out_shape)



def _add(op: CpuOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    p = a.astype(np.int64) * op.multiplier[0] + b.astype(np.int64) * op.multiplier[1]
    return requantize(p, 1, op.shift[0], op.act_min, op.act_max)


def _mul(op: CpuOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return requantize(a.astype(np.int64) * b.astype(np.int64), op.multiplier[0],
                      op.shift[0], op.act_min, op.act_max)


def _lut(op: CpuOp, x: np.ndarray) -> np.ndarray:
    idx = x.astype(np.int64) + 128
    if op.table.shape[0] == 1:
        return op.table[0][idx]
    chan = np.arange(x.shape[0]).reshape((-1,) + (1,) * (x.ndim - 1))
    return op.table[chan, idx]


def _softmax(op: CpuOp, x: np.ndarray) -> np.ndarray:
    x = x.astype(np.int64)
    d = x.max(axis=op.axis, keepdims=True) - x  # 0..255
    e = op.table.astype(np.int64)[d]
    total = e.sum(axis=op.axis, keepdims=True)  # >= 2**16: the maximum's entry is 2**16
    # round_half_up(e * 128 / total), saturated to 127 (a lone maximum would give 128)
    return np.minimum((e * 256 + total) // (2 * total), K.INT8_MAX).astype(np.int8)


def _argmax(op: CpuOp, x: np.ndarray) -> np.ndarray:
    return np.argmax(x, axis=op.axis).astype(np.int64).reshape(op.out_shape)


def run(op: CpuOp, *inputs: np.ndarray) -> np.ndarray:
    """The op's output for one sample (inputs of the op's `in_shapes`)."""
    xs = [np.asarray(x) for x in inputs]
    if len(xs) != len(op.in_shapes) or any(
            x.shape != s for x, s in zip(xs, op.in_shapes, strict=False)):
        raise Ai8xError("cpu.input", f"CPU layer {op.name}",
                        f"inputs of shapes {[list(x.shape) for x in xs]}, the layer takes "
                        f"{[list(s) for s in op.in_shapes]}", "feed one sample per input")
    if any(x.dtype != np.int8 for x in xs):
        xs = [_int8(op, x) for x in xs]
    kind = op.kind
    if kind == K.CONV:
        return _conv(op, xs[0])
    if kind == K.DENSE:
        return _dense(op, xs[0])
    if kind in (K.MAXPOOL, K.AVGPOOL):
        return _pool(op, xs[0])
    if kind == K.ADD:
        return _add(op, *xs)
    if kind == K.MUL:
        return _mul(op, *xs)
    if kind == K.LUT:
        return _lut(op, xs[0])
    if kind == K.SOFTMAX:
        return _softmax(op, xs[0])
    if kind == K.ARGMAX:
        return _argmax(op, xs[0])
    if kind == K.CONCAT:
        return np.concatenate(xs, axis=op.axis)
    if kind == K.RESHAPE:
        return xs[0].reshape(op.out_shape)
    if kind == K.TRANSPOSE:
        return np.ascontiguousarray(xs[0].transpose(op.perm))
    raise Ai8xError("cpu.op", f"CPU layer {op.name}", f"unknown kind {kind}",
                    f"use one of {', '.join(K.KINDS)}")


def _int8(op: CpuOp, x: np.ndarray) -> np.ndarray:
    if x.size and (not np.issubdtype(x.dtype, np.integer) or x.min() < -128 or x.max() > 127):
        raise Ai8xError("cpu.input", f"CPU layer {op.name}",
                        "an input holds values that are not int8 integers",
                        "feed integers in [-128, 127]")
    return x.astype(np.int8)


def run_segment(ops: Sequence[CpuOp], feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run `ops` in order on one sample; returns every tensor the ops wrote, by name."""
    env = dict(feeds)
    written: dict[str, np.ndarray] = {}
    for op in ops:
        missing = [t for t in op.inputs if t not in env]
        if missing:
            raise Ai8xError("cpu.input", f"CPU layer {op.name}",
                            f"reads {', '.join(missing)}, which nothing provides",
                            "feed the segment's inputs or order the ops")
        env[op.output] = written[op.output] = run(op, *(env[t] for t in op.inputs))
    return written
