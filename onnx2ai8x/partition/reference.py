"""The whole split model as one ONNX file (issue 28): the CPU segments as standard
integer ONNX (onnx2ai8x.cpu.onnx), the accelerator's part as its ai8x-ONNX, joined at
the tensors the split cut. It stays the bit-exact contract: onnxruntime with the ai8x
kernels (custom_ops.session) computes the project's known answer from it.
"""
from __future__ import annotations

PREFIX = "accelerator"


def _renamed(middle, prefix: str):
    """An accelerator part's graph with every tensor name prefixed (the CPU segments
    keep the float model's names; the parts and the segments must not collide)."""
    import onnx

    g = onnx.GraphProto()
    g.CopyFrom(middle.graph)

    def name(t: str) -> str:
        return prefix + t if t else t

    for n in g.node:
        n.input[:] = [name(t) for t in n.input]
        n.output[:] = [name(t) for t in n.output]
        n.name = name(n.name)
    for coll in (g.initializer, g.input, g.output, g.value_info):
        for item in coll:
            item.name = name(item.name)
    return g


def _reshape(src: str, dst: str, shape, inits: list):
    from onnx import TensorProto, helper

    const = f"{dst}/shape"
    inits.append(helper.make_tensor(const, TensorProto.INT64, [1 + len(shape)],
                                    [-1, *shape]))
    return helper.make_node("Reshape", [src, const], [dst], name=f"{dst}/reshape")


def full_model(part, name: str):
    """onnx.ModelProto of stem, accelerator parts with the CPU segments between them,
    and head, in order."""
    import onnx
    from onnx import TensorProto, helper

    from ..cpu.onnx import nodes as cpu_nodes

    nodes, inits, functions = [], [], {}
    opsets = {}

    def add_segment(seg) -> None:
        for op in seg.ops:
            n, i = cpu_nodes(op)
            nodes.extend(n)
            inits.extend(i)

    graph_in = None
    if part.stem is not None:
        add_segment(part.stem)
        graph_in = helper.make_tensor_value_info(part.stem.inputs[0], TensorProto.INT8,
                                                 ["N", *part.stem.ops[0].in_shapes[0]])
    feed = None if part.stem is None else part.stem.outputs[0]
    parts = part.quant.parts
    for k, q in enumerate(parts):
        middle = onnx.load_from_string(q.model.SerializeToString())
        g = _renamed(middle, f"{PREFIX}{k}/")
        for f in middle.functions:
            functions.setdefault((f.domain, f.name), f)
        for o in middle.opset_import:
            opsets[o.domain] = max(opsets.get(o.domain, 0), o.version)
        if feed is None:
            graph_in = g.input[0]
        elif k == 0:
            nodes.append(helper.make_node("Identity", [feed], [g.input[0].name],
                                          name=f"{PREFIX}{k}/feed"))
        else:
            # a CPU segment's result (channels-first) in the part's input shape
            # (build.next_input)
            nodes.append(_reshape(feed, g.input[0].name, q.mapping.shape, inits))
        nodes.extend(g.node)
        inits.extend(g.initializer)
        feed = g.output[0].name
        if k < len(part.between):
            seg = part.between[k]
            nodes.append(_reshape(feed, seg.inputs[0], seg.ops[0].in_shapes[0], inits))
            add_segment(seg)
            feed = seg.outputs[0]
    graph_out = g.output[0]
    if part.head is not None:
        first, last = part.head.ops[0], part.head.ops[-1]
        nodes.append(_reshape(feed, part.head.inputs[0], first.in_shapes[0], inits))
        add_segment(part.head)
        graph_out = helper.make_tensor_value_info(
            part.head.outputs[0],
            TensorProto.INT64 if last.out_dtype == "int64" else TensorProto.INT8,
            ["N", *last.out_shape])
    graph = helper.make_graph(nodes, name, [graph_in], [graph_out], inits,
                              doc_string="the model split by onnx2ai8x --cpu-fallback: CPU "
                              "stem, accelerator parts (ai8x domain) with CPU segments "
                              "between them, CPU head")
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(opsets.items())],
        ir_version=middle.ir_version, producer_name="onnx2ai8x --cpu-fallback")
    model.functions.extend(functions.values())
    meta = model.metadata_props.add()
    meta.key, meta.value = "ai8x.cpu_fallback.input_scale", repr(float(part.input_scale))
    return model


def run_full(model, sample):
    """The full model's output on one sample (int8, the first segment's input)."""
    import numpy as np

    import custom_ops

    session = custom_ops.session(model)
    name = session.get_inputs()[0].name
    return np.asarray(session.run(None, {name: np.asarray(sample, np.int8)[np.newaxis]})[0])[0]


__all__ = ["full_model", "run_full"]
