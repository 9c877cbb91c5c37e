"""CPU segments -> `cpu_layers.c` / `cpu_layers.h` (portable C99, no dynamic allocation).

Every value the C uses is computed here — weights, tables, window geometry, the scratch
offset of each tensor — and the Jinja2 templates in `templates/` only lay them out. The
kernels are generic loops (one per kind, emitted only when used, so the file compiles
without unused-function warnings); each layer is one call with its constants.

Buffers: a segment's inputs and outputs are the caller's (function parameters); the
tensors inside a segment live in one static `int32_t` scratch arena shared by all
segments (segments run one at a time), at offsets fixed from the tensors' lifetimes.
The arena is ordinary Arm SRAM (.bss): it cannot collide with the accelerator's data
memory, which the firmware reaches only through the CNN's own address window.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnx2ai8x.errors import Ai8xError

from . import ops as K
from .ops import CpuOp, Segment

TEMPLATE_DIR = Path(__file__).parent / "templates"
ALIGN = 4  # scratch offsets: int32_t outputs (ArgMax) need word alignment
VALUES_PER_LINE = 16


@dataclass(frozen=True)
class _Tensor:
    label: str  # the tensor's name, safe inside a C comment
    shape: str
    size: int
    ctype: str


def _comment(text: str) -> str:
    """Text safe inside a C block comment: printable ASCII, no comment delimiters."""
    text = "".join(c if " " <= c <= "~" else "?" for c in str(text))
    return text.replace("*/", "*_/").replace("/*", "/_*")[:120]


def _c_int(v: int) -> str:
    # -2^31 is not an int literal in C (2147483648 does not fit int32_t before negation).
    return "(-2147483647 - 1)" if v == -(2 ** 31) else str(v)


def _lines(values: np.ndarray) -> list[str]:
    arr = np.asarray(values).ravel()
    if arr.dtype.itemsize < 4:  # int8/uint8: no value needs _c_int's care
        flat = [str(v) for v in arr.tolist()]
    else:
        flat = [_c_int(v) for v in arr.tolist()]
    return [", ".join(flat[i:i + VALUES_PER_LINE]) + ","
            for i in range(0, len(flat), VALUES_PER_LINE)]


def _dtype_of(op: CpuOp) -> str:
    return "int32_t" if op.kind == K.ARGMAX else "int8_t"


def _plan_scratch(seg: Segment) -> dict[str, int]:
    """Byte offset of every tensor inside the segment: first fit over lifetimes (a
    tensor lives from the op that writes it to the last op that reads it; an op's
    output never shares bytes with its inputs)."""
    external = set(seg.inputs) | set(seg.outputs)
    last_use = {t: i for i, op in enumerate(seg.ops) for t in op.inputs}
    live: list[tuple[int, int, int]] = []  # (offset, size, last use)
    offsets: dict[str, int] = {}
    for i, op in enumerate(seg.ops):
        if op.output in external:
            continue
        live = [b for b in live if b[2] >= i]
        size = -(-math.prod(op.out_shape) * (4 if op.kind == K.ARGMAX else 1) // ALIGN) * ALIGN
        off = 0
        for b_off, b_size, _ in sorted(live):
            if off + size <= b_off:
                break
            off = max(off, b_off + b_size)
        offsets[op.output] = off
        live.append((off, size, last_use.get(op.output, i)))
    return offsets


class _SegmentWriter:
    """Lays out one segment: its arrays, window geometries and calls."""

    def __init__(self, seg: Segment, used: dict[str, bool]) -> None:
        self.seg, self.used = seg, used
        self.prefix = f"cpu_{seg.name}"
        self.arrays: list[dict] = []
        self.windows: list[dict] = []
        self.calls: list[dict] = []
        self.offsets = _plan_scratch(seg)
        self.producer = {op.output: op for op in seg.ops}
        for op in seg.ops:
            if any(t in self.producer and self.producer[t].kind == K.ARGMAX for t in op.inputs):
                raise Ai8xError("cpu.op", f"CPU layer {op.name}",
                                "reads an ArgMax index, which no CPU op takes as input",
                                "end the segment with the ArgMax")

    def ptr(self, tensor: str) -> str:
        seg = self.seg
        if tensor in seg.outputs:
            return f"out_{seg.outputs.index(tensor)}"
        if tensor in seg.inputs:
            return f"in_{seg.inputs.index(tensor)}"
        base = f"(CPU_SCRATCH8 + {self.offsets[tensor]})"
        if tensor in self.producer and self.producer[tensor].kind == K.ARGMAX:
            return f"(int32_t *)(void *){base}"
        return base

    def array(self, k: int, role: str, ctype: str, values) -> str:
        name = f"{self.prefix}_l{k}_{role}"
        vals = np.asarray(values)
        self.arrays.append({"name": name, "ctype": ctype, "size": max(vals.size, 1),
                            "lines": _lines(vals) if vals.size else ["0,"]})
        return name

    def window(self, k: int, op: CpuOp) -> str:
        in_shape, out_shape = op.in_shapes[0], op.out_shape
        one_d = len(in_shape) == 2
        ih, iw = (1, in_shape[1]) if one_d else in_shape[1:]
        oh, ow = (1, out_shape[1]) if one_d else out_shape[1:]
        kh, kw = (1, *op.kernel) if one_d else op.kernel
        sh, sw = (1, *op.strides) if one_d else op.strides
        ph, pw = (0, op.pads[0]) if one_d else op.pads[:2]
        dh, dw = (1, *op.dilations) if one_d else op.dilations
        name = f"{self.prefix}_l{k}_geometry"
        self.windows.append({"name": name, "fields": [
            in_shape[0], ih, iw, out_shape[0], oh, ow, kh, kw, sh, sw, ph, pw, dh, dw,
            op.group]})
        self.used["window"] = True
        return f"&{name}"

    def call(self, op: CpuOp, fn: str, args: Sequence) -> None:
        self.used[fn.removeprefix("cpu_")] = True
        self.calls.append({"fn": fn, "args": [str(a) for a in args],
                           "comment": _comment(f"{op.kind} {op.name}")})

    def broadcast(self, k: int, op: CpuOp) -> list:
        """(rank, dims, bstrides) of a broadcast second input; (0, 0, 0) without one."""
        shape, b_shape = op.in_shapes
        if b_shape == shape:
            return [0, "0", "0"]
        strides = [math.prod(b_shape[a + 1:]) if b_shape[a] > 1 else 0
                   for a in range(len(b_shape))]
        return [len(shape), self.array(k, "dims", "int32_t", shape),
                self.array(k, "bstrides", "int32_t", strides)]

    def requant_args(self, k: int, op: CpuOp) -> list[str]:
        self.used["requant"] = True
        return [self.array(k, "mult", "int32_t", op.multiplier),
                self.array(k, "shift", "uint8_t", op.shift),
                int(op.multiplier.size > 1), op.act_min, op.act_max]

    def op(self, k: int, op: CpuOp) -> None:
        x = [self.ptr(t) for t in op.inputs]
        y = self.ptr(op.output)
        kind = op.kind
        if kind == K.CONV:
            geo = self.window(k, op)
            w = self.array(k, "weights", "int8_t", op.weights)
            b = self.array(k, "bias", "int32_t", op.bias)
            self.call(op, "cpu_conv", [x[0], y, geo, w, b, *self.requant_args(k, op)])
        elif kind == K.DENSE:
            w = self.array(k, "weights", "int8_t", op.weights)
            b = self.array(k, "bias", "int32_t", op.bias)
            self.call(op, "cpu_dense", [x[0], y, op.weights.shape[1], op.weights.shape[0], w,
                                        b, *self.requant_args(k, op)])
        elif kind in (K.MAXPOOL, K.AVGPOOL):
            self.used["requant"] = True
            if kind == K.MAXPOOL:
                m = s = "0"  # null pointers: a maximum is not requantized
                per_count = 0
            else:
                m = self.array(k, "mult", "int32_t", op.multiplier)
                s = self.array(k, "shift", "uint8_t", op.shift)
                per_count = int(op.multiplier.size > 1)
            self.call(op, "cpu_pool", [x[0], y, self.window(k, op), int(kind == K.MAXPOOL),
                                       m, s, per_count])
        elif kind in (K.ADD, K.MUL):
            self.used["requant"] = True
            n = math.prod(op.out_shape)
            scale = [int(op.multiplier[0]), int(op.multiplier[1])] if kind == K.ADD else \
                [int(op.multiplier[0])]
            self.call(op, f"cpu_{kind}", [*x, y, n, *self.broadcast(k, op), *scale,
                                          f"{int(op.shift[0])}u", op.act_min, op.act_max])
        elif kind == K.LUT:
            t = self.array(k, "table", "int8_t", op.table)
            per_channel = op.table.shape[0] > 1
            c = op.out_shape[0] if per_channel else 1
            self.call(op, "cpu_lut", [x[0], y, t, c, math.prod(op.out_shape) // c,
                                      int(per_channel)])
        elif kind in (K.SOFTMAX, K.ARGMAX):
            s = op.in_shapes[0]
            outer, n, inner = math.prod(s[:op.axis]), s[op.axis], math.prod(s[op.axis + 1:])
            if kind == K.SOFTMAX:
                t = self.array(k, "exp", "int32_t", op.table)
                self.call(op, "cpu_softmax", [x[0], y, t, outer, n, inner])
            else:
                self.call(op, "cpu_argmax", [x[0], y, outer, n, inner])
        elif kind == K.CONCAT:
            out = op.out_shape
            outer, stride = math.prod(out[:op.axis]), math.prod(out[op.axis:])
            offset = 0
            for src, shape in zip(x, op.in_shapes, strict=True):
                block = math.prod(shape[op.axis:])
                self.call(op, "cpu_place", [src, y, outer, block, stride, offset])
                offset += block
        elif kind == K.RESHAPE:
            n = math.prod(op.out_shape)
            self.call(op, "cpu_place", [x[0], y, 1, n, n, 0])
        elif kind == K.TRANSPOSE:
            in_shape = op.in_shapes[0]
            in_strides = [math.prod(in_shape[a + 1:]) for a in range(len(in_shape))]
            dims = self.array(k, "dims", "int32_t", op.out_shape)
            strides = self.array(k, "strides", "int32_t", [in_strides[p] for p in op.perm])
            self.call(op, "cpu_transpose", [x[0], y, len(op.perm), dims, strides,
                                            math.prod(op.out_shape)])

    def render_data(self) -> dict:
        seg = self.seg
        for k, op in enumerate(seg.ops):
            self.op(k, op)
        shapes = {}
        for op in seg.ops:
            for t, s in zip(op.inputs, op.in_shapes, strict=True):
                shapes.setdefault(t, (s, "int8_t"))
            shapes[op.output] = (op.out_shape, _dtype_of(op))

        def tensor(t: str) -> _Tensor:
            s, ctype = shapes[t]
            return _Tensor(_comment(t), "x".join(map(str, s)), math.prod(s), ctype)

        params = [f"const int8_t *in_{i}" for i in range(len(seg.inputs))]
        params += [f"{shapes[t][1]} *out_{i}" for i, t in enumerate(seg.outputs)]
        return {"name": seg.name, "macro": f"CPU_{seg.name.upper()}",
                "function": f"cpu_{seg.name}", "ops": seg.ops, "params": params,
                "inputs": [tensor(t) for t in seg.inputs],
                "outputs": [tensor(t) for t in seg.outputs],
                "arrays": self.arrays, "windows": self.windows, "calls": self.calls}


def _environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined, autoescape=False)


_C_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def scratch_bytes(segments: Sequence[Segment]) -> int:
    """Bytes of the scratch arena the segments need (the largest segment's)."""
    need = 0
    for seg in segments:
        sizes = {op.output: math.prod(op.out_shape) * (4 if op.kind == K.ARGMAX else 1)
                 for op in seg.ops}
        for t, off in _plan_scratch(seg).items():
            need = max(need, off + sizes[t])
    return -(-need // ALIGN) * ALIGN


def render(segments: Sequence[Segment]) -> dict[str, str]:
    """{"cpu_layers.c": text, "cpu_layers.h": text} for the segments, in order."""
    names = [seg.name for seg in segments]
    bad = [n for n in names if not _C_NAME.match(n)]
    if bad or len(set(names)) != len(names):
        raise Ai8xError("cpu.segment", f"CPU segment {bad[0] if bad else names[0]}",
                        "segment names must be distinct C identifiers",
                        "name segments with letters, digits and underscores")
    used = dict.fromkeys(("window", "requant", "conv", "dense", "pool", "add", "mul", "lut",
                          "softmax", "argmax", "place", "transpose"), False)
    segs = [_SegmentWriter(seg, used).render_data() for seg in segments]
    nbytes = scratch_bytes(segments)
    env = _environment()
    data = {"segments": segs, "used": used, "scratch_bytes": nbytes,
            "scratch_words": nbytes // ALIGN, "max_rank": K.MAX_RANK}
    return {"cpu_layers.c": env.get_template("cpu_layers.c.j2").render(**data),
            "cpu_layers.h": env.get_template("cpu_layers.h.j2").render(**data)}
