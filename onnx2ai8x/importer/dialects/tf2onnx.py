"""tf2onnx's dialect: Keras/TensorFlow graphs, channels-last, rewritten channels-first.

TensorFlow computes in NHWC (NWC for 1-D). tf2onnx converts each convolution and pooling
to ONNX's NCHW with a `Transpose` on each side and lets its optimizer cancel the pairs;
what is left, as tf2onnx writes it with its default settings, is (seen on Keras 3 models
converted by tf2onnx 1.17, `tests/float_onnx/keras/`):

- the model input NHWC, then `Transpose (0, 3, 1, 2)`, or for one channel a `Reshape
  (H, W, 1) -> (1, H, W)` (only a size-1 axis moves, so the reshape is that transpose);
- a `Dense` on a 4-D tensor as `Transpose` to channels-last, `Reshape (H*W, C)`,
  `MatMul`, `Reshape (1, H, W, F)`, `Add` bias (TensorFlow's `Tensordot`), followed by a
  `Transpose` back for the next pooling or convolution: a 1x1 convolution;
- `Flatten` of a channels-first tensor as `Transpose` to channels-last, then `Reshape`:
  the dense layer reads the values in (H, W, C) order, the accelerator flattens in
  (C, H, W) order, so the dense weights' rows are permuted;
- `Conv1D` and 1-D pooling as 2-D operations on an `Unsqueeze`d height of 1, with a
  `Squeeze` after each; the input `Unsqueeze` then `Transpose (0, 3, 1, 2)` (the
  Transpose moved first here; the height of 1 is any exporter's relabel, `axes.py`);
- `Rescaling` / `Normalization` as `Mul` / `Add` / `Sub` / `Div` by constants on the input
  before the layout change.

Each rewrite here is exact (same values for every input). The canonical form left for the
walker: the model input in its own layout, at most one `Transpose` to channels-first as
its only reader (the input mapping's permutation), then optionally an `Add` of a
per-channel offset and a `Mul` by a positive scalar (the input mapping's offset and
scale), channels-first everywhere after.

Not representable, refused with tf2onnx named: `padding="same"` that TensorFlow pads
unequally (stride 2 on an even size: 0 before, 1 after; the accelerator pads both sides
alike, seed 000 "Padding"); a per-channel input scaling that no convolution follows.
The same rewrites run on any exporter's channels-last graph (dialect "channels-last").
"""
from __future__ import annotations

import numpy as np

from ...errors import Ai8xError
from .base import Recognition
from .graph import Graph as _Graph
from .graph import attr as _attr
from .graph import axes_of as _axes
from .graph import copy_node as _copy
from .graph import dims_text as _dims
from .graph import graph_input as _graph_input
from .graph import label as _label
from .graph import perm_of as _perm

DIALECT = "tf2onnx"
_UNARY = ("Relu", "Abs", "Clip", "Identity", "Dropout", "LeakyRelu", "Sigmoid")
_ARITH = ("Add", "Sub", "Mul", "Div")


def _refuse(code: str, where: str, message: str, hint: str) -> Ai8xError:
    return Ai8xError(f"tf2onnx.{code}", where, f"{message} (tf2onnx's form of a Keras "
                     "model)", hint)


def _to_last(rank: int) -> tuple[int, ...]:
    """The permutation channels-first -> channels-last: (0, 2, ..., rank-1, 1)."""
    return (0, *range(2, rank), 1)


def _to_first(rank: int) -> tuple[int, ...]:
    return (0, rank - 1, *range(1, rank - 1))



# -- the rules: each returns True when it rewrote something ------------------------------

