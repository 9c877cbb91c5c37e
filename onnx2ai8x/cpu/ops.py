"""The CPU operator records (issue 28): one frozen `CpuOp` per layer the Arm core runs.

A `CpuOp` holds everything the three executions of an op need — the numpy definition
(`reference.py`), the ONNX nodes (`onnx.py`) and the generated C (`cgen.py`) — as plain
integers: int8 weights, int32 bias, integer requantization multipliers and shifts, int8
lookup tables. The constructors below are the only way to make one: they check the
parameters (hostile shapes, accumulators that could overflow, ...) and compute the output
shape, so every later stage may trust a record. `onnx2ai8x/cpu/README.md` states the
semantics of each kind exactly.

Shapes are per sample, without the batch dimension: `(C, H, W)` for 2-D data, `(C, L)`
for 1-D data, `(K,)` for a dense layer's output (the accelerator network's convention).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from onnx2ai8x.errors import Ai8xError

CONV, DENSE, MAXPOOL, AVGPOOL = "conv", "dense", "maxpool", "avgpool"
ADD, MUL, LUT, SOFTMAX, ARGMAX = "add", "mul", "lut", "softmax", "argmax"
CONCAT, RESHAPE, TRANSPOSE = "concat", "reshape", "transpose"
KINDS = (CONV, DENSE, MAXPOOL, AVGPOOL, ADD, MUL, LUT, SOFTMAX, ARGMAX, CONCAT, RESHAPE,
         TRANSPOSE)

INT8_MIN, INT8_MAX = -128, 127
# Requantization `floor((p + 2**(s-1)) / 2**s)` is exact in int64 while |p| < 2**62 and
# s <= 61: the rounding term and the C's floor of a negative value (-p + 2**s - 1) then
# stay below 2**63. p is acc * M with |acc| < 2**31 and 0 <= M < 2**31 (conv, dense,
# avgpool), a * Ma + b * Mb (add: < 2**39) or a * b * M (mul: < 2**45).
MAX_MULTIPLIER = 2 ** 31 - 1
MAX_SHIFT = 61
MAX_ACC = 2 ** 31 - 1  # the accumulator (sum of products plus bias) is int32
# Bounds that keep generated code and buffers sane (hostile shapes are refused, not run).
MAX_ELEMENTS = 1 << 24  # values per tensor (16 MiB of int8)
MAX_DIM = MAX_ELEMENTS  # any single dimension, kernel, stride, dilation or pad
MAX_MACS = 1 << 34  # multiply-accumulates of one op
MAX_RANK = 6  # axes of a per-sample shape
LUT_SIZE = 256
SOFTMAX_ONE = 1 << 16  # exp(0) in the softmax table (README: Softmax)
SOFTMAX_MAX_AXIS = 1 << 14  # values one softmax normalizes (the sum stays < 2**31)


@dataclass(frozen=True, eq=False)
class CpuOp:
    """One CPU layer. Arrays are read-only numpy arrays; unused fields keep defaults."""

    kind: str
    name: str
    inputs: tuple[str, ...]  # tensor names read, in order
    output: str  # tensor name written
    in_shapes: tuple[tuple[int, ...], ...]  # per sample, no batch dimension
    out_shape: tuple[int, ...]
    # conv / dense: int8 weights (Cout, Cin/group, *kernel) / (Cout, K); int32 bias (Cout,)
    weights: np.ndarray | None = None
    bias: np.ndarray | None = None
    # requantization (README "Requantization"): int64 per output channel, or one value
    multiplier: np.ndarray | None = None  # conv/dense/avgpool/mul: M; add: (Ma, Mb)
    shift: np.ndarray | None = None  # s, same length as `multiplier` (add: one value)
    act_min: int = INT8_MIN  # clamp after requantization (ReLU: 0)
    act_max: int = INT8_MAX
    # lut: int8 tables (T, 256), T = 1 (one table) or C (per channel, PReLU)
    table: np.ndarray | None = None
    # softmax: int32 exp table (256,), entry d = round(2**16 * exp(-d * in_scale))
    kernel: tuple[int, ...] = ()  # pools
    strides: tuple[int, ...] = ()  # conv, pools
    pads: tuple[int, ...] = ()  # conv, pools: begins then ends (ONNX order)
    dilations: tuple[int, ...] = ()  # conv, pools
    group: int = 1  # conv
    axis: int = 0  # softmax, argmax, concat: an axis of the per-sample shape
    perm: tuple[int, ...] = ()  # transpose: a permutation of the per-sample axes
    meta: tuple[tuple[str, str], ...] = field(default=())  # free text for reports

    @property
    def out_dtype(self) -> str:
        """numpy dtype name of the output: int8, except ArgMax's int64 index."""
        return "int64" if self.kind == ARGMAX else "int8"


