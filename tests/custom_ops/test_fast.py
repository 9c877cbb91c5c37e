"""The session's speed rewrites choose an exact kernel and never change a result."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

import custom_ops
from custom_ops.builder import build_model
from custom_ops.fast import FLOAT_EXACT_LIMIT, optimize
from onnx2ai8x.network import ACT_ABS, OP_CONV2D, Layer, Network


def _net(weight: int, cin: int, bias: int, act=None, width=8) -> Network:
    lay = Layer(name="c", operator=OP_CONV2D, input_channels=cin, output_channels=2,
                input_dim=(3, 3), pooled_dim=(3, 3), output_dim=(3, 3), kernel_size=(3, 3),
                padding=(1, 1), output_shift=-4, activation=act, output_width=width,
                weights=np.full((2, cin, 3, 3), weight), bias=np.array([bias, -bias]))
    return Network((lay,), (cin, 3, 3))


def _plain_session(model: onnx.ModelProto):
    """onnxruntime on the model as stored (no rewrites): the slow exact int8 path."""
    model = custom_ops.add_functions(model)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _ops(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in optimize(custom_ops.add_functions(model)).graph.node}


def test_float_path_only_below_the_exact_limit():
    # sum(|w|) * 128 per output: 1024 weights of -128 -> 2**24 (not < 2**24: integer path)
    assert FLOAT_EXACT_LIMIT == 2 ** 24
    at_limit = build_model(_net(-128, 1024 // 9 + 1, 0))
    assert "ConvInteger" in _ops(at_limit) and "Conv" not in _ops(at_limit)
    small = build_model(_net(-128, 100, 0))  # 100 * 9 * 128 * 128 < 2**24
    assert "Conv" in _ops(small) and "ConvInteger" not in _ops(small)
    assert "OutputShift" not in _ops(small)  # the output stage is fused into float ops
    # the bias counts toward the fused bound: the conv stays float, the rest integer
    near = 2 ** 24 - 100 * 9 * 128 * 128
    ops = _ops(build_model(_net(-128, 100, near)))
    assert "Conv" in ops and "OutputShift" in ops


def test_rewrites_equal_the_stored_model():
    rng = np.random.default_rng(0)
    for weight, cin, bias, act, width in [(-128, 100, 5000, None, 8), (-128, 100, 0, ACT_ABS, 8),
                                          (127, 120, -3000, None, 8), (-128, 1024, 77, None, 8),
                                          (-128, 100, 9, None, 32)]:
        model = build_model(_net(weight, cin, bias, act, width))
        x = rng.integers(-128, 128, size=(4, cin, 3, 3)).astype(np.int8)
        x[0] = -128
        x[1] = 127
        fast = custom_ops.session(model).run(None, {"input": x})[0]
        plain = _plain_session(model).run(None, {"input": x})[0]
        np.testing.assert_array_equal(fast, plain)
