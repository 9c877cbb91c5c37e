"""Speed rewrites applied by `custom_ops.session` (never to the stored model).

onnxruntime's int8 x int8 `ConvInteger` / `MatMulInteger` take a slow generic path. Two
exact replacements, chosen per node:

* **float32 when provably exact.** Every product of an int8 sample value (|x| <= 128)
  and a weight is an integer, and so is every partial sum, whatever the summation order
  or blocking. If sum(|w|) * 128 over one output's weights is below 2**24, every partial
  sum is an integer of magnitude below 2**24, which float32 represents exactly, so each
  float add (or fused multiply-add) is exact and the result equals the integer
  convolution. (This is why float Conv in general is NOT exact: with large channel counts
  the bound exceeds 2**24.) onnxruntime's CPU convolutions are direct sums (im2col + GEMM
  or direct NCHWc kernels), never Winograd/FFT transforms.
* **otherwise uint8 x uint8 with zero points 128.** (x + 128) and (w + 128) as uint8 with
  zero point 128 give sum((xu - 128) * (wu - 128)) = sum(x * w); onnxruntime's u8u8 kernels
  widen to 16 bits before multiplying (no saturation) and accumulate in int32.
"""
from __future__ import annotations

import numpy as np

from onnx2ai8x import onnxpb as helper
from onnx2ai8x.onnxpb import GraphProto, ModelProto, NodeProto, TensorProto

FLOAT_EXACT_LIMIT = 2 ** 24
_SAMPLE_MAX = 128  # |int8| <= 128


def _unique(names: set[str], base: str) -> str:
    name, k = base, 0
    while name in names:
        k += 1
        name = f"{base}_{k}"
    names.add(name)
    return name


