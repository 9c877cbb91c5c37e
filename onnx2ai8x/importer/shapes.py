"""Tensor shapes and element types of an ai8x-ONNX graph, without the onnx package.

The reader needs every tensor's per-sample shape and element type. onnx's shape
inference gives them, but importing onnx costs the convert path about 0.15 s (issue 5).
The graphs the toolchain writes use a handful of ops (docs/design.md section 1), whose
shape rules are the ONNX operator specifications' and are written out here. A graph with
any other op, or an attribute form not handled here (`auto_pad`, `ceil_mode`, Pad with
`axes`), gets `None`, and the reader falls back to onnx's inference, so foreign graphs
are read exactly as before.

The batch dimension is taken as 1 while propagating (a symbolic batch cannot feed a
`-1` in Reshape otherwise); callers use the shapes without it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from ..errors import Ai8xError, show
from ..onnxpb import (
    GraphProto,
    NodeProto,
    TensorProto,
    get_attribute_value,
    np_dtype_to_tensor_dtype,
)

Shape = tuple[int, ...]
Typed = tuple[Shape, int]  # (full shape, TensorProto element type)


class _Unsupported(Exception):
    """An op or attribute form this module does not infer; use onnx's inference."""


def _attr(node: NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return get_attribute_value(a)
    return default


def _fail(node: NodeProto, message: str) -> Ai8xError:
    return Ai8xError("model.shapes", node.name or node.op_type,
                     f"shape inference failed: {message}",
                     "re-export the model; every tensor needs a static shape "
                     "(apart from the batch dimension)")


def _const(consts: Mapping[str, np.ndarray], node: NodeProto, index: int
           ) -> np.ndarray | None:
    if len(node.input) <= index or not node.input[index]:
        return None
    value = consts.get(node.input[index])
    if value is None:
        raise _Unsupported  # a computed shape operand: leave it to onnx
    return np.asarray(value).astype(np.int64).reshape(-1)


def _spatial(node: NodeProto, in_dims: Shape, kernel: Shape) -> Shape:
    """Output spatial size of a convolution or pooling window (ONNX Conv/MaxPool rule)."""
    if _attr(node, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET") \
            or _attr(node, "ceil_mode", 0):
        raise _Unsupported
    n = len(kernel)
    pads = list(_attr(node, "pads", [0] * 2 * n))
    strides = list(_attr(node, "strides", [1] * n))
    dilations = list(_attr(node, "dilations", [1] * n))
    if len(in_dims) != n or len(pads) != 2 * n or len(strides) != n or len(dilations) != n:
        raise _fail(node, f"input has {len(in_dims)} spatial dimensions, the window {n}")
    out = []
    for k in range(n):
        reach = (kernel[k] - 1) * dilations[k] + 1
        size = in_dims[k] + pads[k] + pads[k + n] - reach
        if size < 0 or strides[k] < 1:
            raise _fail(node, f"window {reach} does not fit the padded input "
                              f"{in_dims[k] + pads[k] + pads[k + n]}")
        out.append(size // strides[k] + 1)
    return tuple(out)


def _conv(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    x, w = ins[0][0], ins[1][0]
    group = int(_attr(node, "group", 1))
    if len(x) < 3 or len(w) != len(x) or x[1] != w[1] * group:
        raise _fail(node, f"input {x} does not match weights {w} (group {group})")
    kernel = tuple(_attr(node, "kernel_shape", w[2:]))
    return [((x[0], w[0], *_spatial(node, x[2:], kernel)), TensorProto.INT32)]


def _pool(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    x, dtype = ins[0]
    kernel = tuple(_attr(node, "kernel_shape", ()))
    if len(node.output) != 1 or not kernel:
        raise _Unsupported
    return [((x[0], x[1], *_spatial(node, x[2:], kernel)), dtype)]


def _matmul(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    a, b = ins[0][0], ins[1][0]
    if len(a) != 2 or len(b) != 2:
        raise _Unsupported
    if a[1] != b[0]:
        raise _fail(node, f"cannot multiply {a} by {b}")
    return [((a[0], b[1]), TensorProto.INT32)]


def _same(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    return [ins[0]]


def _cast(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    to = _attr(node, "to")
    if to is None:
        raise _fail(node, "Cast has no `to` attribute")
    return [(ins[0][0], int(to))]


def _clamp(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    return [(ins[0][0], int(_attr(node, "to", TensorProto.INT8)))]


def _pool_round(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    return [(ins[0][0], TensorProto.INT8)]


def _broadcast(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    try:
        shape = np.broadcast_shapes(*(s for s, _ in ins))
    except ValueError:
        raise _fail(node, "operand shapes " + ", ".join(str(s) for s, _ in ins)
                    + " do not broadcast") from None
    return [(tuple(int(d) for d in shape), ins[0][1])]


def _axis(node: NodeProto, rank: int, default: int) -> int:
    axis = int(_attr(node, "axis", default))
    if not -rank <= axis < rank:
        raise _fail(node, f"axis {axis} outside rank {rank}")
    return axis % rank


def _concat(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    first = ins[0][0]
    axis = _axis(node, len(first), 0)
    for s, _ in ins[1:]:
        if len(s) != len(first) or any(a != b for k, (a, b) in enumerate(zip(s, first, strict=True))
                                       if k != axis):
            raise _fail(node, f"cannot concatenate {first} and {s} along axis {axis}")
    total = sum(s[axis] for s, _ in ins)
    return [(first[:axis] + (total,) + first[axis + 1:], ins[0][1])]


def _split(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    shape, dtype = ins[0]
    axis = _axis(node, len(shape), 0)
    sizes = _const(consts, node, 1)
    if sizes is None:
        attr = _attr(node, "split")
        if attr is not None:
            sizes = np.asarray(attr, dtype=np.int64)
    count = len(node.output)
    if sizes is None:
        parts = int(_attr(node, "num_outputs", count))
        step = -(-shape[axis] // parts)  # the last part may be smaller (ONNX Split-18)
        sizes = np.asarray([min(step, shape[axis] - k * step) for k in range(parts)])
    if len(sizes) != count or int(sizes.sum()) != shape[axis] or (sizes < 0).any():
        raise _fail(node, f"split sizes {sizes.tolist()} do not divide {shape[axis]} "
                          f"into {count} outputs")
    return [(shape[:axis] + (int(s),) + shape[axis + 1:], dtype) for s in sizes]


def _reshape(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    shape, dtype = ins[0]
    target = _const(consts, node, 1)
    if target is None:
        raise _fail(node, "Reshape has no target shape")
    allow_zero = int(_attr(node, "allowzero", 0))
    out = [int(shape[k]) if d == 0 and not allow_zero and k < len(shape) else int(d)
           for k, d in enumerate(target)]
    total = int(np.prod(shape, dtype=np.int64))
    if out.count(-1) > 1:
        raise _fail(node, f"target shape {target.tolist()} has more than one -1")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise _fail(node, f"cannot reshape {shape} to {target.tolist()}")
        out[out.index(-1)] = total // known
    if int(np.prod(out, dtype=np.int64)) != total:
        raise _fail(node, f"cannot reshape {shape} to {target.tolist()}")
    return [(tuple(out), dtype)]


def _flatten(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    shape, dtype = ins[0]
    axis = int(_attr(node, "axis", 1))
    if not -len(shape) <= axis <= len(shape):
        raise _fail(node, f"axis {axis} outside rank {len(shape)}")
    if axis < 0:
        axis += len(shape)
    head = int(np.prod(shape[:axis], dtype=np.int64))
    return [((head, int(np.prod(shape[axis:], dtype=np.int64))), dtype)]


def _slice(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    shape, dtype = ins[0]
    starts, ends = _const(consts, node, 1), _const(consts, node, 2)
    if starts is None or ends is None:
        raise _Unsupported  # opset < 10 attributes
    axes = _const(consts, node, 3)
    steps = _const(consts, node, 4)
    axes = np.arange(len(starts)) if axes is None else axes
    steps = np.ones(len(starts), dtype=np.int64) if steps is None else steps
    out = list(shape)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise _fail(node, f"{len(starts)} starts, {len(ends)} ends, {len(axes)} axes and "
                          f"{len(steps)} steps; a slice needs as many of each")
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        a = int(axis) % len(shape)
        if step == 0:
            raise _fail(node, "a slice step is 0")
        # ONNX clamps starts/ends exactly as Python slices do
        out[a] = len(range(*slice(int(start), int(end), int(step)).indices(shape[a])))
    return [(tuple(out), dtype)]


def _pad(node: NodeProto, ins: list[Typed], consts) -> list[Typed]:
    shape, dtype = ins[0]
    pads = _const(consts, node, 1)
    if pads is None or (len(node.input) > 3 and node.input[3]):
        raise _Unsupported  # pads as an attribute (opset < 11) or with `axes`
    n = len(shape)
    if len(pads) != 2 * n:
        raise _fail(node, f"{len(pads)} pads for rank {n}")
    out = tuple(int(shape[k] + pads[k] + pads[k + n]) for k in range(n))
    if min(out) < 0:
        raise _fail(node, f"pads {pads.tolist()} remove more than {shape}")
    return [(out, dtype)]


# Inputs a rule reads (ONNX operator specifications); fewer is a damaged graph.
_ARITY = {"ConvInteger": 2, "MatMulInteger": 2}
# The least rank of the first input a rule reads: a window op slides over (N, C, spatial
# axes...); axis ops need an axis. A rule indexes its input's dimensions by position, so
# a lower rank is refused before the rule runs (issue 24: an IndexError in _pool).
_MIN_RANK = {"ConvInteger": 3, "MaxPool": 3, "AveragePool": 3, "Concat": 1, "Split": 1,
             "Slice": 1, "Pad": 1}

_RULES: dict[tuple[str, str], Callable[..., list[Typed]]] = {
    ("", "ConvInteger"): _conv,
    ("", "MatMulInteger"): _matmul,
    ("", "MaxPool"): _pool,
    ("", "AveragePool"): _pool,
    ("", "Identity"): _same,
    ("", "Abs"): _same,
    ("", "Cast"): _cast,
    ("", "Add"): _broadcast,
    ("", "Sub"): _broadcast,
    ("", "Mul"): _broadcast,
    ("", "BitwiseOr"): _broadcast,
    ("", "BitwiseXor"): _broadcast,
    ("", "Concat"): _concat,
    ("", "Split"): _split,
    ("", "Reshape"): _reshape,
    ("", "Flatten"): _flatten,
    ("", "Slice"): _slice,
    ("", "Pad"): _pad,
    ("ai8x", "OutputShift"): _same,
    ("ai8x", "Clamp"): _clamp,
    ("ai8x", "PoolRound"): _pool_round,
}


def _declared(info) -> Typed | None:
    t = info.type.tensor_type
    if not info.type.HasField("tensor_type") or not t.HasField("shape"):
        return None
    dims = []
    for k, d in enumerate(t.shape.dim):
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif k == 0:
            dims.append(1)  # the (symbolic) batch
        else:
            return None
    return tuple(dims), int(t.elem_type)


def infer_shapes(graph: GraphProto, consts: Mapping[str, np.ndarray]
                 ) -> dict[str, Typed] | None:
    """Every tensor's (full shape with batch 1, element type), or None when the graph
    needs onnx's inference (an op or attribute form not covered here).

    Raises Ai8xError (model.shapes) for shapes that contradict each other.
    """
    known: dict[str, Typed] = {}
    for name, value in consts.items():
        arr = np.asarray(value)
        code = np_dtype_to_tensor_dtype(arr.dtype)
        if code is not None:
            known[name] = (tuple(int(d) for d in arr.shape), code)
    for info in graph.input:
        if info.name in known:
            continue
        got = _declared(info)
        if got is None:
            return None
        known[info.name] = got
    for node in graph.node:
        domain = "" if node.domain == "ai.onnx" else node.domain
        if node.op_type == "Constant" and domain == "":
            if node.output and node.output[0] in known:
                continue
            return None
        rule = _RULES.get((domain, node.op_type))
        if rule is None:
            return None
        ins = []
        for name in node.input:
            if name == "":
                continue
            if name not in known:
                return None  # an undefined or out-of-order input: onnx will say which
            ins.append(known[name])
        if not ins:
            return None
        if len(ins) < _ARITY.get(node.op_type, 1):
            raise _fail(node, f"{node.op_type} needs {_ARITY[node.op_type]} inputs, the "
                        f"node has {len(ins)}")
        rank = _MIN_RANK.get(node.op_type, 0)
        if len(ins[0][0]) < rank:
            raise _fail(node, f"{node.op_type} needs an input of rank {rank} or more, "
                        f"`{node.input[0]}` has shape {show(ins[0][0])}")
        try:
            outs = rule(node, ins, consts)
        except _Unsupported:
            return None
        if len(outs) != len(node.output):
            return None
        for name, typed in zip(node.output, outs, strict=True):
            if name:
                known[name] = typed
    return known


__all__ = ["infer_shapes"]
