"""onnx2ai8x.onnxpb (the convert path's ONNX reader/writer) against the onnx package.

The onnx package's protobuf classes are the independent reference: decoding and
re-encoding gives their deterministic bytes, the helpers build the messages
onnx.helper builds, and fields this module does not model survive unchanged.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx2ai8x import onnxpb
from tests.conftest import GOLDEN, golden_params


def _onnx_bytes(message) -> bytes:
    return message.SerializeToString(deterministic=True)


@pytest.mark.parametrize("case", golden_params())
def test_golden_models_round_trip_byte_for_byte(case):
    pytest.importorskip("torch")
    from custom_ops.builder import build_model, build_proto
    from tests.golden.case_network import case_network

    net = case_network(GOLDEN / case)
    reference = _onnx_bytes(build_model(net))
    ours = build_proto(net).SerializeToString()
    assert ours == reference  # the builder writes the same model without onnx
    decoded = onnxpb.ModelProto.FromString(reference)
    assert decoded.SerializeToString() == reference
    model = onnx.ModelProto.FromString(reference)
    for t_ours, t_ref in zip(decoded.graph.initializer, model.graph.initializer, strict=True):
        a, b = onnxpb.to_array(t_ours), numpy_helper.to_array(t_ref)
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def test_helpers_build_what_onnx_helper_builds():
    pairs = [
        (onnxpb.make_node("Conv", ["x", "w"], ["y"], name="c", domain="", pads=[1, 1, -1, 0],
                          group=2, alpha=0.25, mode="edge", skip=None),
         helper.make_node("Conv", ["x", "w"], ["y"], name="c", domain="", pads=[1, 1, -1, 0],
                          group=2, alpha=0.25, mode="edge", skip=None)),
        (onnxpb.make_tensor("t", TensorProto.INT64, [2], [-5, 1 << 40]),
         helper.make_tensor("t", TensorProto.INT64, [2], [-5, 1 << 40])),
        (onnxpb.make_tensor("d", TensorProto.DOUBLE, [], [0.5]),
         helper.make_tensor("d", TensorProto.DOUBLE, [], [0.5])),
        (onnxpb.make_tensor("s", TensorProto.STRING, [], [b"nearest"]),
         helper.make_tensor("s", TensorProto.STRING, [], [b"nearest"])),
        (onnxpb.make_tensor_value_info("v", TensorProto.INT8, ["N", 3, 0, 7]),
         helper.make_tensor_value_info("v", TensorProto.INT8, ["N", 3, 0, 7])),
        (onnxpb.make_tensor_value_info("r", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, [])),
        (onnxpb.from_array(np.arange(-6, 6, dtype=np.int8).reshape(3, 4), "a"),
         numpy_helper.from_array(np.arange(-6, 6, dtype=np.int8).reshape(3, 4), "a")),
        (onnxpb.make_attribute("fs", [1.5, 2]), helper.make_attribute("fs", [1.5, 2])),
    ]
    for ours, ref in pairs:
        assert ours.SerializeToString() == _onnx_bytes(ref), ref


def test_functions_are_the_onnx_built_functions():
    import custom_ops

    for func in custom_ops.functions():
        ref = onnx.FunctionProto.FromString(func.SerializeToString())
        onnx.checker.check_function(ref)  # a valid FunctionProto for onnx itself
        assert _onnx_bytes(ref) == func.SerializeToString()


def test_unknown_fields_survive_and_lazy_reads_write_nothing():
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"], name="i")], "g",
        [helper.make_tensor_value_info("x", TensorProto.INT8, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, ["N", 2])]),
        opset_imports=[helper.make_opsetid("", 19)])
    model.training_info.add().algorithm.name = "kept"  # a field onnxpb does not model
    model.graph.sparse_initializer.add().dims.extend([4])
    model.graph.node[0].device_configurations.add().configuration_id = "cfg"
    data = _onnx_bytes(model)
    ours = onnxpb.ModelProto.FromString(data)
    # reading absent fields (protobuf creates them on access) must not add them
    assert not ours.graph.node[0].HasField("doc_string")
    _ = ours.graph.value_info, ours.graph.node[0].attribute, ours.graph.input[0].type.denotation
    assert ours.graph.output[0].type.tensor_type.shape.dim[1].dim_value == 2
    assert not ours.graph.initializer
    assert ours.SerializeToString() == data
    copy = onnxpb.ModelProto()
    copy.CopyFrom(ours)
    copy.graph.node[0].metadata_props.add(key="k", value="v")
    back = onnx.ModelProto.FromString(copy.SerializeToString())
    assert back.training_info[0].algorithm.name == "kept"
    assert back.graph.node[0].device_configurations[0].configuration_id == "cfg"
    assert back.graph.node[0].metadata_props[0].key == "k"
    assert ours.SerializeToString() == data  # the copy is independent


def test_unpacked_and_packed_repeated_fields_both_decode():
    t = onnx.TensorProto(name="t", data_type=TensorProto.FLOAT, dims=[3])
    t.float_data.extend([1.0, -2.5, 3.0])  # packed on the wire
    a = onnx.AttributeProto(name="a", type=onnx.AttributeProto.INTS)
    a.ints.extend([-1, 0, 1 << 35])  # unpacked (proto2 default)
    got_t = onnxpb.TensorProto.FromString(_onnx_bytes(t))
    got_a = onnxpb.AttributeProto.FromString(_onnx_bytes(a))
    assert list(got_t.float_data) == [1.0, -2.5, 3.0]
    assert np.array_equal(onnxpb.to_array(got_t), np.array([1.0, -2.5, 3.0], np.float32))
    assert onnxpb.get_attribute_value(got_a) == [-1, 0, 1 << 35]
    assert got_t.SerializeToString() == _onnx_bytes(t)
    assert got_a.SerializeToString() == _onnx_bytes(a)


@pytest.mark.parametrize("data", [b"\x0a\x05ab", b"\x08", b"\x3a\x02\xff\xff",
                                  b"\x0f\x00", b"\x00\x01"])
def test_malformed_bytes_raise_decode_error(data):
    with pytest.raises(onnxpb.DecodeError):
        onnxpb.ModelProto.FromString(data)


def test_shallow_copy_owns_its_lists():
    graph = onnxpb.make_graph([onnxpb.make_node("Identity", ["x"], ["y"], name="i")], "g",
                              [], [])
    copy = onnxpb.shallow_copy(graph)
    copy.node.append(onnxpb.make_node("Abs", ["y"], ["z"], name="a"))
    copy.name = "h"
    assert [n.name for n in graph.node] == ["i"] and graph.name == "g"
    assert copy.node[0] is graph.node[0]  # items are shared, as documented