def _reshape_as_transpose(g: _Graph) -> bool:
    """A Reshape whose non-1 dimensions keep their order is a Transpose (only size-1
    axes move): tf2onnx's NHWC -> NCHW change of a one-channel input."""
    for node in g.nodes:
        if node.op_type != "Reshape":
            continue
        src, dst = g.shapes.get(node.input[0]), g.shapes.get(node.output[0])
        if src is None or dst is None or len(src) != len(dst) or src == dst or \
                sorted(src) != sorted(dst):
            continue
        big_src = [k for k, d in enumerate(src) if d != 1]
        big_dst = [k for k, d in enumerate(dst) if d != 1]
        if [src[k] for k in big_src] != [dst[k] for k in big_dst]:
            continue
        ones_src = iter(k for k, d in enumerate(src) if d == 1)
        bigs = iter(big_src)
        perm = [next(bigs) if d != 1 else next(ones_src) for d in dst]
        if perm[0] != 0:
            continue  # the batch moves: not a layout change
        t = g.node("Transpose", [node.input[0]], node.output, node.name, perm=perm)
        g.replace([node], [t])
        g.rewrites.append(f"{_label(node)}: reshape {_dims(src[1:])} -> {_dims(dst[1:])} "
                          f"moves only size-1 axes = Transpose {_dims(perm)}")
        return True
    return False


def _unsqueeze_then_transpose(g: _Graph) -> bool:
    """Unsqueeze(a) then Transpose(p) = Transpose(q) then Unsqueeze(j): the layout change
    first (Conv1D's input: NWC -> N1WC -> NC1W becomes NWC -> NCW -> NC1W)."""
    for node in g.nodes:
        if node.op_type != "Unsqueeze":
            continue
        axes = _axes(g, node)
        t = g.only_reader(node.output[0])
        rank = len(g.shapes.get(node.input[0], ()))
        if axes is None or len(axes) != 1 or t is None or t.op_type != "Transpose" or \
                not rank:
            continue
        a = axes[0] % (rank + 1)
        p = _perm(t)
        j = p.index(a)
        q = [x if x < a else x - 1 for x in p if x != a]
        if q == list(range(rank)) or q[0] != 0:
            continue
        mid = g.fresh(node.output[0])
        tr = g.node("Transpose", [node.input[0]], [mid], t.name, perm=q)
        un = g.node("Unsqueeze", [mid, g.add_const("axes", np.array([j], np.int64))],
                    t.output, node.name)
        g.replace([node, t], [tr, un])
        g.rewrites.append(f"{_label(node)}, {_label(t)}: Unsqueeze then Transpose = "
                          f"Transpose {_dims(q)} then Unsqueeze at {j}")
        return True
    return False


def _transpose_then_drop(g: _Graph) -> bool:
    """Transpose(p) then a reshape that only drops size-1 axes = the reshape dropping
    the same axes first, then the smaller transpose (TFLite's Conv1D output: to
    channels-last, then the height of 1 squeezed), so the transpose can move on."""
    from .axes import relabel_of

    for t in g.nodes:
        p = _perm(t) if t.op_type == "Transpose" else ()
        drop = g.only_reader(t.output[0]) if p else None
        r = relabel_of(g, drop) if drop is not None else None
        src = g.shapes.get(t.input[0])
        if r is None or src is None or len(r.dst) >= len(r.src) or None in r.axis or \
                drop.input[0] != t.output[0] or t.input[0] == g.input:
            continue
        kept = [p[a] for a in r.axis]  # the original axes the result keeps, its order
        order = sorted(kept)
        mid = g.fresh(drop.output[0])
        shape = g.add_const("shape", np.array([src[a] for a in order], np.int64))
        new = [g.node("Reshape", [t.input[0], shape], [mid], drop.name),
               g.node("Transpose", [mid], drop.output, t.name,
                      perm=[order.index(a) for a in kept])]
        g.replace([t, drop], new)
        g.rewrites.append(f"{_label(t)} then {_label(drop)}: the size-1 axes dropped "
                          "first, then the transpose")
        return True
    return False


