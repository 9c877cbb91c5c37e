"""Rank changes that only relabel axes, folded away whoever wrote them (issue 34, item 1).

Exporters lift and drop size-1 axes around operations: torch's default exporter writes
`AdaptiveAvgPool1d(1)` as `Unsqueeze -> ReduceMean -> Squeeze`, tf2onnx writes every
Keras 1-D layer as `ExpandDims (Unsqueeze) -> 2-D operation -> Squeeze`, others use a
`Reshape` to add a height of 1 or a `Transpose` that moves only size-1 axes. Each of
these nodes is a *relabel*: the tensor's values stay in the same order (only size-1 axes
appear, disappear or move), so it is a `Reshape` whatever its operator.

This pass moves every relabel down the graph, past the nodes that compute the same thing
on the tensor before it (element-wise operations, convolutions and pooling that do
nothing along the size-1 axes, means and maxima, BatchNormalization, arithmetic with a
constant), merges relabels that meet, and drops the ones that end where they started.
What stays is a relabel in front of a node that needs its own rank, which the walker
reads as a reshape (or refuses, naming the node and the axis).

Exact by construction: a relabel keeps the values' order, an operation that is trivial
along an axis of size 1 (kernel 1, stride 1, no padding) computes the same values without
it, and the relabel after it restores the operation's own output shape. Which size-1 axis
of one shape is which of the other does not matter (their values are the same), so the
pairing below is one consistent choice, not a guess.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Recognition
from .graph import Graph, attr, axes_of, copy_node, label

DIALECT = "axes"
_RESHAPES = ("Unsqueeze", "Squeeze", "Reshape", "Flatten", "Transpose")
_UNARY = ("Relu", "Abs", "Clip", "Identity", "Dropout", "LeakyRelu", "Sigmoid", "Tanh",
          "Elu", "Selu", "Neg", "HardSigmoid", "HardSwish", "Softplus", "Floor", "Round",
          "Ceil", "Sqrt", "Exp", "Log")
_ARITH = ("Add", "Sub", "Mul", "Div")
_WINDOWED = ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool")
_GLOBAL = ("GlobalAveragePool", "GlobalMaxPool")
_REDUCE = ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum")


@dataclass(frozen=True)
class Relabel:
    """A reshape that keeps the values' order: `axis[k]` is the source axis that is
    target axis k, or None for a new size-1 axis; source axes no target axis names are
    size-1 axes that disappear."""

    src: tuple[int, ...]
    dst: tuple[int, ...]
    axis: tuple[int | None, ...]

    @property
    def identity(self) -> bool:
        return self.src == self.dst


def pairing(src: tuple[int, ...], dst: tuple[int, ...]) -> Relabel | None:
    """The relabel between two shapes with the same non-1 sizes in the same order: non-1
    axes in order, and between them the size-1 axes left to right; None otherwise."""
    big_s = [k for k, d in enumerate(src) if d != 1]
    big_d = [k for k, d in enumerate(dst) if d != 1]
    if [src[k] for k in big_s] != [dst[k] for k in big_d]:
        return None
    axis: list[int | None] = [None] * len(dst)
    bounds_s = [-1, *big_s, len(src)]
    bounds_d = [-1, *big_d, len(dst)]
    for i in range(len(bounds_s) - 1):
        ones_s = range(bounds_s[i] + 1, bounds_s[i + 1])
        ones_d = range(bounds_d[i] + 1, bounds_d[i + 1])
        for a, b in zip(ones_s, ones_d, strict=False):
            axis[b] = a
        if i < len(big_s):
            axis[big_d[i]] = big_s[i]
    return Relabel(tuple(src), tuple(dst), tuple(axis))


def relabel_of(g: Graph, node) -> Relabel | None:
    """The relabel `node` is, if it is one (a reshape keeping the values' order, of
    computed data with known shapes)."""
    if node.op_type not in _RESHAPES or not node.input or node.input[0] in g.consts or \
            g.const(node.input[0]) is not None:
        return None
    src, dst = g.shapes.get(node.input[0]), g.shapes.get(node.output[0])
    if src is None or dst is None:
        return None
    if node.op_type == "Transpose":
        perm = [int(p) for p in attr(node, "perm", []) or []]
        if not perm:
            return None
        moved = [p for p in perm if src[p] != 1]
        if moved != sorted(moved):
            return None  # non-1 axes change order: the values move
    return pairing(src, dst)


def _reshape(g: Graph, src: str, out: str, shape: tuple[int, ...], name: str):
    """A Reshape of `src` to `shape` (batch first, as every shape here is at batch 1)."""
    return g.node("Reshape", [src, g.add_const("shape", np.array(shape, np.int64))],
                  [out], name)


def _bypass(g: Graph, node, src: str) -> None:
    """Drop `node`, whose output equals `src`."""
    out = node.output[0]
    if out in g.outputs:
        g.replace([node], [g.node("Identity", [src], [out], node.name)])
        return
    for n in g.nodes:
        for i, x in enumerate(n.input):
            if x == out:
                n.input[i] = src
    g.nodes.remove(node)


# -- the rules: each returns True when it rewrote something ------------------------------

def _cancel(g: Graph) -> bool:
    """A relabel that ends where it started is no node at all."""
    for node in g.nodes:
        r = relabel_of(g, node)
        if r is not None and r.identity and node.input[0] != g.input:
            _bypass(g, node, node.input[0])
            g.rewrites.append(f"{label(node)}: only relabels size-1 axes, "
                              "and the shape is the one it started from: dropped")
            return True
    return False


def _merge(g: Graph) -> bool:
    """A reshape of a relabel is that reshape of the relabel's input (a relabel keeps
    the values' order, and a reshape reads only that order)."""
    for node in g.nodes:
        r = relabel_of(g, node)
        reader = g.only_reader(node.output[0]) if r is not None else None
        if reader is None or reader.op_type not in _RESHAPES or \
                reader.input[0] != node.output[0]:
            continue
        out = g.shapes.get(reader.output[0])
        if out is None or (reader.op_type == "Transpose" and relabel_of(g, reader) is None):
            continue
        new = _reshape(g, node.input[0], reader.output[0], out, reader.name)
        g.replace([node, reader], [new])
        g.rewrites.append(f"{label(node)} then {label(reader)}: one reshape "
                          f"{tuple(r.src[1:])} -> {tuple(out[1:])}")
        return True
    return False


