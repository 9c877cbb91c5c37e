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
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT_EXACT_LIMIT = 2 ** 24
_SAMPLE_MAX = 128  # |int8| <= 128


def _unique(names: set[str], base: str) -> str:
    name, k = base, 0
    while name in names:
        k += 1
        name = f"{base}_{k}"
    names.add(name)
    return name


def optimize(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with exact, faster kernels for its integer convolutions."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    names = {n for node in graph.node for n in (*node.input, *node.output, node.name)}
    names.update(inits)
    converted: dict[tuple[str, str], str] = {}  # (tensor, kind) -> converted tensor
    new_nodes: list[onnx.NodeProto] = []
    new_inits: list[onnx.TensorProto] = []

    def convert_input(x: str, kind: str) -> str:
        key = (x, kind)
        if key not in converted:
            if kind == "float":
                name = _unique(names, f"{x}/as_float")
                new_nodes.append(helper.make_node("Cast", [x], [name], name=name,
                                                  to=TensorProto.FLOAT))
            else:
                wide = _unique(names, f"{x}/as_int16")
                plus = _unique(names, f"{x}/plus128")
                name = _unique(names, f"{x}/as_uint8")
                c128 = _unique(names, f"{x}/c128")
                new_inits.append(numpy_helper.from_array(np.array(128, np.int16), c128))
                new_nodes.extend([
                    helper.make_node("Cast", [x], [wide], name=wide, to=TensorProto.INT16),
                    helper.make_node("Add", [wide, c128], [plus], name=plus),
                    helper.make_node("Cast", [plus], [name], name=name, to=TensorProto.UINT8)])
            converted[key] = name
        return converted[key]

    for node in graph.node:
        w = inits.get(node.input[1]) if len(node.input) == 2 else None
        if node.op_type not in ("ConvInteger", "MatMulInteger") \
                or node.domain not in ("", "ai.onnx") \
                or w is None or w.data_type != TensorProto.INT8:
            new_nodes.append(node)
            continue
        weights = numpy_helper.to_array(w).astype(np.int64)
        if node.op_type == "ConvInteger":
            per_output = np.abs(weights).reshape(weights.shape[0], -1).sum(axis=1)
        else:  # (K, N): one output column per N
            per_output = np.abs(weights).sum(axis=0)
        bound = int(per_output.max(initial=0)) * _SAMPLE_MAX
        acc = _unique(names, f"{node.name or node.output[0]}/acc")
        if bound < FLOAT_EXACT_LIMIT:
            x = convert_input(node.input[0], "float")
            wname = _unique(names, f"{w.name}/float")
            new_inits.append(numpy_helper.from_array(weights.astype(np.float32), wname))
            op = "Conv" if node.op_type == "ConvInteger" else "MatMul"
            fnode = helper.make_node(op, [x, wname], [acc], name=acc)
            fnode.attribute.extend(node.attribute)
            new_nodes.append(fnode)
            new_nodes.append(helper.make_node("Cast", [acc], [node.output[0]], name=node.name,
                                              to=TensorProto.INT32))
        else:
            x = convert_input(node.input[0], "uint8")
            wname = _unique(names, f"{w.name}/uint8")
            zp = _unique(names, f"{w.name}/zero128")
            new_inits.append(numpy_helper.from_array((weights + 128).astype(np.uint8), wname))
            new_inits.append(numpy_helper.from_array(np.array(128, np.uint8), zp))
            qnode = helper.make_node(node.op_type, [x, wname, zp, zp], node.output,
                                     name=node.name)
            qnode.attribute.extend(node.attribute)
            new_nodes.append(qnode)
    del graph.node[:]
    graph.node.extend(new_nodes)
    graph.initializer.extend(new_inits)
    used = {i for node in graph.node for i in node.input}
    used.update(o.name for o in graph.output)
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    # Nodes must stay in topological order: conversions were emitted before their users.
    return out