def _tensordot(g: _Graph) -> bool:
    """Reshape (..., C) -> (M, C), MatMul, Reshape back to (..., F) is MatMul on the
    tensor itself (TensorFlow's Tensordot: a Dense on a 3-D or 4-D tensor)."""
    for mm in g.nodes:
        if mm.op_type != "MatMul":
            continue
        w = g.const(mm.input[1])
        r1 = g.producer(mm.input[0])
        r2 = g.only_reader(mm.output[0])
        if w is None or w.ndim != 2 or r1 is None or r1.op_type != "Reshape" or \
                r2 is None or r2.op_type != "Reshape" or g.only_reader(r1.output[0]) is None:
            continue
        x = g.shapes.get(r1.input[0])
        out = g.shapes.get(r2.output[0])
        if x is None or out is None or len(x) < 3 or x[-1] != w.shape[0] or \
                out != (*x[:-1], w.shape[1]):
            continue
        new = g.node("MatMul", [r1.input[0], mm.input[1]], r2.output, mm.name)
        g.replace([r1, mm, r2], [new])
        g.rewrites.append(f"{_label(mm)}: Reshape, MatMul, Reshape (Tensordot) = MatMul on "
                          f"the {len(x)}-D tensor (a dense layer on its last axis)")
        return True
    return False


def _split_shared(g: _Graph) -> bool:
    """A Transpose read by several nodes becomes one Transpose per reader, so each can
    move on its own (the rules below move a Transpose with one reader)."""
    for t in g.nodes:
        readers = g.readers(t.output[0]) if t.op_type == "Transpose" else []
        if len(readers) < 2 or t.output[0] in g.outputs or t.input[0] == g.input:
            continue
        copies = []
        for k, r in enumerate(readers):
            name = g.fresh(t.output[0])
            copies.append(g.node("Transpose", t.input, [name], f"{t.name}_{k}",
                                 perm=list(_perm(t))))
            for i, x in enumerate(r.input):
                if x == t.output[0]:
                    r.input[i] = name
        g.replace([t], copies)
        return True
    return False


def _sink(g: _Graph, t, node, new_nodes: list, why: str) -> None:
    """Replace Transpose `t` and its reader `node` by `new_nodes` (which end in the
    Transpose writing `node`'s output)."""
    g.replace([t, node], new_nodes)
    g.rewrites.append(f"{_label(t)} moved after {_label(node)}: {why}")


def _push_transpose(g: _Graph) -> bool:
    """Move a Transpose down past the node that reads it, or cancel it with the next
    Transpose, so that tf2onnx's channels-last stretches disappear."""
    for t in g.nodes:
        p = _perm(t) if t.op_type == "Transpose" else ()
        if t.op_type != "Transpose" or (t.input[0] == g.input and p == _to_first(len(p))):
            continue  # the input's layout change stays first (the input mapping's)
        node = g.only_reader(t.output[0])
        if node is None or not p:
            continue
        if node.op_type == "Transpose":
            both = tuple(p[q] for q in _perm(node))
            if both == tuple(range(len(both))):
                _bypass(g, [t, node], t.input[0], node.output[0])
                g.rewrites.append(f"{_label(t)} and {_label(node)} cancel")
            else:
                new = g.node("Transpose", t.input, node.output, node.name, perm=list(both))
                g.replace([t, node], [new])
            return True
        moved = _moved(g, t, node, p)
        if moved is _DONE:
            return True
        if moved is not None:
            _sink(g, t, node, *moved)
            return True
    return False


def _moved(g: _Graph, t, node, p):
    """The nodes computing `node` on the untransposed tensor, then the Transpose; or
    None when `node` does not commute with it here."""
    mid = g.fresh(node.output[0])
    after = g.node("Transpose", [mid], node.output, t.name, perm=list(p))
    inv = list(np.argsort(p))
    if node.op_type in _UNARY and node.input[0] == t.output[0] and \
            not any(node.output[1:]):  # (a Dropout's mask is not moved)
        new = _copy(node)
        new.input[0] = t.input[0]
        new.output[0] = mid
        return [new, after], "an element-wise operation commutes with a transpose"
    if node.op_type in _ARITH and len(node.input) == 2:
        k = 1 if node.input[0] == t.output[0] else 0
        c = g.const(node.input[k])
        if c is None or node.input[1 - k] != t.output[0] or np.ndim(c) > len(p):
            return None
        c = np.asarray(c).reshape((1,) * (len(p) - np.ndim(c)) + np.shape(c))
        inputs = list(node.input)
        inputs[1 - k] = t.input[0]
        inputs[k] = g.add_const(node.input[k], np.transpose(c, inv))
        new = g.node(node.op_type, inputs, [mid], node.name)
        return [new, after], "the constant operand transposed alike"
    if node.op_type == "Concat":
        parts = [g.producer(x) for x in node.input]
        if any(q is None or q.op_type != "Transpose" or _perm(q) != p or
               g.only_reader(q.output[0]) is None for q in parts):
            return None
        axis = int(_attr(node, "axis", 0)) % len(p)
        new = g.node("Concat", [q.input[0] for q in parts], [mid], node.name,
                     axis=int(p[axis]))
        for q in parts:
            if q is not t:
                g.nodes.remove(q)
        return [new, after], "concatenated along the matching axis"
    if node.op_type == "MatMul" and node.input[0] == t.output[0]:
        return _dense_as_conv(g, t, node, p, mid, after)
    if node.op_type == "ReduceMean" and node.input[0] == t.output[0]:
        return _mean_moved(g, t, node, p, mid, after)
    if node.op_type in ("Reshape", "Flatten") and node.input[0] == t.output[0]:
        return _DONE if _flatten_permuted(g, t, node, p) else None
    return None


