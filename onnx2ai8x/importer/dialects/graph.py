"""A mutable copy of an ONNX graph for the rewriting passes (`tf2onnx.py`, `axes.py`):
nodes, constants and inferred shapes, with the small queries and edits the rules share."""
from __future__ import annotations

import numpy as np


def dims_text(values) -> str:
    """A shape or list for a message: (8, 8, 1), no numpy reprs."""
    return "(" + ", ".join(str(int(v)) for v in np.asarray(values).reshape(-1)) + ")"


class Graph:
    """A mutable copy of a model's nodes and constants, with inferred shapes."""

    def __init__(self, model) -> None:
        import onnx
        from onnx import numpy_helper

        self.model = model
        self.nodes = [copy_node(n) for n in model.graph.node]
        self.consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        self.outputs = {o.name for o in model.graph.output}
        self.input = graph_input(model).name
        self.rewrites: list[str] = []
        self._count = 0
        self.onnx = onnx
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.infer()

    def infer(self) -> None:
        m = self.build()
        try:
            m = self.onnx.shape_inference.infer_shapes(m)
        except Exception:  # noqa: BLE001 - shapes stay unknown; rules needing them skip
            return
        self.shapes = {}
        for vi in [*m.graph.input, *m.graph.value_info, *m.graph.output]:
            dims = vi.type.tensor_type.shape.dim
            if vi.type.tensor_type.HasField("shape") and all(d.HasField("dim_value")
                                                             for d in dims):
                self.shapes[vi.name] = tuple(int(d.dim_value) for d in dims)

    def build(self):
        from onnx import numpy_helper

        m = self.onnx.ModelProto()
        m.CopyFrom(self.model)
        del m.graph.node[:]
        m.graph.node.extend(self.nodes)
        # (old exporters also list initializers as graph inputs: those stay)
        used = {i for n in self.nodes for i in n.input} | {i.name for i in m.graph.input}
        del m.graph.initializer[:]
        m.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), k)
                                   for k, v in self.consts.items() if k in used)
        del m.graph.value_info[:]
        return m

    def recognition(self, dialect: str):
        """The rewritten model as a pass's Recognition (shapes inferred where onnx can),
        or None when the pass rewrote nothing."""
        from .base import Recognition

        if not self.rewrites:
            return None
        out = self.build()
        try:
            out = self.onnx.shape_inference.infer_shapes(out)
        except Exception:  # noqa: BLE001 - the walker reports what it cannot read
            pass
        return Recognition(model=out, dialect=dialect, rewrites=tuple(self.rewrites))

    # -- queries -----------------------------------------------------------------------
    def readers(self, name: str) -> list:
        return [n for n in self.nodes if name in n.input]

    def only_reader(self, name: str):
        """The one node reading `name`, if `name` is not also a graph output."""
        r = self.readers(name)
        return r[0] if len(r) == 1 and name not in self.outputs else None

    def producer(self, name: str):
        return next((n for n in self.nodes if name in n.output), None)

    def const(self, name: str):
        return self.consts.get(name)

    # -- edits -------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        """A name no tensor of the graph has (passes run one after another on each
        other's results, so a counter alone would repeat an earlier pass's names)."""
        taken = set(self.consts) | {x for n in self.nodes for x in (*n.input, *n.output)} \
            | {self.input}
        while True:
            self._count += 1
            name = f"{base}__cf{self._count}"
            if name not in taken:
                return name

    def add_const(self, base: str, value) -> str:
        name = self.fresh(base)
        self.consts[name] = np.asarray(value)
        return name

    def replace(self, old: list, new: list) -> None:
        """Put `new` where the last of `old` was (its inputs are all computed by then)."""
        at = max(self.nodes.index(n) for n in old)
        for n in new:
            self.nodes.insert(at + 1, n)
            at += 1
        for n in old:
            self.nodes.remove(n)

    def node(self, op: str, inputs, outputs, name: str, **attrs):
        return self.onnx.helper.make_node(op, list(inputs), list(outputs), name=name, **attrs)


def copy_node(node):
    import onnx

    n = onnx.NodeProto()
    n.CopyFrom(node)
    return n


def graph_input(model):
    inits = {i.name for i in model.graph.initializer}
    return next(i for i in model.graph.input if i.name not in inits)


def attr(node, name: str, default=None):
    import onnx

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def perm_of(node) -> tuple[int, ...]:
    return tuple(int(p) for p in attr(node, "perm", []) or [])


def label(node) -> str:
    return f"node {node.name or node.output[0]} ({node.op_type})"


def axes_of(g: Graph, node) -> tuple[int, ...] | None:
    """Unsqueeze/Squeeze axes (attribute before opset 13, input after)."""
    if len(node.input) > 1 and node.input[1]:
        c = g.const(node.input[1])
        return None if c is None else tuple(int(a) for a in np.asarray(c).reshape(-1))
    a = attr(node, "axes")
    return None if a is None else tuple(int(x) for x in a)