@dataclass(frozen=True, eq=False)
class Segment:
    """Ops the CPU runs in order, between named input and output buffers."""

    name: str  # a C identifier: the segment's function is `cpu_<name>`
    ops: tuple[CpuOp, ...]
    inputs: tuple[str, ...]  # tensors fed from outside
    outputs: tuple[str, ...]  # tensors handed back


# ---------------------------------------------------------------------------------------
# Checks: each raises the user-facing Ai8xError naming the op, the limit and a fix.

def _fail(name: str, message: str, hint: str) -> Ai8xError:
    return Ai8xError("cpu.op", f"CPU layer {name}", message, hint)


def _shape(name: str, shape: Sequence[int], what: str = "input") -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise _fail(name, f"the {what} shape is not a list of integers",
                    "give every dimension as a positive integer") from None
    if not dims or len(dims) > MAX_RANK or any(d < 1 or d > MAX_DIM for d in dims):
        raise _fail(name, f"the {what} shape {list(dims)} has a dimension outside "
                    f"1..{MAX_DIM} or more than {MAX_RANK} axes",
                    "use at most 6 positive dimensions of a realistic size")
    if math.prod(dims) > MAX_ELEMENTS:
        raise _fail(name, f"the {what} has {math.prod(dims)} values, more than the "
                    f"{MAX_ELEMENTS} a CPU layer buffers", "make the tensor smaller")
    return dims


def _ints(name: str, values: Sequence[int], n: int, what: str, lo: int) -> tuple[int, ...]:
    vals = tuple(int(v) for v in values)
    if len(vals) != n or any(v < lo or v > MAX_DIM for v in vals):
        raise _fail(name, f"{what} {list(vals)} must be {n} integers in {lo}..{MAX_DIM}",
                    f"give one {what} value per spatial dimension")
    return vals