def _mean_moved(g: _Graph, t, node, p, mid, after):
    """ReduceMean over channels-last axes (Keras' GlobalAveragePooling2D as TensorFlow's
    Mean over (1, 2)) = ReduceMean over the matching channels-first axes; without
    keepdims the transpose disappears when the kept axes stay in order."""
    axes = _axes(g, node)
    if axes is None:
        return None
    rank = len(p)
    src = sorted(p[a % rank] for a in axes)
    keep = int(_attr(node, "keepdims", 1))
    kept = [q for q in p if q not in src]
    attrs = {"keepdims": keep}
    inputs = [t.input[0]]
    if len(node.input) > 1 and node.input[1]:
        inputs.append(g.add_const(node.input[1], np.array(src, np.int64)))
    else:
        attrs["axes"] = src
    why = "the mean over the matching axes"
    if keep:
        return [g.node("ReduceMean", inputs, [mid], node.name, **attrs), after], why
    if kept != sorted(kept):
        # the kept axes in the transposed order: a smaller transpose after the mean
        order = sorted(kept)
        return [g.node("ReduceMean", inputs, [mid], node.name, **attrs),
                g.node("Transpose", [mid], node.output, t.name,
                       perm=[order.index(q) for q in kept])], why
    return [g.node("ReduceMean", inputs, node.output, node.name, **attrs)], why


def _bypass(g: _Graph, old: list, src: str, out: str) -> None:
    """Remove `old`, whose output `out` equals `src`."""
    if out in g.outputs:
        g.replace(old, [g.node("Identity", [src], [out], old[-1].name)])
        return
    for n in g.nodes:
        for i, x in enumerate(n.input):
            if x == out:
                n.input[i] = src
    for n in old:
        g.nodes.remove(n)


def _dense_as_conv(g: _Graph, t, mm, p, mid, after):
    """Dense on channels-last data (MatMul over the last axis of a 3-D or 4-D tensor)
    = a 1x1 convolution of the channels-first data (weights (C, F) -> (F, C, 1, 1))."""
    w = g.const(mm.input[1])
    rank = len(p)
    if w is None or w.ndim != 2 or rank < 3 or p != _to_last(rank):
        return None
    kernel = np.ascontiguousarray(w.T).reshape(w.shape[1], w.shape[0], *([1] * (rank - 2)))
    conv = g.node("Conv", [t.input[0], g.add_const(mm.input[1], kernel)], [mid], mm.name,
                  kernel_shape=[1] * (rank - 2))
    return [conv, after], "a dense layer on the channels-last tensor = a 1x1 convolution"


