"""The source operators --cpu-fallback lowers to CPU operators beyond convolution, dense,
pooling and activations: ReduceMean/ReduceMax (global pooling, with and without the
reduced axes), BatchNormalization that follows no convolution, Add/Sub/Mul/Div with a
per-channel constant (an input normalization), the product of two tensors.

For each, one float node: its CPU operators (partition.quantize_cpu) on the calibration
samples, run by the numpy reference, agree with onnxruntime on the source node within
two output codes (8-bit output plus the requantization's rounding), and the reference,
onnxruntime on the operators' integer ONNX and the host-compiled C agree bit for bit.
Then whole models with such a layer convert with --cpu-fallback and pass verify.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx2ai8x.cpu import onnx as cpu_onnx
from onnx2ai8x.cpu import ops as K
from onnx2ai8x.cpu import reference
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.partition.quantize_cpu import calibrated_scales, segment_ops
from tests.float_onnx.helpers import cli

RNG = np.random.default_rng(34)
C = 4


def _const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _model(node, inits, in_shape, extra_inputs=(), opset: int = 13) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *in_shape])]
    inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, *s])
               for n, s in extra_inputs]
    graph = helper.make_graph([node], "t", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(model)


def _vec(values) -> np.ndarray:
    return np.asarray(values, np.float32).reshape(1, C, 1, 1)


CASES = {
    "reduce_mean_keep": lambda: _model(helper.make_node(
        "ReduceMean", ["x"], ["y"], name="n", axes=[2, 3], keepdims=1), [], (C, 6, 5)),
    "reduce_mean_drop_1d": lambda: _model(helper.make_node(
        "ReduceMean", ["x", "ax"], ["y"], name="n", keepdims=0),
        [numpy_helper.from_array(np.array([-1], np.int64), "ax")], (C, 9), opset=18),
    "reduce_max_drop": lambda: _model(helper.make_node(
        "ReduceMax", ["x"], ["y"], name="n", axes=[2, 3], keepdims=0), [], (C, 4, 4)),
    "reduce_max_rows": lambda: _model(helper.make_node(
        "ReduceMax", ["x"], ["y"], name="n", axes=[3], keepdims=1), [], (C, 4, 6)),
    "global_max": lambda: _model(helper.make_node("GlobalMaxPool", ["x"], ["y"], name="n"),
                                 [], (C, 5, 5)),
    "batchnorm": lambda: _model(helper.make_node(
        "BatchNormalization", ["x", "g", "b", "m", "v"], ["y"], name="n", epsilon=1e-3),
        [_const("g", [1.5, -0.5, 0.25, 2.0]), _const("b", [0.1, -0.2, 0.3, 0.0]),
         _const("m", [0.2, 0.5, -0.1, 0.0]), _const("v", [0.5, 2.0, 1.0, 0.1])], (C, 5, 5)),
    "sub_mean": lambda: _model(helper.make_node("Sub", ["x", "c"], ["y"], name="n"),
                               [_const("c", _vec([0.485, 0.456, 0.406, 0.5]))], (C, 5, 5)),
    "const_minus_x": lambda: _model(helper.make_node("Sub", ["c", "x"], ["y"], name="n"),
                                    [_const("c", 0.25)], (C, 7)),
    "div_std": lambda: _model(helper.make_node("Div", ["x", "c"], ["y"], name="n"),
                              [_const("c", _vec([0.229, 0.224, 0.225, 0.3]))], (C, 5, 5)),
    "mul_scalar": lambda: _model(helper.make_node("Mul", ["c", "x"], ["y"], name="n"),
                                 [_const("c", -1.75)], (C, 5, 5)),
    "add_bias": lambda: _model(helper.make_node("Add", ["x", "c"], ["y"], name="n"),
                               [_const("c", _vec([0.5, -1.0, 0.0, 2.0]))], (C, 3, 3)),
    "mul_gate": lambda: _model(helper.make_node("Mul", ["x", "g"], ["y"], name="n"), [],
                               (C, 5, 5), extra_inputs=[("g", (C, 1, 1))]),
}


def _samples(model: onnx.ModelProto, n: int) -> dict[str, np.ndarray]:
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = RNG.uniform(-1.5, 1.5, (n, *shape[1:])).astype(np.float32)
    return feeds


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowered_operator_matches_the_source_node(name: str) -> None:
    model = CASES[name]()
    feeds = _samples(model, 16)
    nodes = list(model.graph.node)
    extra = {k: v for k, v in feeds.items() if k != "x"}
    sess = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    fixed = {k: float(np.abs(v).max()) / 127 for k, v in extra.items()}
    if extra:  # (the calibration runs a model of one input: the output's range given)
        fixed["y"] = max(float(np.abs(sess.run(None, {k: v[i:i + 1] for k, v in
                                                  feeds.items()})[0]).max())
                         for i in range(16)) / 127
    scales = calibrated_scales(model, nodes, feeds["x"], fixed)
    ops = segment_ops(model, tuple(n.name for n in nodes), scales)
    assert ops and all(isinstance(op, K.CpuOp) for op in ops)
    q = {k: np.clip(np.floor(v / scales[k] + 0.5), -128, 127).astype(np.int8)
         for k, v in feeds.items()}
    # the source node on the values the int8 inputs stand for
    y_scale = scales["y"]
    seg = K.segment("s", ops, ("y",))
    want_int = []
    for i in range(16):
        src = sess.run(None, {k: (q[k][i:i + 1] * scales[k]).astype(np.float32)
                              for k in q})[0][0]
        got = reference.run_segment(ops, {k: q[k][i] for k in q})["y"]
        assert got.shape == src.shape, (got.shape, src.shape)
        assert np.abs(got * y_scale - src).max() <= 2 * y_scale, name
        want_int.append(got)
    # reference == onnxruntime on the integer ONNX == C on the host
    batch = {k: q[k] for k in seg.inputs}
    got_onnx = cpu_onnx.run(seg, batch)["y"]
    assert np.array_equal(np.stack(want_int), got_onnx)
    if shutil.which("gcc"):
        from onnx2ai8x.cpu import host

        got_c = host.run_segments([(seg, batch)])[0]["y"]
        assert np.array_equal(np.stack(want_int), got_c)


def test_reduction_over_channels_is_refused() -> None:
    model = _model(helper.make_node("ReduceMax", ["x"], ["y"], name="n", axes=[1],
                                    keepdims=1), [], (C, 4, 4))
    scales = calibrated_scales(model, list(model.graph.node), _samples(model, 4)["x"], {})
    with pytest.raises(Ai8xError) as info:
        segment_ops(model, ("n",), scales)
    d = info.value.diagnostics[0]
    assert d.code == "partition.cpu-op" and "axes [1]" in d.message and d.hint


def test_constant_that_is_not_per_channel_is_refused() -> None:
    model = _model(helper.make_node("Mul", ["x", "c"], ["y"], name="n"),
                   [_const("c", RNG.uniform(1, 2, (1, C, 5, 5)))], (C, 5, 5))
    scales = calibrated_scales(model, list(model.graph.node), _samples(model, 4)["x"], {})
    with pytest.raises(Ai8xError) as info:
        segment_ops(model, ("n",), scales)
    assert "per channel" in info.value.diagnostics[0].message


def _w(name: str, *shape: int):
    return numpy_helper.from_array(RNG.uniform(-0.3, 0.3, shape).astype(np.float32), name)


def _conv(x: str, y: str, name: str, cin: int, cout: int):
    node = helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [y], name=name,
                            kernel_shape=[3, 3], pads=[1] * 4)
    return node, [_w(f"{name}.w", cout, cin, 3, 3), _w(f"{name}.b", cout)]


def _convert(nodes, inits, tmp: Path, name: str) -> tuple[int, str, str]:
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
        inits)
    path = tmp / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    cal = tmp / f"{name}_cal.npy"
    np.save(cal, RNG.uniform(0, 1, (8, 3, 8, 8)).astype(np.float32))
    code, out, err = cli([path, "--device", "MAX78000", "--calibration", cal, "-o",
                          tmp / name, "--cpu-fallback"])
    if code != 0:
        return code, out, err
    rc, vout, verr = cli(["verify", tmp / name])
    assert rc == 0 and vout.startswith("PASS"), vout + verr
    return code, out, err


def test_unfoldable_batchnorm_and_a_global_max_head_convert_with_cpu_fallback(
        tmp_path: Path) -> None:
    c0, i0 = _conv("x", "a", "conv0", 3, 8)
    relu = helper.make_node("Relu", ["a"], ["r"], name="relu0")
    bn = helper.make_node("BatchNormalization", ["r", "g", "b", "m", "v"], ["n"], name="bn")
    gmax = helper.make_node("ReduceMax", ["n"], ["y"], name="gmax", axes=[2, 3], keepdims=0)
    stats = [_const(k, RNG.uniform(0.5, 1.5, 8)) for k in ("g", "v")] + \
        [_const(k, RNG.uniform(-0.2, 0.2, 8)) for k in ("b", "m")]
    code, out, err = _convert([c0, relu, bn, gmax], i0 + stats, tmp_path, "bnhead")
    assert code == 0, err
    assert "CPU head:" in out


def test_input_normalization_stem_converts_with_cpu_fallback(tmp_path: Path) -> None:
    sub = helper.make_node("Sub", ["x", "mean"], ["d"], name="sub_mean")
    div = helper.make_node("Div", ["d", "std"], ["n"], name="div_std")
    c0, i0 = _conv("n", "a", "conv0", 3, 8)
    relu = helper.make_node("Relu", ["a"], ["y"], name="relu0")
    consts = [_const("mean", np.array([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1)),
              _const("std", np.array([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1))]
    code, out, err = _convert([sub, div, c0, relu], i0 + consts, tmp_path, "norm")
    assert code == 0, err


def test_a_constant_node_in_a_segment_runs_nothing() -> None:
    """A Constant node among a segment's nodes (onnxruntime's QOperator export writes
    Resize's scales this way) is a value, not an operator."""
    k = helper.make_node("Constant", [], ["c"], name="k",
                         value=numpy_helper.from_array(_vec([1.0, 2.0, 0.5, -1.0]), "v"))
    mul = helper.make_node("Mul", ["x", "c"], ["y"], name="n")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 4, 4])]
    graph = helper.make_graph([k, mul], "t", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = onnx.shape_inference.infer_shapes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    scales = calibrated_scales(model, [mul], _samples(model, 4)["x"], {})
    ops = segment_ops(model, ("k", "n"), scales)
    assert [op.name for op in ops] == ["n"]
