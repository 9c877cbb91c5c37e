"""The numbers behind the vendor export's weight layers (see vendor_export).

The export carries a quantized checkpoint's integers (as they are, or behind the `-8`
mode's Round / Div) or a QAT checkpoint's float weights with the graph arithmetic that
fake-quantizes them. This module finds them behind a weight node's inputs and gives the
integers, weight bits, bias and output shift the vendor's synthesis tool would use.
"""
from __future__ import annotations

import math

import numpy as np

from ... import onnxpb
from ...errors import Ai8xError
from ..onnx_nodes import CONST_OPS, node_attr

_LAYOUT_OPS = ("Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze", "Flatten")
_EXPORT_HINT = ("export the quantized checkpoint (`quantize.py`, then `train.py "
                "--summary onnx`) or the QAT checkpoint as the training repository does")


def _fail(where: str, message: str, hint: str = _EXPORT_HINT) -> Ai8xError:
    return Ai8xError("float.vendor-export", where, message, hint)


class _Graph:
    """Constants, producers and consumers of the model's tensors."""

    def __init__(self, model, fold: bool = True) -> None:
        """`fold`: evaluate every constant subgraph; else (a quick look) only the
        `Constant` nodes and the small initializers."""
        g = model.graph
        self.model = model
        self.consts: dict[str, np.ndarray] = {}
        for i in g.initializer:
            if not fold and int(np.prod(i.dims)) > 16:
                continue
            try:
                self.consts[i.name] = onnxpb.to_array(i)
            except ValueError:
                continue  # not a numeric constant of the export (the walker reports it)
        self.producer: dict[str, object] = {}
        self.consumers: dict[str, list] = {}
        self.outputs = {o.name for o in g.output}
        self.layers: dict[int, object] = {}  # weight node id -> its _Layer (or None)
        for node in g.node:
            for o in node.output:
                self.producer[o] = node
            for i in node.input:
                if i:
                    self.consumers.setdefault(i, []).append(node)
            if fold or node.op_type == "Constant":
                self._fold(node, CONST_OPS, node_attr)

    def _fold(self, node, ops, attr) -> bool:
        """Evaluate a node of constants (the export's shift and weight arithmetic)."""
        if node.op_type == "Constant":
            value = attr(node, "value")
            if value is None:
                return False
            try:
                self.consts[node.output[0]] = onnxpb.to_array(value)
            except ValueError:
                return False
            return True
        if not node.input or any(i and i not in self.consts for i in node.input):
            return False
        args = [self.consts[i] if i else None for i in node.input]
        try:
            with np.errstate(all="ignore"):  # a zero maximum gives inf: not our message
                if node.op_type in ("Identity", "Dropout"):
                    out = args[0]
                elif node.op_type == "Transpose":
                    perm = attr(node, "perm")
                    out = np.transpose(args[0], None if perm is None else list(perm))
                elif node.op_type in ops:
                    out = ops[node.op_type](node, *args)
                else:
                    return False
        except (ValueError, TypeError, IndexError, FloatingPointError, OverflowError,
                MemoryError):
            return False
        self.consts[node.output[0]] = np.asarray(out)
        return True

    def const(self, name: str) -> np.ndarray | None:
        return self.consts.get(name) if name else None

    def sole_consumer(self, name: str):
        users = self.consumers.get(name, [])
        if name in self.outputs or len(users) != 1:
            return None
        return users[0]

    def other(self, node, name: str) -> np.ndarray | None:
        """The constant operand of a binary node whose other operand is `name`."""
        ins = [i for i in node.input if i != name]
        return self.const(ins[0]) if len(ins) == 1 and len(node.input) == 2 else None


def _scalar(a: np.ndarray | None) -> float | None:
    if a is None or np.asarray(a).size != 1:
        return None
    v = float(np.asarray(a).reshape(-1)[0])
    return v if math.isfinite(v) else None


def _pow2(v: float | None) -> int | None:
    if v is None or v <= 0:
        return None
    m, e = math.frexp(v)
    return e - 1 if m == 0.5 else None


def _is_int(a: np.ndarray) -> bool:
    a = np.asarray(a, np.float64)
    return bool(np.all(np.isfinite(a)) and np.all(a == np.round(a)))