def _flatten_permuted(g: _Graph, t, flat, p):
    """Flatten of channels-last data read by a dense layer: flatten the channels-first
    data instead and permute the dense weights' input rows to match."""
    shape = g.shapes.get(t.input[0])
    out = g.shapes.get(flat.output[0])
    dense = g.only_reader(flat.output[0])
    if shape is None or out is None or dense is None or len(out) != 2 or \
            int(np.prod(shape[1:])) != out[1] or dense.input[0] != flat.output[0] or \
            (flat.op_type == "Flatten" and int(_attr(flat, "axis", 1)) != 1):
        return False
    w = g.const(dense.input[1]) if len(dense.input) > 1 else None
    trans_b = dense.op_type == "Gemm" and _attr(dense, "transB", 0)
    if dense.op_type not in ("MatMul", "Gemm") or w is None or w.ndim != 2 or \
            (dense.op_type == "Gemm" and _attr(dense, "transA", 0)):
        return False
    n = out[1]
    order = np.arange(n).reshape(shape[1:]).transpose([k - 1 for k in p[1:]]).ravel()
    rows = w.T if trans_b else w
    if rows.shape[0] != n:
        return False
    canon = np.empty_like(rows)
    canon[order] = rows
    new_flat = _copy(flat)
    new_flat.input[0] = t.input[0]
    new_dense = _copy(dense)
    new_dense.input[1] = g.add_const(dense.input[1], canon.T if trans_b else canon)
    g.replace([t, flat, dense], [new_flat, new_dense])
    g.rewrites.append(f"{_label(dense)}: reads a channels-last flatten "
                      f"({_label(t)}); the dense weights' rows permuted to the "
                      "channels-first order the accelerator flattens in")
    return True


_DONE = object()  # a rule rewrote the nodes itself


def _input_chain(g: _Graph):
    """From the model input: the constant arithmetic (Rescaling, Normalization), the
    layout Transpose and the first node after them (each the only reader of the last)."""
    cur, ops, trans = g.input, [], None
    while True:
        r = g.only_reader(cur)
        if r is None:
            return ops, trans, None
        if r.op_type == "Transpose" and trans is None and r.input[0] == cur:
            trans = r
        elif r.op_type in _ARITH and len(r.input) == 2 and \
                (g.const(r.input[0]) is None) != (g.const(r.input[1]) is None):
            ops.append((r, trans is None))
        else:
            return ops, trans, r
        cur = r.output[0]


def _affine(g: _Graph, ops, perm, rank: int) -> tuple[np.ndarray, np.ndarray] | None:
    """x -> a * x + b of the arithmetic, in the channels-first layout, per channel
    (shapes (C,) or (1,)); None if it varies over positions."""
    a, b = np.ones((1,) * rank), np.zeros((1,) * rank)
    for node, before in ops:
        k = 1 if g.const(node.input[1]) is not None else 0
        c = np.asarray(g.const(node.input[k]), np.float64)
        if c.ndim > rank:
            return None
        c = c.reshape((1,) * (rank - c.ndim) + c.shape)
        if before and perm:
            c = np.transpose(c, perm)
        op = node.op_type
        if op == "Mul":
            a, b = a * c, b * c
        elif op == "Div" and k == 1:
            a, b = a / c, b / c
        elif op == "Add":
            b = b + c
        elif op == "Sub" and k == 1:
            b = b - c
        elif op == "Sub":  # c - x
            a, b = -a, c - b
        else:
            return None
    if any(d != 1 for arr in (a, b) for d in arr.shape[2:]) or a.shape[0] != 1 or \
            b.shape[0] != 1:
        return None
    return a.reshape(-1), b.reshape(-1)


