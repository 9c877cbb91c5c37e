"""importer/shapes.py (the reader's own shape inference) against onnx's shape inference.

onnx's inference is the independent reference: every tensor of every golden network
(built by custom_ops.builder) gets the same per-sample shape and element type, and small
hand-written graphs cover the op forms the golden corpus does not use.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx2ai8x import onnxpb
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.importer.shapes import infer_shapes
from tests.conftest import GOLDEN, golden_params


def _onnx_shapes(model: onnx.ModelProto) -> dict[str, tuple[tuple[int, ...], int]]:
    import custom_ops

    custom_ops.onnx_support()
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    out = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        out[vi.name] = (tuple(dims[1:]), t.elem_type)
    return out


def _own_shapes(model: onnx.ModelProto) -> dict[str, tuple[tuple[int, ...], int]] | None:
    pb = onnxpb.from_onnx(model)
    consts = {t.name: onnxpb.to_array(t) for t in pb.graph.initializer}
    got = infer_shapes(pb.graph, consts)
    if got is None:
        return None
    return {name: (shape[1:], dtype) for name, (shape, dtype) in got.items()
            if name not in consts}


def _assert_same(model: onnx.ModelProto) -> int:
    want = _onnx_shapes(model)
    got = _own_shapes(model)
    assert got is not None, "the graph should be inferred without onnx"
    assert set(got) >= set(want)
    for name, value in want.items():
        assert got[name] == value, name
    return len(want)


@pytest.mark.parametrize("case", golden_params())
def test_golden_networks_match_onnx_inference(case):
    pytest.importorskip("torch")  # the golden checkpoints are read with torch
    from custom_ops.builder import build_model
    from tests.golden.case_network import case_network

    net = case_network(GOLDEN / case)
    assert _assert_same(build_model(net)) > len(net.layers)


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def _vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def _i64(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


@pytest.mark.parametrize("nodes,inits,shape", [
    # Split into equal and unequal parts, by input and by num_outputs (Split-18)
    ([helper.make_node("Split", ["x", "s"], ["a", "b"], axis=1)],
     [_i64("s", [3, 5])], ["N", 8, 4, 4]),
    ([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)],
     [], ["N", 7, 4, 4]),
    # Slice with negative starts, steps and clamped ends
    ([helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
     [_i64("st", [-1, 0]), _i64("en", [-100, 99]), _i64("ax", [2, 3]), _i64("sp", [-2, 3])],
     ["N", 3, 9, 10]),
    # Flatten at a negative axis, Reshape with 0 and -1
    ([helper.make_node("Flatten", ["x"], ["y"], axis=-1)], [], ["N", 3, 4, 5]),
    ([helper.make_node("Reshape", ["x", "t"], ["y"])], [_i64("t", [0, -1, 2])],
     ["N", 3, 4, 6]),
    # Pad and pooling with dilation, stride and asymmetric pads
    ([helper.make_node("Pad", ["x", "p"], ["y"])], [_i64("p", [0, 0, 1, 2, 0, 1, 3, 0])],
     ["N", 2, 5, 5]),
    ([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 3],
                       dilations=[2, 1], pads=[1, 0, 2, 1])], [], ["N", 2, 11, 13]),
    ([helper.make_node("Concat", ["x", "x"], ["y"], axis=-3)], [], ["N", 2, 5, 5]),
    ([helper.make_node("Add", ["x", "c"], ["y"])],
     [numpy_helper.from_array(np.ones((2, 1, 5), np.int8), "c")], ["N", 2, 4, 5]),
])
def test_op_forms_match_onnx_inference(nodes, inits, shape):
    outs = [o for n in nodes for o in n.output]
    model = _model(nodes, [_vi("x", TensorProto.INT8, shape)],
                   [_vi(o, TensorProto.INT8, None) for o in outs], inits)
    assert _assert_same(model) >= 2


def test_conv_integer_with_group_stride_and_pads():
    w = numpy_helper.from_array(np.ones((6, 2, 3, 3), np.int8), "w")
    node = helper.make_node("ConvInteger", ["x", "w"], ["y"], group=2, strides=[2, 1],
                            pads=[1, 0, 0, 2], dilations=[1, 2])
    model = _model([node], [_vi("x", TensorProto.INT8, ["N", 4, 9, 8])],
                   [_vi("y", TensorProto.INT32, None)], [w])
    assert _assert_same(model) == 2


def test_unknown_op_or_attribute_form_falls_back_to_onnx():
    for node in (helper.make_node("Relu", ["x"], ["y"]),
                 helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2],
                                  ceil_mode=1),
                 helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2],
                                  auto_pad="SAME_UPPER")):
        model = _model([node], [_vi("x", TensorProto.INT8, ["N", 2, 5, 5])],
                       [_vi("y", TensorProto.INT8, None)])
        assert _own_shapes(model) is None


def test_contradicting_shapes_name_the_node():
    node = helper.make_node("Concat", ["x", "z"], ["y"], axis=1, name="join")
    model = _model([node], [_vi("x", TensorProto.INT8, ["N", 2, 5, 5]),
                            _vi("z", TensorProto.INT8, ["N", 2, 4, 5])],
                   [_vi("y", TensorProto.INT8, None)])
    with pytest.raises(Ai8xError) as info:
        _own_shapes(model)
    assert info.value.code == "model.shapes"
    assert "join" in info.value.render()