def _bits_holding(w: np.ndarray) -> int | None:
    """The fewest weight bits whose range holds the integers `w` (1 bit: -1 and 0)."""
    lo, hi = (float(w.min()), float(w.max())) if w.size else (0.0, 0.0)
    for bits in (1, 2, 4, 8):
        if bits == 1 and lo >= -1 and hi <= 0 or \
                bits > 1 and lo >= -(1 << (bits - 1)) and hi <= (1 << (bits - 1)) - 1:
            return bits
    return None


# -- the constant behind a weight or bias input ------------------------------------

def _layout_path(graph: _Graph, name: str) -> tuple[str, list]:
    """Follow layout-only constant nodes (the export's Transpose of a MatMul weight)
    back to the value they rearrange; return it and the nodes to replay."""
    path = []
    node = graph.producer.get(name)
    while node is not None and node.op_type in _LAYOUT_OPS and node.input and \
            node.input[0] in graph.consts:
        path.append(node)
        name = node.input[0]
        node = graph.producer.get(name)
    return name, path[::-1]


def _replay(graph: _Graph, value: np.ndarray, path: list) -> np.ndarray:
    for node in path:
        if node.op_type == "Transpose":
            perm = node_attr(node, "perm")
            value = np.transpose(value, None if perm is None else list(perm))
        elif node.op_type in ("Identity",):
            pass
        else:
            args = [value] + [graph.consts[i] if i else None for i in node.input[1:]]
            value = np.asarray(CONST_OPS[node.op_type](node, *args))
    return value


def _cone(graph: _Graph, name: str, limit: int = 64) -> list:
    """The constant nodes computing `name` (newest first)."""
    seen, todo, out = set(), [name], []
    while todo and len(out) < limit:
        t = todo.pop()
        node = graph.producer.get(t)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        todo.extend(i for i in node.input if i)
    return out


def _quantized(graph: _Graph, name: str) -> tuple[np.ndarray, float, str] | None:
    """A fake quantization Round(v) / k (then clamps) computing `name`: the value `v / k`
    that was quantized, the factor k and the Round node's input."""
    for node in _cone(graph, name):
        if node.op_type != "Round":
            continue
        users = graph.consumers.get(node.output[0], [])
        if len(users) != 1 or users[0].op_type not in ("Div", "Mul"):
            return None
        k = _scalar(graph.other(users[0], node.output[0]))
        x = graph.const(node.input[0])
        if k is None or k == 0 or x is None:
            return None
        k = k if users[0].op_type == "Div" else 1.0 / k
        return np.asarray(x, np.float64) / k, k, node.input[0]
    return None