def _input_arith(g: _Graph) -> bool:
    """Rescaling / Normalization on the input, x -> a * x + b per channel, rewritten as
    the input mapping takes it: the layout Transpose, Add(b / a), Mul(s) with s > 0
    common to all channels (both exact parts of the mapping: the accelerator's zero
    padding is zeros of the offset input, as the model's padding), and a per-channel
    rest a / s folded into the first convolution's weights (exact: scaling a channel
    commutes with zero padding)."""
    ops, trans, first = _input_chain(g)
    if not ops or first is None:
        return False
    shape = g.shapes.get(g.input)
    perm = list(_perm(trans)) if trans is not None else None
    rank = len(shape) if shape else 0
    ab = _affine(g, ops, perm, rank) if rank >= 2 else None
    if ab is None or np.any(ab[0] == 0):
        return False
    a, b = ab
    uniform = bool(np.all(a == a[0]) and a[0] > 0)
    kinds = [n.op_type for n, _ in ops]
    if uniform and kinds in (["Add"], ["Mul"], ["Add", "Mul"]) and \
            not any(before for _, before in ops if trans is not None):
        return False  # already the canonical Transpose -> Add -> Mul
    s = float(a[0]) if uniform else 1.0
    w = None
    if not uniform:
        dense = first is not None and first.op_type in ("MatMul", "Gemm") and rank == 2 \
            and not _attr(first, "transA", 0)
        if first is not None and (first.op_type == "Conv" or dense):
            w = g.const(first.input[1])
        if w is None or np.ndim(w) < 2:
            raise _refuse("input-scale", ", ".join(_label(n) for n, _ in ops),
                          "a per-channel input scaling that no convolution or dense "
                          "layer follows", "normalize the data before the model, or start "
                          "the model with a Conv2D / Conv1D / Dense")
    _fold_input(g, ops, trans, first, w, a / s, b / a, s)
    return True