def _attr(node: NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _match_output_stage(node, only_user, inits):
    """(bias or None, folded nodes, shift, abs?, lo, hi) when `node` is followed by the
    builder's 8-bit output stage [Add bias] -> OutputShift -> [Abs] -> Clamp(int8)."""
    folded = []
    cur = node.output[0]
    bias = None
    add = only_user(cur, "Add")
    if add is not None and add.input[0] == cur and add.input[1] in inits:
        bias = helper.to_array(inits[add.input[1]]).astype(np.int64)
        folded.append(add)
        cur = add.output[0]
    shift = only_user(cur, "OutputShift", "ai8x")
    if shift is None:
        return None
    folded.append(shift)
    cur = shift.output[0]
    absn = only_user(cur, "Abs")
    if absn is not None:
        folded.append(absn)
        cur = absn.output[0]
    clamp = only_user(cur, "Clamp", "ai8x")
    if clamp is None or _attr(clamp, "to", TensorProto.INT8) != TensorProto.INT8:
        return None
    folded.append(clamp)
    return (bias, folded, int(_attr(shift, "shift")), absn is not None,
            int(_attr(clamp, "min")), int(_attr(clamp, "max")))


def _fused_float_layer(node, x, weights, fused, names, new_inits):
    """Conv/MatMul + bias + output shift + activation + clamp, all in float32.

    Exact: the accumulator (bias included) is an integer below 2**24; scaling by a power
    of two is exact; floor(v + 0.5) is exact whenever |v| < 2**23, and any larger value
    is clamped to the same int8 result either way.
    """
    bias, folded, shift, use_abs, lo, hi = fused
    base = node.name or node.output[0]
    out = folded[-1].output[0]

    def const(tag: str, arr) -> str:
        name = _unique(names, f"{base}/{tag}")
        new_inits.append(helper.from_array(np.asarray(arr, dtype=np.float32), name))
        return name

    def tensor(tag: str) -> str:
        return _unique(names, f"{base}/{tag}")

    nodes = []
    acc = tensor("facc")
    if node.op_type == "ConvInteger":
        ins = [x, const("fweight", weights)]
        if bias is not None:
            ins.append(const("fbias", bias.reshape(-1)))
        conv = helper.make_node("Conv", ins, [acc], name=acc)
        conv.attribute.extend(node.attribute)
        nodes.append(conv)
    else:
        mm = tensor("fmatmul") if bias is not None else acc
        nodes.append(helper.make_node("MatMul", [x, const("fweight", weights)], [mm], name=mm))
        if bias is not None:
            nodes.append(helper.make_node("Add", [mm, const("fbias", bias.reshape(-1))], [acc],
                                          name=acc))
    scaled, rounded, floored = tensor("fscaled"), tensor("fhalf"), tensor("ffloor")
    nodes += [
        helper.make_node("Mul", [acc, const("fscale", 2.0 ** (shift - 7))], [scaled],
                         name=scaled),
        helper.make_node("Add", [scaled, const("fhalf_c", 0.5)], [rounded], name=rounded),
        helper.make_node("Floor", [rounded], [floored], name=floored)]
    cur = floored
    if use_abs:
        # abs after the int8 clip (vendor) equals clip(abs) to [0, 127] here
        ab = tensor("fabs")
        nodes.append(helper.make_node("Abs", [cur], [ab], name=ab))
        cur = ab
    clipped = tensor("fclip")
    nodes.append(helper.make_node("Clip", [cur, const("flo", lo), const("fhi", hi)], [clipped],
                                  name=clipped))
    nodes.append(helper.make_node("Cast", [clipped], [out], name=node.name, to=TensorProto.INT8))
    return nodes


def _drop_dead_nodes(graph: GraphProto) -> None:
    """Remove nodes none of whose outputs is used (the int8 casts the float path bypasses)."""
    while True:
        used = {i for node in graph.node for i in node.input}
        used.update(o.name for o in graph.output)
        live = [n for n in graph.node if any(o in used for o in n.output)]
        if len(live) == len(graph.node):
            return
        del graph.node[:]
        graph.node.extend(live)


def optimize(model: ModelProto) -> ModelProto:
    """A copy of `model` (onnx2ai8x.onnxpb or onnx message) as an onnxpb message, with
    exact, faster kernels for its integer convolutions."""
    # The caller's model stays as it was: the rewrite works on a copy (the protobuf
    # runtime copies in C, weights included, in well under a millisecond for our sizes).
    out = helper.copy(helper.from_onnx(model))
    _Rewrite(out.graph).run()
    # Nodes stay in topological order: conversions were emitted before their users.
    return out


class _Rewrite:
    """One rewrite of one graph (no state survives it)."""

    def __init__(self, graph) -> None:
        self.graph = graph
        self.inits = {t.name: t for t in graph.initializer}
        self.names = {n for node in graph.node for n in (*node.input, *node.output, node.name)}
        self.names.update(self.inits)
        self.converted: dict[tuple[str, str], str] = {}  # (tensor, kind) -> converted
        self.new_nodes: list[NodeProto] = []
        self.new_inits: list[TensorProto] = []
        # int8 tensor -> a float32 tensor holding the same integers (saves Cast round
        # trips and lets pooling and convolution stay in onnxruntime's fast float layouts)
        self.float_eq: dict[str, str] = {}
        self.consumers: dict[str, list[NodeProto]] = {}
        for node in graph.node:
            for i in node.input:
                self.consumers.setdefault(i, []).append(node)
        self.outputs = {o.name for o in graph.output}
        self.skip: set[int] = set()  # ids of nodes folded into a fused float layer

    def unique(self, base: str) -> str:
        return _unique(self.names, base)

    def convert_input(self, x: str, kind: str) -> str:
        if kind == "float" and x in self.float_eq:
            return self.float_eq[x]
        key = (x, kind)
        if key not in self.converted:
            if kind == "float":
                name = self.unique(f"{x}/as_float")
                self.new_nodes.append(helper.make_node("Cast", [x], [name], name=name,
                                                       to=TensorProto.FLOAT))
            else:
                wide = self.unique(f"{x}/as_int16")
                plus = self.unique(f"{x}/plus128")
                name = self.unique(f"{x}/as_uint8")
                c128 = self.unique(f"{x}/c128")
                self.new_inits.append(helper.from_array(np.array(128, np.int16), c128))
                self.new_nodes.extend([
                    helper.make_node("Cast", [x], [wide], name=wide, to=TensorProto.INT16),
                    helper.make_node("Add", [wide, c128], [plus], name=plus),
                    helper.make_node("Cast", [plus], [name], name=name,
                                     to=TensorProto.UINT8)])
            self.converted[key] = name
        return self.converted[key]

    def only_user(self, tensor: str, op: str, domain: str = "") -> NodeProto | None:
        users = self.consumers.get(tensor, [])
        if tensor in self.outputs or len(users) != 1:
            return None
        user = users[0]
        return user if user.op_type == op and user.domain == domain else None

    def run(self) -> None:
        graph = self.graph
        for node in graph.node:
            if id(node) in self.skip:
                continue
            w = self.inits.get(node.input[1]) if len(node.input) == 2 else None
            if node.op_type == "MaxPool" and node.domain in ("", "ai.onnx") \
                    and node.input[0] in self.float_eq and len(node.output) == 1:
                self.max_pool(node)
            elif node.op_type not in ("ConvInteger", "MatMulInteger") \
                    or node.domain not in ("", "ai.onnx") \
                    or w is None or w.data_type != TensorProto.INT8:
                self.new_nodes.append(node)
            else:
                self.integer_product(node, w)
        del graph.node[:]
        graph.node.extend(self.new_nodes)
        graph.initializer.extend(self.new_inits)
        _drop_dead_nodes(graph)
        used = {i for node in graph.node for i in node.input}
        used.update(o.name for o in graph.output)
        keep = [t for t in graph.initializer if t.name in used]
        del graph.initializer[:]
        graph.initializer.extend(keep)

    def max_pool(self, node: NodeProto) -> None:
        # max of integers held exactly in float32 is exact
        fout = self.unique(f"{node.output[0]}/float")
        fpool = helper.make_node("MaxPool", [self.float_eq[node.input[0]]], [fout], name=fout)
        fpool.attribute.extend(node.attribute)
        self.new_nodes.append(fpool)
        self.new_nodes.append(helper.make_node("Cast", [fout], [node.output[0]],
                                               name=node.name, to=TensorProto.INT8))
        self.float_eq[node.output[0]] = fout

    def integer_product(self, node: NodeProto, w: TensorProto) -> None:
        """ConvInteger / MatMulInteger: a fused float layer, a float product, or a
        uint8 product, whichever is exact for the weights' accumulator bound."""
        weights = helper.to_array(w).astype(np.int64)
        if node.op_type == "ConvInteger":
            per_output = np.abs(weights).reshape(weights.shape[0], -1).sum(axis=1)
        else:  # (K, N): one output column per N
            per_output = np.abs(weights).sum(axis=0)
        bound = int(per_output.max(initial=0)) * _SAMPLE_MAX
        # reserved first, whichever kernel is chosen: the names given later depend on it
        acc = self.unique(f"{node.name or node.output[0]}/acc")
        fused = _match_output_stage(node, self.only_user, self.inits)
        if fused is not None:
            bias = fused[0]
            fbound = bound + (int(np.abs(bias).max(initial=0)) if bias is not None else 0)
            if fbound < FLOAT_EXACT_LIMIT:
                x = self.convert_input(node.input[0], "float")
                layer = _fused_float_layer(node, x, weights, fused, self.names,
                                           self.new_inits)
                self.new_nodes.extend(layer)
                self.float_eq[layer[-1].output[0]] = layer[-1].input[0]
                self.skip.update(id(n) for n in fused[1])
                return
        if bound < FLOAT_EXACT_LIMIT:
            self.float_product(node, w, weights, acc)
        else:
            self.uint8_product(node, w, weights)

    def float_product(self, node: NodeProto, w: TensorProto, weights: np.ndarray,
                      acc: str) -> None:
        x = self.convert_input(node.input[0], "float")
        wname = self.unique(f"{w.name}/float")
        self.new_inits.append(helper.from_array(weights.astype(np.float32), wname))
        op = "Conv" if node.op_type == "ConvInteger" else "MatMul"
        fnode = helper.make_node(op, [x, wname], [acc], name=acc)
        fnode.attribute.extend(node.attribute)
        self.new_nodes.append(fnode)
        self.new_nodes.append(helper.make_node("Cast", [acc], [node.output[0]],
                                               name=node.name, to=TensorProto.INT32))

    def uint8_product(self, node: NodeProto, w: TensorProto, weights: np.ndarray) -> None:
        x = self.convert_input(node.input[0], "uint8")
        wname = self.unique(f"{w.name}/uint8")
        zp = self.unique(f"{w.name}/zero128")
        self.new_inits.append(helper.from_array((weights + 128).astype(np.uint8), wname))
        self.new_inits.append(helper.from_array(np.array(128, np.uint8), zp))
        qnode = helper.make_node(node.op_type, [x, wname, zp, zp], node.output,
                                 name=node.name)
        qnode.attribute.extend(node.attribute)
        self.new_nodes.append(qnode)