def _root(graph: _Graph, name: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """The float initializer of `shape` in the constant cone of `name` (QAT weights)."""
    found = [graph.consts[i] for node in _cone(graph, name) for i in node.input
             if i in graph.consts and graph.producer.get(i) is None and
             tuple(graph.consts[i].shape) == shape]
    return np.asarray(found[0], np.float64) if len(found) == 1 else None


# -- one weight layer's numbers ----------------------------------------------------------

class _Layer:
    """The checkpoint numbers of one weight node, in the weight input's layout."""

    def __init__(self, node, form: str, bits: int, w_int: np.ndarray, path: list,
                 bias_hw: np.ndarray | None, shift: int | None) -> None:
        self.node, self.form, self.bits, self.w_int = node, form, bits, w_int
        self.path, self.bias_hw, self.shift = path, bias_hw, shift


def _stored(graph: _Graph, name: str) -> tuple[np.ndarray, str] | None:
    """The integers a `-q` checkpoint stores behind `name` (as is, or behind the `-8`
    mode's Round/Div), and the form; None when they are not integers."""
    q = _quantized(graph, name)
    if q is not None:
        value = q[0]
        return (value, "q-sim8") if _is_int(value) else None
    value = graph.const(name)
    if value is None or not _is_int(value):
        return None
    return np.asarray(value, np.float64), "q"


def _qat_bits(k: float, where: str) -> int:
    """QAT weights are quantized as Round(w * 2**(bits-1)) / 2**(bits-1) (ai8x.py
    QuantizeONNX): the factor gives the weight bits."""
    e = _pow2(k)
    if e is None or e + 1 not in (1, 2, 4, 8):
        raise _fail(where, f"the weights are fake-quantized with the factor {k:g}, not "
                    "2**(bits-1) for 1, 2, 4 or 8 bits")
    return e + 1


def _qat_layer(w: np.ndarray, b: np.ndarray | None, bits: int, quantile: float = 1.0
               ) -> tuple[np.ndarray, np.ndarray | None, int]:
    """The integers, bias and output shift the synthesis repository's `quantize.py`
    computes from QAT float weights (its default MAX_BIT_SHIFT method): bit_shift =
    floor(log2(1 / q)) with q the `quantile` of |w, b| (linear interpolation; 1: the
    maximum) clamped to [-7 - bits, 23 - bits],
    W = clamp(floor(w * 2**(bits-1) * 2**bit_shift + 0.5)), the bias the same with the
    same scale, output_shift = -bit_shift. float32 arithmetic, as torch computes it."""
    f32 = np.float32
    w = np.asarray(w, f32)
    params = np.concatenate([w.ravel()] + ([] if b is None else [np.asarray(b, f32)]))
    peak = f32(np.quantile(np.abs(params), quantile)) if params.size else f32(0)
    if peak == 0:
        bit_shift = 23 - bits
    else:
        bit_shift = int(np.clip(np.floor(np.log2(f32(1.0) / peak)), -7 - bits, 23 - bits))
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    dist = f32(2.0 ** bit_shift)
    w_int = np.clip(np.floor(w * f32(2 ** (bits - 1)) * dist + f32(0.5)), lo, hi)
    b_int = None
    if b is not None:
        b_int = np.clip(np.floor(f32(2 ** (bits - 1)) * (np.asarray(b, f32) * dist)
                                 + f32(0.5)), lo, hi)
    return w_int.astype(np.float64), None if b_int is None else b_int.astype(np.float64), \
        -bit_shift


def _layer(graph: _Graph, node, shift_const: float | None,
           quantile: float = 1.0) -> _Layer | None:
    """The checkpoint numbers behind a weight node; None for float weights."""
    where = f"node {node.name or node.output[0]} ({node.op_type})"
    value_name, path = _layout_path(graph, node.input[1])
    bias_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
    stored = _stored(graph, value_name)
    if stored is not None:
        w, form = stored
        bits = _bits_holding(w)
        if bits is None:
            raise _fail(where, f"integer weights from {w.min():.0f} to {w.max():.0f} "
                        "exceed the 8-bit range of a quantized checkpoint")
        bias_hw = None
        if bias_name is not None:
            sb = _stored(graph, bias_name)
            if sb is None:
                raise _fail(where, "integer weights with a bias that is not integer "
                            "(a quantized checkpoint stores both as integers)")
            # The stored bias is the integer bias times 2**(bits-1); the bias memory
            # holds it divided back (floor, as the synthesis tool reads it).
            bias_hw = np.floor(sb[0] / 2 ** (bits - 1))
        shift = _pow2(shift_const) if shift_const is not None else None
        if shift_const is not None and shift is None:
            raise _fail(where, f"the output scale {shift_const:g} is not a power of two")
        return _Layer(node, form, bits, w, path, bias_hw, shift)
    q = _quantized(graph, value_name)
    if q is None:
        return None
    bits = _qat_bits(q[1], where)
    if not any(n.op_type == "ReduceMax" for n in _cone(graph, value_name)):
        # Fake-quantized with a fixed scale (a QAT model exported with a stored
        # output_shift): the graph's values are already W / 2**(bits-1).
        k = 2.0 ** (bits - 1)
        w = np.asarray(graph.consts[value_name], np.float64) * k
        b = None if bias_name is None else np.asarray(graph.consts[bias_name],
                                                      np.float64) * k
        if not _is_int(w) or b is not None and not _is_int(b):
            raise _fail(where, f"fake-quantized weights that are not multiples of "
                        f"1/{k:g}")
        shift = None if shift_const is None else _pow2(shift_const)
        return _Layer(node, "qat-fixed-shift", bits, w, path, b, shift)
    shape = tuple(graph.consts[value_name].shape)
    w = _root(graph, value_name, shape)
    b = None
    if bias_name is not None:
        b_value, _ = _layout_path(graph, bias_name)
        b = _root(graph, b_value, tuple(graph.consts[b_value].shape))
        if b is None:
            raise _fail(where, "the QAT bias is not computed from one float tensor")
    if w is None:
        raise _fail(where, "the QAT weights are not computed from one float tensor")
    w_int, b_int, shift = _qat_layer(w, b, bits, quantile)
    return _Layer(node, "qat", bits, w_int, path, b_int, shift)
