"""The whole split model as one ONNX file (issue 28): the CPU segments as standard
integer ONNX (onnx2ai8x.cpu.onnx), the accelerator's part as its ai8x-ONNX, joined at
the tensors the split cut. It stays the bit-exact contract: onnxruntime with the ai8x
kernels (custom_ops.session) computes the project's known answer from it.
"""
from __future__ import annotations

PREFIX = "accelerator/"


def _renamed(middle):
    """The accelerator part's graph with every tensor name prefixed (the CPU segments
    keep the float model's names; the two must not collide)."""
    import onnx

    g = onnx.GraphProto()
    g.CopyFrom(middle.graph)

    def name(t: str) -> str:
        return PREFIX + t if t else t

    for n in g.node:
        n.input[:] = [name(t) for t in n.input]
        n.output[:] = [name(t) for t in n.output]
        n.name = name(n.name)
    for coll in (g.initializer, g.input, g.output, g.value_info):
        for item in coll:
            item.name = name(item.name)
    return g


def full_model(part, name: str):
    """onnx.ModelProto of stem, accelerator part and head in order."""
    import onnx
    from onnx import TensorProto, helper

    from ..cpu.onnx import nodes as cpu_nodes

    middle = onnx.load_from_string(part.quant.model.SerializeToString())
    g = _renamed(middle)
    acc_in, acc_out = g.input[0], g.output[0]
    nodes, inits = [], list(g.initializer)
    graph_in, graph_out = acc_in, acc_out
    if part.stem is not None:
        for op in part.stem.ops:
            n, i = cpu_nodes(op)
            nodes += n
            inits += i
        first = part.stem.ops[0]
        graph_in = helper.make_tensor_value_info(part.stem.inputs[0], TensorProto.INT8,
                                                 ["N", *first.in_shapes[0]])
        nodes.append(helper.make_node("Identity", [part.stem.outputs[0]], [acc_in.name],
                                      name="stem_to_accelerator"))
    nodes += list(g.node)
    if part.head is not None:
        first, last = part.head.ops[0], part.head.ops[-1]
        shape = helper.make_tensor("head_input_shape", TensorProto.INT64, [1 + len(
            first.in_shapes[0])], [-1, *first.in_shapes[0]])
        inits.append(shape)
        nodes.append(helper.make_node("Reshape", [acc_out.name, "head_input_shape"],
                                      [part.head.inputs[0]], name="accelerator_to_head"))
        for op in part.head.ops:
            n, i = cpu_nodes(op)
            nodes += n
            inits += i
        graph_out = helper.make_tensor_value_info(
            part.head.outputs[0],
            TensorProto.INT64 if last.out_dtype == "int64" else TensorProto.INT8,
            ["N", *last.out_shape])
    graph = helper.make_graph(nodes, name, [graph_in], [graph_out], inits,
                              doc_string="the model split by onnx2ai8x --cpu-fallback: CPU "
                              "stem, accelerator part (ai8x domain), CPU head")
    model = helper.make_model(graph, opset_imports=list(middle.opset_import),
                              ir_version=middle.ir_version,
                              producer_name="onnx2ai8x --cpu-fallback")
    model.functions.extend(middle.functions)
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