def _int_array(name: str, values, dtype, lo: int, hi: int, what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or not np.array_equal(arr, np.round(arr)):
            raise _fail(name, f"the {what} hold non-integer values",
                        f"quantize the {what} to integers")
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise _fail(name, f"the {what} range over [{int(arr.min())}, {int(arr.max())}], "
                    f"outside [{lo}, {hi}]", f"requantize the {what} into that range")
    if arr.size > MAX_ELEMENTS:
        raise _fail(name, f"{arr.size} {what}, more than the {MAX_ELEMENTS} a CPU layer "
                    "stores", "make the layer smaller")
    out = np.ascontiguousarray(arr.astype(dtype))
    out.setflags(write=False)
    return out


def _requant(name: str, multiplier, shift, n: int) -> tuple[np.ndarray, np.ndarray]:
    m = _int_array(name, np.atleast_1d(multiplier), np.int64, 0, MAX_MULTIPLIER,
                   "requantization multipliers")
    s = _int_array(name, np.atleast_1d(shift), np.int64, 0, MAX_SHIFT, "requantization shifts")
    if m.ndim != 1 or s.shape != m.shape or m.size not in (1, n):
        raise _fail(name, f"{m.size} multipliers and {s.size} shifts for {n} channels",
                    "give one multiplier and shift per output channel, or one for all")
    return m, s


def _clamp(name: str, act_min: int, act_max: int) -> tuple[int, int]:
    lo, hi = int(act_min), int(act_max)
    if not INT8_MIN <= lo <= hi <= INT8_MAX:
        raise _fail(name, f"the output clamp [{lo}, {hi}] is not inside [-128, 127]",
                    "clamp to a sub-range of int8 (ReLU: [0, 127])")
    return lo, hi


def _window_out(name: str, size: int, k: int, s: int, p0: int, p1: int, d: int) -> int:
    span = d * (k - 1) + 1
    if size + p0 + p1 < span:
        raise _fail(name, f"the window spans {span} values but the padded input has "
                    f"{size + p0 + p1}", "use a smaller kernel or dilation, or more padding")
    return (size + p0 + p1 - span) // s + 1


def _windows_touch_input(name: str, size: int, k: int, s: int, p0: int, d: int,
                         n_out: int) -> None:
    """Every max-pooling window must hold a real input position (ONNX leaves a window
    of padding alone undefined)."""
    empty = np.flatnonzero(real_taps(size, k, s, p0, d, n_out) == 0)
    if empty.size:
        raise _fail(name, f"pooling window {int(empty[0])} covers only padding",
                    "pad less than the window's extent")


def _spatial(name: str, in_shape, kernel, strides, pads, dilations):
    nd = len(in_shape) - 1
    if nd not in (1, 2):
        raise _fail(name, f"the input shape {list(in_shape)} is neither (C, L) nor (C, H, W)",
                    "give 1-D data as (C, L) and 2-D data as (C, H, W)")
    kernel = _ints(name, kernel, nd, "kernel size", 1)
    strides = _ints(name, strides if strides else (1,) * nd, nd, "stride", 1)
    dilations = _ints(name, dilations if dilations else (1,) * nd, nd, "dilation", 1)
    pads = _ints(name, pads if pads else (0,) * 2 * nd, 2 * nd, "padding", 0)
    out = tuple(_window_out(name, in_shape[1 + a], kernel[a], strides[a], pads[a],
                            pads[nd + a], dilations[a]) for a in range(nd))
    return kernel, strides, pads, dilations, out


def _macs_ok(name: str, macs: int) -> None:
    if macs > MAX_MACS:
        raise _fail(name, f"{macs} multiply-accumulates are more than a CPU layer may take "
                    f"({MAX_MACS})", "make the layer smaller or run it on the accelerator")


def _acc_ok(name: str, weights: np.ndarray, bias: np.ndarray) -> None:
    # Worst case of one output: every input at -128 against the weight's sign.
    per_out = np.abs(weights.reshape(weights.shape[0], -1).astype(np.int64)).sum(axis=1)
    worst = per_out * 128 + np.abs(bias.astype(np.int64))
    if worst.size and int(worst.max()) > MAX_ACC:
        raise _fail(name, f"an output's accumulator can reach {int(worst.max())}, beyond "
                    "the int32 range", "use fewer inputs per output or smaller weights")


# ---------------------------------------------------------------------------------------
# Constructors


def conv(name: str, x: str, y: str, in_shape, weights, bias, multiplier, shift, *,
         strides=(), pads=(), dilations=(), group: int = 1, act_min: int = INT8_MIN,
         act_max: int = INT8_MAX) -> CpuOp:
    """int8 convolution (1-D or 2-D; group = Cin for depthwise), zero padding."""
    in_shape = _shape(name, in_shape)
    w = _int_array(name, weights, np.int8, INT8_MIN, INT8_MAX, "weights")
    nd = len(in_shape) - 1
    if w.ndim != nd + 2:
        raise _fail(name, f"the weights have {w.ndim} dimensions, a {nd}-D convolution "
                    f"takes {nd + 2}", "give weights as (Cout, Cin / group, *kernel)")
    cout, cin_g = w.shape[0], w.shape[1]
    group = int(group)
    if group < 1 or in_shape[0] % group or cout % group or cin_g * group != in_shape[0]:
        raise _fail(name, f"{in_shape[0]} input channels, {cout} outputs and weights of "
                    f"{cin_g} channels do not fit group {group}",
                    "use Cin = group * weight channels and Cout a multiple of group")
    kernel, strides, pads, dilations, out = _spatial(name, in_shape, w.shape[2:], strides,
                                                     pads, dilations)
    out_shape = _shape(name, (cout, *out), "output")
    b = _int_array(name, np.zeros(cout) if bias is None else bias, np.int32,
                   -(2 ** 31), 2 ** 31 - 1, "bias")
    if b.shape != (cout,):
        raise _fail(name, f"{b.size} bias values for {cout} outputs", "give one per output")
    _acc_ok(name, w, b)
    _macs_ok(name, math.prod(out_shape) * cin_g * math.prod(kernel))
    m, s = _requant(name, multiplier, shift, cout)
    lo, hi = _clamp(name, act_min, act_max)
    return CpuOp(CONV, name, (x,), y, (in_shape,), out_shape, weights=w, bias=b,
                 multiplier=m, shift=s, act_min=lo, act_max=hi, kernel=kernel,
                 strides=strides, pads=pads, dilations=dilations, group=group)


def dense(name: str, x: str, y: str, in_shape, weights, bias, multiplier, shift, *,
          act_min: int = INT8_MIN, act_max: int = INT8_MAX) -> CpuOp:
    """Fully connected over the whole flattened input (C-order), output shape (Cout,)."""
    in_shape = _shape(name, in_shape)
    w = _int_array(name, weights, np.int8, INT8_MIN, INT8_MAX, "weights")
    k = math.prod(in_shape)
    if w.ndim != 2 or w.shape[1] != k:
        raise _fail(name, f"the weights have shape {list(w.shape)}, the input has {k} "
                    "values", "give weights as (Cout, number of input values)")
    cout = w.shape[0]
    b = _int_array(name, np.zeros(cout) if bias is None else bias, np.int32,
                   -(2 ** 31), 2 ** 31 - 1, "bias")
    if b.shape != (cout,):
        raise _fail(name, f"{b.size} bias values for {cout} outputs", "give one per output")
    _acc_ok(name, w, b)
    _macs_ok(name, cout * k)
    m, s = _requant(name, multiplier, shift, cout)
    lo, hi = _clamp(name, act_min, act_max)
    return CpuOp(DENSE, name, (x,), y, (in_shape,), _shape(name, (cout,), "output"),
                 weights=w, bias=b, multiplier=m, shift=s, act_min=lo, act_max=hi)


def maxpool(name: str, x: str, y: str, in_shape, kernel, *, strides=(), pads=(),
            dilations=()) -> CpuOp:
    """Max over each window; padded positions are ignored (never the maximum)."""
    in_shape = _shape(name, in_shape)
    kernel, strides, pads, dilations, out = _spatial(name, in_shape, kernel, strides, pads,
                                                     dilations)
    out_shape = _shape(name, (in_shape[0], *out), "output")
    _macs_ok(name, math.prod(out_shape) * math.prod(kernel))
    nd = len(kernel)
    for a in range(nd):
        _windows_touch_input(name, in_shape[1 + a], kernel[a], strides[a], pads[a],
                             dilations[a], out[a])
    return CpuOp(MAXPOOL, name, (x,), y, (in_shape,), out_shape, kernel=kernel,
                 strides=strides, pads=pads, dilations=dilations)


def avgpool(name: str, x: str, y: str, in_shape, kernel, multiplier, shift, *, strides=(),
            pads=(), dilations=()) -> CpuOp:
    """Window sum (padding adds zeros) requantized by (M, s): one pair for every window
    (the divisor folded in, `avgpool_requant`), or K + 1 pairs indexed by the number of
    real (non-padding) positions in the window, K = the window size (ONNX
    count_include_pad = 0: `avgpool_requant_per_count`)."""
    in_shape = _shape(name, in_shape)
    kernel, strides, pads, dilations, out = _spatial(name, in_shape, kernel, strides, pads,
                                                     dilations)
    out_shape = _shape(name, (in_shape[0], *out), "output")
    count = math.prod(kernel)
    if count * 128 > MAX_ACC:
        raise _fail(name, f"a window of {count} values can overflow the accumulator",
                    "use a smaller pooling window")
    _macs_ok(name, math.prod(out_shape) * count)
    m, s = _requant(name, multiplier, shift, count + 1)
    return CpuOp(AVGPOOL, name, (x,), y, (in_shape,), out_shape, multiplier=m, shift=s,
                 kernel=kernel, strides=strides, pads=pads, dilations=dilations)


def real_taps(size: int, k: int, stride: int, p0: int, d: int, n_out: int) -> np.ndarray:
    """Per output position along one axis: how many of the window's k taps fall inside
    the input (0..size-1); the rest are padding."""
    start = np.arange(n_out, dtype=np.int64) * stride - p0
    first = np.where(start < 0, -(start // d), 0)
    last = np.minimum(k - 1, np.where(start >= size, -1, (size - 1 - start) // d))
    return np.maximum(last - first + 1, 0)

def window_counts(op: CpuOp) -> np.ndarray:
    """(OH, OW) — or (1, OL) for 1-D data — real input positions under each window."""
    in_shape, out_shape = op.in_shapes[0], op.out_shape
    nd = len(in_shape) - 1
    per_axis = [real_taps(in_shape[1 + a], op.kernel[a], op.strides[a], op.pads[a],
                            op.dilations[a], out_shape[1 + a]) for a in range(nd)]
    if nd == 1:
        return per_axis[0][None, :]
    return per_axis[0][:, None] * per_axis[1][None, :]



def _broadcast(name: str, shape: tuple[int, ...], b_shape) -> tuple[int, ...]:
    """b's shape: `shape` itself, or of the same rank with 1 where b is repeated (a
    per-channel scale (C, 1, 1) against (C, H, W), as in squeeze-and-excitation)."""
    if b_shape is None:
        return shape
    b_shape = _shape(name, b_shape, "second input")
    if len(b_shape) != len(shape) or any(d not in (1, e) for d, e in zip(b_shape, shape,
                                                                         strict=True)):
        raise _fail(name, f"the second input's shape {list(b_shape)} does not broadcast to "
                    f"{list(shape)}", "give the second input the same rank, with 1 where "
                    "its values repeat")
    return b_shape


def add(name: str, a: str, b: str, y: str, shape, multipliers, shift, *,
        act_min: int = INT8_MIN, act_max: int = INT8_MAX, b_shape=None) -> CpuOp:
    """y = clamp(round_half_up((a * Ma + b * Mb) / 2**s)): each input its own scale; b
    may broadcast (`b_shape`)."""
    shape = _shape(name, shape)
    bs = _broadcast(name, shape, b_shape)
    m = _int_array(name, np.atleast_1d(multipliers), np.int64, 0, MAX_MULTIPLIER,
                   "requantization multipliers")
    s = _int_array(name, np.atleast_1d(shift), np.int64, 0, MAX_SHIFT, "requantization shifts")
    if m.shape != (2,) or s.shape != (1,):
        raise _fail(name, "an add takes two multipliers (one per input) and one shift",
                    "give multipliers=(Ma, Mb) and one shift")
    lo, hi = _clamp(name, act_min, act_max)
    return CpuOp(ADD, name, (a, b), y, (shape, bs), shape, multiplier=m, shift=s,
                 act_min=lo, act_max=hi)


def mul(name: str, a: str, b: str, y: str, shape, multiplier, shift, *,
        act_min: int = INT8_MIN, act_max: int = INT8_MAX, b_shape=None) -> CpuOp:
    """y = clamp(round_half_up(a * b * M / 2**s)); b may broadcast (`b_shape`)."""
    shape = _shape(name, shape)
    bs = _broadcast(name, shape, b_shape)
    m, s = _requant(name, multiplier, shift, 1)
    lo, hi = _clamp(name, act_min, act_max)
    return CpuOp(MUL, name, (a, b), y, (shape, bs), shape, multiplier=m, shift=s,
                 act_min=lo, act_max=hi)


def lut(name: str, x: str, y: str, shape, table) -> CpuOp:
    """y = table[c][x + 128]: one int8 table (1, 256) or one per channel (C, 256)."""
    shape = _shape(name, shape)
    t = _int_array(name, np.asarray(table).reshape(-1, LUT_SIZE) if np.size(table) %
                   LUT_SIZE == 0 else np.zeros((0, 0)), np.int8, INT8_MIN, INT8_MAX,
                   "table entries")
    if t.ndim != 2 or t.shape[1] != LUT_SIZE or t.shape[0] not in (1, shape[0]):
        raise _fail(name, f"a lookup table of {np.size(table)} entries for "
                    f"{shape[0]} channels", "give 256 entries, or 256 per channel")
    return CpuOp(LUT, name, (x,), y, (shape,), shape, table=t)


def softmax(name: str, x: str, y: str, shape, in_scale: float, *, axis: int = 0) -> CpuOp:
    """int8 softmax over `axis` with output scale 1/128 (README "Softmax")."""
    shape = _shape(name, shape)
    axis = _axis(name, axis, len(shape))
    if shape[axis] > SOFTMAX_MAX_AXIS:
        raise _fail(name, f"a softmax over {shape[axis]} values", "normalize at most "
                    f"{SOFTMAX_MAX_AXIS} values")
    scale = float(in_scale)
    if not (math.isfinite(scale) and scale > 0):
        raise _fail(name, f"the input scale {scale} is not a positive number",
                    "give the input's quantization scale")
    table = np.array([math.floor(SOFTMAX_ONE * math.exp(-d * scale) + 0.5)
                      for d in range(LUT_SIZE)], dtype=np.int32)
    table.setflags(write=False)
    return CpuOp(SOFTMAX, name, (x,), y, (shape,), shape, table=table, axis=axis,
                 meta=(("in_scale", repr(scale)),))


def argmax(name: str, x: str, y: str, shape, *, axis: int = 0) -> CpuOp:
    """Index of the largest value along `axis` (the first on ties), axis removed."""
    shape = _shape(name, shape)
    axis = _axis(name, axis, len(shape))
    out = shape[:axis] + shape[axis + 1:]
    return CpuOp(ARGMAX, name, (x,), y, (shape,), out if out else (1,), axis=axis)


def concat(name: str, xs: Sequence[str], y: str, shapes, *, axis: int = 0) -> CpuOp:
    """Join inputs along `axis` (all other dimensions equal, same quantization)."""
    shapes = tuple(_shape(name, s) for s in shapes)
    if len(shapes) != len(xs) or len(xs) < 1:
        raise _fail(name, "a concat needs one shape per input", "give matching lists")
    axis = _axis(name, axis, len(shapes[0]))
    rest = {s[:axis] + s[axis + 1:] for s in shapes}
    if len(rest) != 1 or len({len(s) for s in shapes}) != 1:
        raise _fail(name, f"inputs of shapes {[list(s) for s in shapes]} differ outside "
                    f"axis {axis}", "concatenate tensors of equal other dimensions")
    first = shapes[0]
    out = first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:]
    return CpuOp(CONCAT, name, tuple(xs), y, shapes, _shape(name, out, "output"), axis=axis)


def reshape(name: str, x: str, y: str, in_shape, out_shape) -> CpuOp:
    """Same values in C order, another shape (Flatten is a reshape)."""
    in_shape, out_shape = _shape(name, in_shape), _shape(name, out_shape, "output")
    if math.prod(in_shape) != math.prod(out_shape):
        raise _fail(name, f"cannot reshape {list(in_shape)} into {list(out_shape)}",
                    "keep the number of values")
    return CpuOp(RESHAPE, name, (x,), y, (in_shape,), out_shape)


def transpose(name: str, x: str, y: str, in_shape, perm) -> CpuOp:
    """out.shape[i] = in.shape[perm[i]] (a permutation of the per-sample axes)."""
    in_shape = _shape(name, in_shape)
    perm = tuple(int(p) for p in perm)
    if sorted(perm) != list(range(len(in_shape))):
        raise _fail(name, f"{list(perm)} is not a permutation of {len(in_shape)} axes",
                    "give each per-sample axis once")
    return CpuOp(TRANSPOSE, name, (x,), y, (in_shape,),
                 tuple(in_shape[p] for p in perm), perm=perm)


def _axis(name: str, axis: int, rank: int) -> int:
    axis = int(axis)
    if not -rank <= axis < rank:
        raise _fail(name, f"axis {axis} of a {rank}-D tensor", "use an axis of the tensor")
    return axis % rank


def segment(name: str, ops: Sequence[CpuOp], outputs: Sequence[str] = ()) -> Segment:
    """A segment: its inputs are the tensors read before any op writes them; its outputs
    are `outputs` or, by default, the tensors written that no later op reads."""
    if not name.isidentifier() or not name.isascii():
        raise _fail(name, "the segment name is not a C identifier",
                    "use letters, digits and underscores")
    written: list[str] = []
    inputs: list[str] = []
    shapes: dict[str, tuple[int, ...]] = {}
    producers: dict[str, CpuOp] = {}
    for op in ops:
        for t, shape in zip(op.inputs, op.in_shapes, strict=True):
            if t in producers and producers[t].kind == ARGMAX:
                raise _fail(op.name, f"reads the ArgMax index {t}, which no CPU op takes "
                            "as input", "end the segment with the ArgMax")
            if shapes.setdefault(t, shape) != shape:
                raise _fail(op.name, f"reads tensor {t} as {list(shape)}, but it has shape "
                            f"{list(shapes[t])}", "insert a reshape between the layers")
            if t not in written and t not in inputs:
                inputs.append(t)
        shapes[op.output] = op.out_shape
        producers[op.output] = op
        if op.output in written or op.output in inputs:
            raise _fail(op.name, f"tensor {op.output} is written twice",
                        "give every op its own output tensor")
        written.append(op.output)
    read = {t for op in ops for t in op.inputs}
    outs = tuple(outputs) or tuple(t for t in written if t not in read)
    if not outs or any(t not in written for t in outs):
        raise _fail(name, "the segment's outputs are not written by its ops",
                    "name tensors the segment's ops write")
    return Segment(name, tuple(ops), tuple(inputs), outs)


# ---------------------------------------------------------------------------------------
# Helpers for the quantizer (float scales -> the integers above)


def requant_params(scale: float) -> tuple[int, int]:
    """(M, s) with M / 2**s closest to `scale` (> 0), M < 2**31: M has 31 significant bits
    where s allows, so the relative error is below 2**-30."""
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise _fail("requantize", f"the scale {scale} is not a positive number",
                    "give a positive finite rescaling factor")
    mant, exp = math.frexp(scale)  # scale = mant * 2**exp, 0.5 <= mant < 1
    s = min(MAX_SHIFT, 31 - exp)
    if s < 0:
        raise _fail("requantize", f"the scale {scale} is too large for int8 outputs",
                    "check the input and output scales")
    m = math.floor(scale * 2.0 ** s + 0.5)
    if m > MAX_MULTIPLIER:
        s -= 1
        m = math.floor(scale * 2.0 ** s + 0.5)
    return m, s


def pow2_requant(shift: int) -> tuple[int, int]:
    """(M, s) of the accelerator's power-of-two output stage: divide by 2**shift with
    round-half-up (shift >= 0), or multiply by 2**-shift (shift < 0)."""
    shift = int(shift)
    if shift >= 0:
        return 1, shift
    return 1 << -shift, 0


def lut_table(fn: Callable[[np.ndarray], np.ndarray], in_scale: float,
              out_scale: float) -> np.ndarray:
    """The 256-entry int8 table of y = fn(x): entry i is
    clamp(floor(fn((i - 128) * in_scale) / out_scale + 0.5), -128, 127)."""
    q = np.arange(INT8_MIN, INT8_MAX + 1, dtype=np.float64)
    vals = np.asarray(fn(q * float(in_scale)), dtype=np.float64) / float(out_scale)
    if vals.shape != (LUT_SIZE,) or not np.all(np.isfinite(vals)):
        raise _fail("lut", "the activation gives non-finite or misshaped values",
                    "give a float function defined on the whole int8 range")
    return np.clip(np.floor(vals + 0.5), INT8_MIN, INT8_MAX).astype(np.int8)


def avgpool_requant(count: int, scale_ratio: float = 1.0) -> tuple[int, int]:
    """(M, s) for an average over `count` values with in_scale / out_scale = scale_ratio."""
    return requant_params(float(scale_ratio) / int(count))


def avgpool_requant_per_count(window: int, scale_ratio: float = 1.0
                              ) -> tuple[np.ndarray, np.ndarray]:
    """(M, s) arrays of window + 1 entries for an average over the real positions only
    (ONNX count_include_pad = 0): entry c divides by c; entry 0 (a window of padding
    only, whose sum is 0) is (0, 0)."""
    pairs = [(0, 0)] + [avgpool_requant(c, scale_ratio) for c in range(1, int(window) + 1)]
    return (np.array([p[0] for p in pairs], dtype=np.int64),
            np.array([p[1] for p in pairs], dtype=np.int64))


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


# Float definitions of the table-driven activations (ONNX operator semantics; Hardsigmoid
# with ONNX's defaults alpha = 0.2, beta = 0.5; Hardswish = x * max(0, min(1, x/6 + 1/2))).
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "Tanh": np.tanh,
    "Hardsigmoid": lambda x: np.clip(0.2 * x + 0.5, 0.0, 1.0),
    "Hardswish": lambda x: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0),
    "SiLU": lambda x: x / (1.0 + np.exp(-x)),
    "GELU": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "Relu": lambda x: np.maximum(x, 0.0),
    "Identity": lambda x: x,
}


def requant_lut(in_scale: float, out_scale: float) -> np.ndarray:
    """The table that only rescales int8 values (e.g. into the accelerator's Q7 input)."""
    return lut_table(ACTIVATIONS["Identity"], in_scale, out_scale)


def leaky_relu(alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    """LeakyReLU (and one channel of PReLU) as a float function for `lut_table`."""
    a = float(alpha)
    return lambda x: np.where(x >= 0, x, a * x)
