"""The integer ops mean what the float ONNX ops they replace mean (up to rounding)."""
from __future__ import annotations

import numpy as np
import pytest

from onnx2ai8x.cpu import ops as K
from onnx2ai8x.cpu import reference


def _float_average_pool(x: np.ndarray, include_pad: int, **attrs) -> np.ndarray:
    import onnxruntime as ort
    from onnx import TensorProto, helper

    node = helper.make_node("AveragePool", ["x"], ["y"], count_include_pad=include_pad,
                            **attrs)
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x.astype(np.float32)})[0]


@pytest.mark.parametrize("include_pad", [0, 1])
def test_avgpool_matches_onnx_average_pool(include_pad):
    rng = np.random.default_rng(include_pad)
    x = rng.integers(-128, 128, (3, 9, 8)).astype(np.int8)
    kernel, pads, strides = (3, 4), (1, 2, 2, 1), (2, 1)
    count = int(np.prod(kernel))
    m, s = (K.avgpool_requant(count) if include_pad else K.avgpool_requant_per_count(count))
    op = K.avgpool("p", "x", "y", x.shape, kernel, m, s, pads=pads, strides=strides)
    ours = reference.run(op, x).astype(np.int64)
    want = _float_average_pool(x[None], include_pad, kernel_shape=list(kernel),
                               pads=list(pads), strides=list(strides))[0]
    assert ours.shape == want.shape
    # M / 2**s is 1 / count to 31 bits: every average that is not a tie rounds as the
    # float one does; a tie (x.5) may go either way (at most half a step off).
    tie = np.abs(want - np.floor(want) - 0.5) < 1e-4
    assert np.array_equal(ours[~tie], np.floor(want[~tie] + 0.5))
    assert np.all(np.abs(ours[tie] - want[tie]) <= 0.5 + 1e-4)
    assert (~tie).sum() > 0.8 * want.size


@pytest.mark.parametrize("scale", [0.01, 0.1, 0.5])
def test_softmax_matches_the_float_softmax(scale):
    rng = np.random.default_rng(3)
    op = K.softmax("s", "x", "y", (4, 10), scale, axis=1)
    for _ in range(20):
        x = rng.integers(-128, 128, (4, 10)).astype(np.int8)
        xi = x.astype(np.int64)
        z = np.exp((xi - xi.max(axis=1, keepdims=True)) * scale)
        p = z / z.sum(axis=1, keepdims=True)
        got = reference.run(op, x) / 128.0
        # the output step is 1/128 and 1.0 saturates to 127/128; the table's entries
        # are rounded to 2**-16
        saturated = (p > 127.5 / 128) / 128
        assert np.all(np.abs(got - p) <= 0.5 / 128 + 1e-3 + saturated)


@pytest.mark.parametrize("name", sorted(K.ACTIVATIONS))
def test_lut_tables_follow_the_float_function(name):
    fn, sx, sy = K.ACTIVATIONS[name], 0.05, 0.03
    table = K.lut_table(fn, sx, sy).astype(np.int64)
    want = fn(np.arange(-128, 128) * sx) / sy
    inside = (want > -128.5) & (want < 127.5)
    assert np.all(np.abs(table[inside] - want[inside]) <= 0.5 + 1e-9)
    assert np.all(table[want >= 127.5] == 127) and np.all(table[want <= -128.5] == -128)