def _sink(g: Graph) -> bool:
    """Move a relabel below the node reading it, when that node computes the same
    values on the relabel's input."""
    for node in g.nodes:
        r = relabel_of(g, node)
        if r is None or r.identity or node.input[0] == g.input:
            continue
        readers = g.readers(node.output[0])
        if len(readers) != 1 or node.output[0] in g.outputs:
            continue
        reader = readers[0]
        moved = _moved(g, node, r, reader)
        if moved is None:
            continue
        new, why = moved
        g.replace([node, reader], new)
        g.rewrites.append(f"{label(node)} moved below {label(reader)}: {why}")
        return True
    return False


def _moved(g: Graph, rel, r: Relabel, node):
    """The nodes computing `node` on the relabel's input followed by the relabel to
    `node`'s own output shape, or None where they would not be the same values."""
    out_shape = g.shapes.get(node.output[0])
    if out_shape is None:
        return None
    src = rel.input[0]
    mid = g.fresh(node.output[0])
    after = _reshape(g, mid, node.output[0], out_shape, rel.name)
    op = node.op_type
    if op in _UNARY and node.input[0] == rel.output[0] and not any(node.output[1:]) and \
            rel.output[0] not in node.input[1:]:
        new = copy_node(node)
        new.input[0] = src
        new.output[0] = mid
        return [new, after], "an element-wise operation"
    if op in _ARITH and len(node.input) == 2:
        return _arith(g, rel, r, node, src, mid, after, out_shape)
    if node.input[0] != rel.output[0] or rel.output[0] in node.input[1:]:
        return None
    if op == "BatchNormalization" and r.axis[1:2] == (1,) and len(r.src) >= 2 and \
            len(node.output) == 1:
        new = copy_node(node)
        new.input[0] = src
        new.output[0] = mid
        return [new, after], "BatchNormalization keeps the channel axis"
    if op in _WINDOWED or op in _GLOBAL:
        new = _windowed(g, node, r, src, mid)
        return None if new is None else ([new, after], "the operation does nothing along "
                                         "the size-1 axes (window 1, stride 1, no padding)")
    if op in _REDUCE:
        return _reduce(g, node, r, src, mid, after)
    return None


def _arith(g: Graph, rel, r: Relabel, node, src, mid, after, out_shape):
    """Arithmetic with a constant (relabelled alike) or with another relabel of the
    same shapes."""
    if out_shape != r.dst:
        return None  # broadcasting widens the data: not a relabel any more
    k = [i for i, x in enumerate(node.input) if x == rel.output[0]]
    if len(k) != 1:
        return None
    other = node.input[1 - k[0]]
    inputs = list(node.input)
    inputs[k[0]] = src
    c = g.const(other)
    if c is not None:
        c = np.asarray(c)
        if c.ndim > len(r.dst):
            return None
        full = c.reshape((1,) * (len(r.dst) - c.ndim) + c.shape)
        shape = [1] * len(r.src)
        for t, s in enumerate(r.axis):
            if s is not None:
                shape[s] = full.shape[t]
            elif full.shape[t] != 1:
                return None
        inputs[1 - k[0]] = g.add_const(other, full.reshape(shape))
    else:
        prod = g.producer(other)
        r2 = relabel_of(g, prod) if prod is not None else None
        if r2 is None or r2 != r or g.only_reader(other) is None:
            return None
        inputs[1 - k[0]] = prod.input[0]
        g.nodes.remove(prod)
    new = copy_node(node)
    del new.input[:]
    new.input.extend(inputs)
    new.output[0] = mid
    return [new, after], "arithmetic on the same values"


