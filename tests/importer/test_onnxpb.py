"""onnx2ai8x.onnxpb (the convert path's ONNX messages) against the onnx package.

onnx.helper and onnx.numpy_helper are the independent reference: the helpers build the
messages they build, fields the toolchain does not use survive unchanged, and hostile
bytes (deep nesting, a repeated singular field, dims that do not match the data) end in
an exception the callers map to a user message, in bounded time.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx2ai8x import onnxpb
from tests.conftest import GOLDEN, golden_params
from tests.fuzz.cases import _deep_onnx  # a hand-written, deeply nested model


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


def test_copy_is_independent():
    graph = onnxpb.make_graph([onnxpb.make_node("Identity", ["x"], ["y"], name="i")], "g",
                              [], [])
    dup = onnxpb.copy(graph)
    dup.node.append(onnxpb.make_node("Abs", ["y"], ["z"], name="a"))
    dup.name = "h"
    assert [n.name for n in graph.node] == ["i"] and graph.name == "g"
    assert [n.name for n in dup.node] == ["i", "a"]


def test_classes_are_onnx_classes():
    # one set of generated classes: messages pass to onnx without conversion
    assert onnxpb.ModelProto is onnx.ModelProto
    assert onnxpb.Dimension is onnx.TensorShapeProto.Dimension
    model = onnx.ModelProto()
    assert onnxpb.from_onnx(model) is model and onnxpb.to_onnx(model) is model


def test_convert_path_does_not_import_onnx_package():
    import subprocess
    import sys

    code = ("import sys, onnx2ai8x.onnxpb as p; assert 'onnx' not in sys.modules; "
            "import onnx; assert onnx.ModelProto is p.ModelProto; "
            "assert onnx.helper.make_node('Abs', ['x'], ['y']).op_type == 'Abs'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_deep_nesting_is_a_decode_error_not_a_crash():
    data = _deep_onnx(3000)
    with pytest.raises(onnxpb.DecodeError):
        onnxpb.ModelProto.FromString(data)
    # shallow nesting of the same shape decodes
    assert onnxpb.ModelProto.FromString(_deep_onnx(5)).graph.node[0].attribute[0].g


def test_repeated_singular_field_decodes_in_linear_time():
    import time

    one = onnx.ModelProto(graph=onnx.GraphProto(
        name="g", node=[onnx.NodeProto(op_type="Abs", input=["x"], output=["y"])]))
    piece = one.SerializeToString()
    data = piece * 20_000  # the graph field 20,000 times: protobuf merges them
    start = time.perf_counter()
    model = onnxpb.ModelProto.FromString(data)
    assert time.perf_counter() - start < 5
    assert len(model.graph.node) == 20_000


@pytest.mark.parametrize("tensor, message", [
    (onnx.TensorProto(name="t", data_type=TensorProto.INT8, dims=[2, 3],
                      raw_data=b"\x01\x02"), "need 6 bytes"),
    (onnx.TensorProto(name="t", data_type=TensorProto.INT64, dims=[4], int64_data=[1]),
     "need 4 values"),
    (onnx.TensorProto(name="t", data_type=TensorProto.INT8, dims=[-1], raw_data=b""),
     "negative dimension"),
    (onnx.TensorProto(name="t", data_type=TensorProto.INT8, dims=[1 << 40, 1 << 20]),
     "declares"),
    (onnx.TensorProto(name="t", data_type=0, dims=[1], raw_data=b"\x00"),
     "unsupported tensor data type 0"),
    (onnx.TensorProto(name="t", data_type=TensorProto.INT8, dims=[1], int32_data=[999]),
     "outside the range"),
])
def test_to_array_refuses_inconsistent_tensors(tensor, message):
    with pytest.raises(ValueError, match=message):
        onnxpb.to_array(tensor)


def test_get_attribute_value_of_type_zero_names_it():
    with pytest.raises(ValueError, match="'k' has unsupported type 0"):
        onnxpb.get_attribute_value(onnx.AttributeProto(name="k", i=3))


def test_the_installed_onnx_is_within_the_tested_bound():
    """onnxpb depends on onnx's file layout (onnx/onnx_ml_pb2.py): pyproject.toml bounds
    onnx to the versions these tests ran on, and the installed one is inside the bound
    and has the file where onnxpb looks for it."""
    import importlib.util
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    low, high = re.search(r'"onnx>=([\d.]+),<([\d.]+)"', text).groups()

    def version(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v)[:3])

    assert version(low) <= version(onnx.__version__) < version(high)
    origin = Path(importlib.util.find_spec("onnx").origin).parent
    assert (origin / "onnx_ml_pb2.py").is_file()