def _scaled_weights(w: np.ndarray, a: np.ndarray, groups: int) -> np.ndarray:
    """Convolution weights (O, C/groups, k...) with input channel c scaled by a[c]."""
    out, per = w.shape[0], w.shape[1]
    a = np.broadcast_to(a, (per * groups,))
    cin = (np.arange(out) // (out // groups))[:, None] * per + np.arange(per)[None, :]
    return w * a[cin].reshape(out, per, *([1] * (w.ndim - 2)))


def _fold_input(g: _Graph, ops, trans, first, w, a, d, s) -> None:
    cur = g.input
    new = []
    if trans is not None:
        cur = g.fresh(trans.output[0])
        new.append(g.node("Transpose", [g.input], [cur], trans.name, perm=list(_perm(trans))))
    rank = len(g.shapes[g.input])
    if np.any(d):
        out = g.fresh(ops[0][0].output[0])
        vec = np.asarray(d, np.float32).reshape(1, -1, *([1] * (rank - 2)))
        new.append(g.node("Add", [cur, g.add_const("input_offset", vec)], [out],
                          f"{ops[0][0].name}_offset"))
        cur = out
    if s != 1.0:
        out = g.fresh(ops[-1][0].output[0])
        new.append(g.node("Mul", [cur, g.add_const("input_scale", np.float32(s))], [out],
                          f"{ops[-1][0].name}_scale"))
        cur = out
    old = [n for n, _ in ops] + ([trans] if trans is not None else [])
    if w is not None:
        conv = _copy(first)
        conv.input[0] = cur
        if first.op_type == "Conv":
            scaled = _scaled_weights(np.asarray(w, np.float64), a,
                                     int(_attr(first, "group", 1)))
        elif first.op_type == "Gemm" and _attr(first, "transB", 0):  # (out, in)
            scaled = np.asarray(w, np.float64) * a.reshape(1, -1)
        else:  # MatMul / Gemm: (in, out)
            scaled = np.asarray(w, np.float64) * a.reshape(-1, 1)
        conv.input[1] = g.add_const(first.input[1], scaled.astype(np.float32))
        new.append(conv)
        old.append(first)
    else:
        for i, x in enumerate(first.input):
            if x == old[-1].output[0]:
                first.input[i] = cur
    g.replace(old, new)
    g.rewrites.append(
        f"{', '.join(_label(n) for n, _ in ops)}: input scaling (Rescaling / "
        "Normalization) = " + ", ".join(part for part, used in (
            ("an offset per channel in the input mapping", np.any(d)),
            (f"scale {s:g} in the input mapping", s != 1.0),
            ("per-channel scales folded into the first layer's weights",
             w is not None)) if used))


def _check_padding(g: _Graph) -> None:
    """TensorFlow's padding="same" pads (total // 2) before and the rest after: unequal
    when the total is odd (e.g. stride 2 on an even size). The accelerator pads both
    sides of a row or column alike (seed 000, "Padding")."""
    for node in g.nodes:
        if node.op_type not in ("Conv", "MaxPool", "AveragePool"):
            continue
        pads = [int(p) for p in _attr(node, "pads", []) or []]
        nd = len(pads) // 2
        if pads[:nd] == pads[nd:]:
            continue
        size = g.shapes.get(node.input[0])
        kernel = list(_attr(node, "kernel_shape", []) or [])
        if node.op_type == "Conv" and size and len(size) == 4 and any(
                size[2 + a] == 1 and kernel[a:a + 1] == [1] for a in range(2)):
            continue  # Conv1D on a height of 1: a 1-D convolution (axes.py), made even
        sizes = f" on a {' x '.join(str(d) for d in size[2:])} input" if size else ""
        strides = _attr(node, "strides", [1] * nd) or [1] * nd
        raise _refuse("same-padding", _label(node), f"stride "
                      f"{' x '.join(str(int(v)) for v in strides)}{sizes} padded "
                      f"{_dims(pads[:nd])} before and {_dims(pads[nd:])} after (Keras' "
                      "padding=\"same\" with stride 2 on an even size, or a ZeroPadding2D "
                      "of unequal sides); the accelerator pads both sides alike",
                      "in Keras, give this layer an odd-sized input (then TensorFlow pads "
                      "both sides alike), or use padding=\"valid\" after ZeroPadding2D(1), "
                      "or stride 1 followed by MaxPooling2D(2); then export again with "
                      "tf2onnx")


_RULES = (_reshape_as_transpose, _unsqueeze_then_transpose, _transpose_then_drop,
          _tensordot, _split_shared, _push_transpose, _input_arith)


def _is_tf2onnx(model) -> bool:
    return model.producer_name == "tf2onnx"


def recognize(model) -> Recognition | None:
    """tf2onnx's channels-last idioms rewritten channels-first (see the module text);
    None when there is nothing to rewrite."""
    if not _is_tf2onnx(model) and not _channels_last_input(model) and \
            not any(n.op_type == "Transpose" for n in model.graph.node):
        return None
    try:
        g = _rewritten(model)
    except (ValueError, IndexError, KeyError, TypeError, AttributeError) as exc:
        # A graph that breaks a rule's reading (an attribute of the wrong length, a
        # constant of the wrong shape) is malformed: onnx.checker or onnxruntime would
        # refuse it too. Said as such, not as a traceback.
        raise _refuse("unreadable", "model", f"the channels-last graph cannot be read "
                      f"({type(exc).__name__}: {str(exc)[:160]})", "check the model with "
                      "onnx.checker and onnxruntime, then export it again with "
                      "tf2onnx") from None
    if not g.rewrites and not _is_tf2onnx(model):
        return None
    import onnx

    out = g.build()
    try:
        out = onnx.shape_inference.infer_shapes(out)
    except Exception:  # noqa: BLE001 - the walker reports what it cannot read
        pass
    # The same rewrites are exact on any exporter's channels-last graph; named for the
    # source they were made for when it is not tf2onnx.
    if not _is_tf2onnx(model):
        return Recognition(model=out, dialect="channels-last", rewrites=tuple(g.rewrites))
    return Recognition(model=out, dialect=DIALECT, rewrites=tuple(g.rewrites),
                       facts={"exporter": "tf2onnx's export of a Keras/TensorFlow model: "
                                          "change the Keras model and export it again"})


def _rewritten(model) -> _Graph:
    """The model with every rule applied until none applies, its padding checked."""
    from .axes import MERGE_RULES

    g = _Graph(model)
    for _ in range(10 * len(g.nodes) + 10):
        if not any(rule(g) for rule in (*_RULES, *MERGE_RULES)):
            break
        g.infer()
    if _is_tf2onnx(model):
        _check_padding(g)
    return g


def _channels_last_input(model) -> bool:
    """The model input's reader (after constant arithmetic) is a Transpose, Reshape or
    Unsqueeze: a channels-last graph from any exporter."""
    name = _graph_input(model).name
    for _ in range(16):
        readers = [n for n in model.graph.node if name in n.input]
        if len(readers) != 1:
            return False
        if readers[0].op_type in ("Transpose", "Reshape", "Unsqueeze"):
            return True
        if readers[0].op_type not in _ARITH:
            return False
        name = readers[0].output[0]
    return False