def _spatial(r: Relabel) -> tuple[list[int | None], list[int]] | None:
    """Per target spatial axis its source axis; the source's spatial axes. None when
    batch or channels are not the source's."""
    if len(r.dst) < 3 or len(r.src) < 3 or r.axis[0] != 0 or r.axis[1] != 1:
        return None
    return list(r.axis[2:]), list(range(2, len(r.src)))


def _windowed(g: Graph, node, r: Relabel, src: str, mid: str):
    """A convolution or pooling on the relabel's input: its per-axis attributes moved
    to the source's spatial axes (trivial along the axes only one side has)."""
    axes = _spatial(r)
    if axes is None or attr(node, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    dst_sp, src_sp = axes
    nd, ns = len(dst_sp), len(src_sp)
    w = g.const(node.input[1]) if node.op_type in ("Conv", "ConvTranspose") else None
    if node.op_type in ("Conv", "ConvTranspose") and (w is None or w.ndim != nd + 2):
        return None
    kernel = list(w.shape[2:]) if w is not None else list(attr(node, "kernel_shape", []) or
                                                         [1] * nd)
    per_axis = {"kernel_shape": (kernel, 1), "strides": (None, 1), "dilations": (None, 1),
                "output_padding": (None, 0)}
    values = {}
    for key, (given, trivial) in per_axis.items():
        got = given if given is not None else attr(node, key)
        values[key] = [trivial] * nd if got is None else [int(v) for v in got]
    pads = [int(v) for v in attr(node, "pads", []) or [0] * (2 * nd)]
    if any(len(v) != nd for v in values.values()) or len(pads) != 2 * nd or \
            attr(node, "output_shape") is not None:
        return None
    if node.op_type in _GLOBAL:
        values = {}
        pads = None
    new_vals = {key: [1 if key != "output_padding" else 0] * ns for key in values}
    new_pads = [0] * (2 * ns)
    for t, s in enumerate(dst_sp):
        trivial = all(values[key][t] == (0 if key == "output_padding" else 1)
                      for key in values) and (pads is None or pads[t] == pads[nd + t] == 0)
        if s is None:
            if not trivial:
                return None
            continue
        for key in values:
            new_vals[key][s - 2] = values[key][t]
        if pads is not None:
            new_pads[s - 2], new_pads[ns + s - 2] = pads[t], pads[nd + t]
    new = copy_node(node)
    new.input[0] = src
    new.output[0] = mid
    keep = [a for a in new.attribute if a.name not in (*per_axis, "pads")]
    del new.attribute[:]
    new.attribute.extend(keep)
    present = {a.name for a in node.attribute}
    for key, vals in new_vals.items():
        if key in present:
            new.attribute.append(_ints_attr(g, key, vals))
    if pads is not None and "pads" in present:
        new.attribute.append(_ints_attr(g, "pads", new_pads))
    if w is not None:
        shape = [1] * ns
        for t, s in enumerate(dst_sp):
            if s is not None:
                shape[s - 2] = w.shape[2 + t]
        new.input[1] = g.add_const(node.input[1], w.reshape(*w.shape[:2], *shape))
    return new


def _ints_attr(g: Graph, key: str, vals):
    return g.onnx.helper.make_attribute(key, [int(v) for v in vals])


def _reduce(g: Graph, node, r: Relabel, src, mid, after):
    """A reduction on the relabel's input over the source axes the reduced axes are;
    nothing when they are all new size-1 axes."""
    axes = axes_of(g, node)
    rank = len(r.dst)
    if axes is None:
        if int(attr(node, "noop_with_empty_axes", 0)):
            return None
        axes = tuple(range(rank))
    mapped = sorted({r.axis[a % rank] for a in axes} - {None})
    if not mapped:
        return [_reshape(g, src, node.output[0], g.shapes[node.output[0]],
                         node.name)], "the reduced axes are all size 1"
    new = copy_node(node)
    new.input[0] = src
    new.output[0] = mid
    if len(node.input) > 1 and node.input[1]:
        new.input[1] = g.add_const(node.input[1], np.array(mapped, np.int64))
    else:
        kept = [a for a in new.attribute if a.name != "axes"]
        del new.attribute[:]
        new.attribute.extend(kept)
        new.attribute.append(_ints_attr(g, "axes", mapped))
    return [new, after], "the reduction over the matching axes"


_RULES = (_cancel, _merge, _sink)
# Relabels meeting each other, for other passes' rule loops (tf2onnx.py: a transpose
# stuck behind an Unsqueeze/Squeeze pair moves on once the pair is gone).
MERGE_RULES = (_cancel, _merge)


def recognize(model) -> Recognition | None:
    """The model with its relabels folded (see the module text); None when it has none
    to fold."""
    if not any(n.op_type in _RESHAPES for n in model.graph.node):
        return None
    g = Graph(model)
    for _ in range(10 * len(g.nodes) + 10):
        if not any(rule(g) for rule in _RULES):
            break
        g.infer()
    return g.recognition(DIALECT)


__all__ = ["MERGE_RULES", "Relabel", "pairing", "recognize", "relabel_of"]
