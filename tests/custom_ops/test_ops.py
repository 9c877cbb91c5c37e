"""Each ai8x op, run by onnxruntime through its model-local function, against its rule.

Expected values come from exact rational arithmetic (fractions.Fraction) written here,
not from the code under test.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import custom_ops
from custom_ops import numpy_ref


def _model(node: onnx.NodeProto, in_type: int, out_type: int, n: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node], "op", [helper.make_tensor_value_info("x", in_type, [n])],
        [helper.make_tensor_value_info("y", out_type, [n])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19),
                                                    helper.make_opsetid("ai8x", 1)])
    custom_ops.add_functions(model)
    model.ir_version = 9
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return custom_ops.session(model).run(None, {"x": x})[0]


def _shift_rule(v: int, shift: int) -> int:
    """floor(0.5 + v * 2**shift / 128), saturated to int32 (vendor simulate.py)."""
    exact = math.floor(Fraction(1, 2) + Fraction(v) * Fraction(2) ** shift / 128)
    return min(max(exact, -2 ** 31), 2 ** 31 - 1)


EDGE_ACC = [0, 1, -1, 63, 64, 65, -63, -64, -65, 127, 128, -128, -129, 191, 192, -192,
            -193, 2 ** 31 - 1, -2 ** 31, 12345678, -12345678, 1 << 20, -(1 << 20) - 1]


@pytest.mark.parametrize("shift", [-15, -8, -3, -1, 0, 1, 2, 3, 7, 8, 10, 15, 22])
def test_output_shift_int32(shift):
    rng = np.random.default_rng(shift + 100)
    x = np.concatenate([np.array(EDGE_ACC, dtype=np.int64),
                        rng.integers(-2 ** 31, 2 ** 31, 500),
                        rng.integers(-5000, 5000, 500)]).astype(np.int32)
    node = helper.make_node("OutputShift", ["x"], ["y"], domain="ai8x", shift=shift,
                            weight_bits=8)
    got = _run(_model(node, TensorProto.INT32, TensorProto.INT32, x.size), x)
    want = np.array([_shift_rule(int(v), shift) for v in x], dtype=np.int64)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.astype(np.int64), want)
    np.testing.assert_array_equal(numpy_ref.output_shift(x, shift).astype(np.int64), want)


def test_output_shift_int64_products():
    x = np.array([127 ** 4, -(127 ** 4), 16129, -16384, 0, 5], dtype=np.int64)
    node = helper.make_node("OutputShift", ["x"], ["y"], domain="ai8x", shift=-2)
    got = _run(_model(node, TensorProto.INT64, TensorProto.INT64, x.size), x)
    np.testing.assert_array_equal(got, [_shift_rule(int(v), -2) for v in x])


@pytest.mark.parametrize(("lo", "hi", "to", "np_type"), [
    (-128, 127, TensorProto.INT8, np.int8), (0, 127, TensorProto.INT8, np.int8),
    (0, 127, TensorProto.INT32, np.int32), (-5, 1000, TensorProto.INT32, np.int32)])
def test_clamp(lo, hi, to, np_type):
    rng = np.random.default_rng(hi)
    x = np.concatenate([[lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 2 ** 31 - 1, -2 ** 31],
                        rng.integers(-2 ** 31, 2 ** 31, 300),
                        rng.integers(-300, 300, 300)]).astype(np.int32)
    node = helper.make_node("Clamp", ["x"], ["y"], domain="ai8x", min=lo, max=hi, to=to)
    got = _run(_model(node, TensorProto.INT32, to, x.size), x)
    want = [min(max(int(v), lo), hi) for v in x]
    assert got.dtype == np_type
    np.testing.assert_array_equal(got.astype(np.int64), want)
    np.testing.assert_array_equal(numpy_ref.clamp(x, lo, hi, np_type).astype(np.int64), want)


def _round_rule(total: int, count: int, rounding: str) -> int:
    mean = Fraction(total, count)
    if rounding == "truncate":  # toward zero (the vendor's integer np.mean)
        val = math.floor(mean) if mean >= 0 else math.ceil(mean)
    else:  # half away from zero
        val = math.floor(mean + Fraction(1, 2)) if mean >= 0 else math.ceil(mean - Fraction(1, 2))
    return min(max(val, -128), 127)


@pytest.mark.parametrize("count", [2, 3, 4, 6, 9, 16, 25, 49, 256])
@pytest.mark.parametrize("rounding", ["truncate", "nearest"])
def test_pool_round(count, rounding):
    rng = np.random.default_rng(count)
    totals = np.concatenate([
        np.arange(-3 * count, 3 * count + 1),  # every remainder, both signs
        [128 * count, -128 * count, 127 * count, -127 * count + 1, 127 * count + count // 2],
        rng.integers(-128 * count, 128 * count, 300)])
    # The float mean AveragePool produces for these window sums.
    mean = (totals.astype(np.float32) / np.float32(count)).astype(np.float32)
    node = helper.make_node("PoolRound", ["x"], ["y"], domain="ai8x", count=count,
                            rounding=rounding)
    got = _run(_model(node, TensorProto.FLOAT, TensorProto.INT8, mean.size), mean)
    want = [_round_rule(int(t), count, rounding) for t in totals]
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got.astype(np.int64), want)
    np.testing.assert_array_equal(numpy_ref.pool_round(mean, count, rounding).astype(np.int64),
                                  want)


def test_schemas_registered():
    for name in ("OutputShift", "Clamp", "PoolRound"):
        schema = onnx.defs.get_schema(name, 1, "ai8x")
        assert schema.doc
        assert schema.attributes


def test_shape_inference_through_schema():
    node = helper.make_node("Clamp", ["x"], ["y"], domain="ai8x", min=0, max=127,
                            to=TensorProto.INT32)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.INT32,
                                                                           ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19),
                                                    helper.make_opsetid("ai8x", 1)])
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    out = inferred.graph.output[0].type.tensor_type
    assert out.elem_type == TensorProto.INT32
    assert [d.dim_param or d.dim_value for d in out.shape.dim] == ["N", 4]


def test_session_adds_missing_functions(tmp_path):
    node = helper.make_node("Clamp", ["x"], ["y"], domain="ai8x", min=-1, max=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.INT32,
                                                                           [3])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19),
                                                    helper.make_opsetid("ai8x", 1)])
    assert not model.functions
    path = tmp_path / "bare.onnx"
    path.write_bytes(model.SerializeToString())
    got = custom_ops.session(path).run(None, {"x": np.array([-9, 0, 9], np.int32)})[0]
    np.testing.assert_array_equal(got, [-1, 0, 1])


def test_session_missing_file_is_user_error(tmp_path):
    from onnx2ai8x.errors import Ai8xError
    with pytest.raises(Ai8xError) as err:
        custom_ops.session(tmp_path / "nope.onnx")
    assert err.value.code == "usage.missing-file"
