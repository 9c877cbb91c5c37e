"""Rank changes and data movement in forms other exporters write, built by hand (issue 34,
items 1, 2 and 5): each is rewritten exactly (the canonical model gives the source's
outputs on random inputs) and converts and verifies, or is refused naming the node, its
own operator and the axis it moves. The forms made by the real tools are in
test_exporters.py."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.importer.dialects.axes import pairing
from onnx2ai8x.importer.dialects.movement import upsampling
from onnx2ai8x.importer.float_onnx import read_float_model
from tests.float_onnx.helpers import cli, float_run

RNG = np.random.default_rng(34)


def _c(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _w(name: str, *shape: int) -> onnx.TensorProto:
    return _c(name, (RNG.standard_normal(shape) * 0.3).astype(np.float32))


def _model(nodes, inits, in_shape, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "form", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                      [1, *in_shape])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _conv1d_head() -> tuple[list, list]:
    """(1, 4, 16) -> Conv1d 3 (8) -> Relu: 1-D data, channels first."""
    return ([helper.make_node("Conv", ["x", "K", "kb"], ["c"], name="conv",
                              kernel_shape=[3], pads=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu")],
            [_w("K", 8, 4, 3), _w("kb", 8)])


def _form(name: str) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    nodes, inits = _conv1d_head()
    shape = (4, 16)
    if name == "reshape_lift":  # a 1-D pooling lifted by Reshape, dropped by Reshape
        nodes += [helper.make_node("Reshape", ["r", "s4"], ["u"], name="lift"),
                  helper.make_node("MaxPool", ["u"], ["p"], name="pool",
                                   kernel_shape=[1, 2], strides=[1, 2]),
                  helper.make_node("Reshape", ["p", "s3"], ["q"], name="drop"),
                  helper.make_node("Flatten", ["q"], ["f"], name="flat"),
                  helper.make_node("Gemm", ["f", "W"], ["y"], name="fc", transB=1)]
        inits += [_c("s4", np.array([1, 8, 1, 16], np.int64)),
                  _c("s3", np.array([1, 8, 8], np.int64)), _w("W", 5, 64)]
    elif name == "width_one":  # the 1-D data as a column (H = L, W = 1), a 3x1 conv
        nodes += [helper.make_node("Unsqueeze", ["r", "a3"], ["u"], name="lift"),
                  helper.make_node("Conv", ["u", "K2"], ["c2"], name="conv2",
                                   kernel_shape=[3, 1], pads=[1, 0, 1, 0]),
                  helper.make_node("Squeeze", ["c2", "a3"], ["s"], name="drop"),
                  helper.make_node("Relu", ["s"], ["r2"], name="relu2"),
                  helper.make_node("ReduceMean", ["r2"], ["m"], name="mean", axes=[2],
                                   keepdims=0),
                  helper.make_node("MatMul", ["m", "W"], ["y"], name="fc")]
        inits += [_c("a3", np.array([3], np.int64)), _w("K2", 8, 8, 3, 1), _w("W", 8, 5)]
    elif name == "size1_transpose":  # a Transpose that moves only a size-1 axis
        nodes += [helper.make_node("Unsqueeze", ["r", "a3"], ["u"], name="lift"),
                  helper.make_node("Transpose", ["u"], ["t"], name="swap",
                                   perm=[0, 1, 3, 2]),
                  helper.make_node("AveragePool", ["t"], ["p"], name="pool",
                                   kernel_shape=[1, 2], strides=[1, 2]),
                  helper.make_node("Squeeze", ["p", "a2"], ["q"], name="drop"),
                  helper.make_node("Flatten", ["q"], ["f"], name="flat"),
                  helper.make_node("Gemm", ["f", "W"], ["y"], name="fc", transB=1)]
        inits += [_c("a3", np.array([3], np.int64)), _c("a2", np.array([2], np.int64)),
                  _w("W", 5, 64)]
    elif name == "bn_and_bias_lifted":  # BatchNormalization and a bias Add on a lifted tensor
        nodes += [helper.make_node("Unsqueeze", ["r", "a2"], ["u"], name="lift"),
                  helper.make_node("Conv", ["u", "K2"], ["c2"], name="conv2",
                                   kernel_shape=[1, 3], pads=[0, 1, 0, 1]),
                  helper.make_node("BatchNormalization", ["c2", "g", "b", "m", "v"],
                                   ["bn"], name="bn"),
                  helper.make_node("Add", ["bn", "bias"], ["ba"], name="bias"),
                  helper.make_node("Squeeze", ["ba", "a2"], ["s"], name="drop"),
                  helper.make_node("Relu", ["s"], ["r2"], name="relu2"),
                  helper.make_node("GlobalMaxPool", ["r2"], ["gm"], name="gmax"),
                  helper.make_node("Flatten", ["gm"], ["f"], name="flat"),
                  helper.make_node("Gemm", ["f", "W"], ["y"], name="fc", transB=1)]
        inits += [_c("a2", np.array([2], np.int64)), _w("K2", 8, 8, 1, 3),
                  _c("g", np.abs(RNG.standard_normal(8)).astype(np.float32) + 0.5),
                  _w("b", 8), _w("m", 8),
                  _c("v", np.abs(RNG.standard_normal(8)).astype(np.float32) + 0.5),
                  _c("bias", (RNG.standard_normal((1, 8, 1, 1)) * 0.1).astype(np.float32)),
                  _w("W", 5, 8)]
    elif name == "channels_last_mean":  # TFLite's Conv1D output, then a Keras mean
        nodes += [helper.make_node("Unsqueeze", ["r", "a2"], ["u"], name="lift"),
                  helper.make_node("Transpose", ["u"], ["t"], name="to_last",
                                   perm=[0, 2, 3, 1]),
                  helper.make_node("Squeeze", ["t", "a1"], ["q"], name="drop"),
                  helper.make_node("ReduceMean", ["q"], ["m"], name="mean", axes=[1],
                                   keepdims=0),
                  helper.make_node("MatMul", ["m", "W"], ["y"], name="fc")]
        inits += [_c("a2", np.array([2], np.int64)), _c("a1", np.array([1], np.int64)),
                  _w("W", 8, 5)]
    else:
        raise ValueError(name)
    return _model(nodes, inits, shape), shape


FORMS = ("reshape_lift", "width_one", "size1_transpose", "bn_and_bias_lifted",
         "channels_last_mean")


@pytest.mark.parametrize("name", FORMS)
def test_relabels_fold_exactly_and_convert(name, tmp_path):
    model, shape = _form(name)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    fm = read_float_model(path, "MAX78000")
    assert {"axes", "channels-last"} & set(fm.canonical.dialects), fm.rewrites
    x = RNG.random((6, *shape)).astype(np.float32)
    sess = ort.InferenceSession(fm.model_bytes, providers=["CPUExecutionProvider"])
    got = sess.run(None, {fm.input_name: x})[0]
    np.testing.assert_allclose(got, float_run(path, x), rtol=1e-4, atol=1e-5)
    np.save(tmp_path / "cal.npy", RNG.random((32, *shape)).astype(np.float32))
    code, _, err = cli([path, "--device", "MAX78000", "--calibration", tmp_path / "cal.npy",
                        "-o", tmp_path / "p", "--verify"])
    assert code == 0, err


def test_pairing_keeps_order_and_refuses_a_real_move():
    r = pairing((1, 8, 16), (1, 8, 1, 16))
    assert r is not None and r.axis == (0, 1, None, 2)
    assert pairing((1, 8, 16), (1, 16, 8)) is None
    assert pairing((1, 8, 1, 1), (1, 8)).axis == (0, 1)


def test_upsampling_map_needs_whole_factors_and_nearest():
    idx = np.arange(2 * 3 * 3).reshape(1, 2, 3, 3)
    up = idx.repeat(2, axis=2).repeat(2, axis=3)
    assert upsampling((1, 2, 3, 3), up) == (2, 2)
    assert upsampling((1, 2, 3, 3), up[:, ::-1]) is None  # channels swapped: a move
    assert upsampling((1, 2, 3, 3), idx.repeat(2, axis=2)) == (2, 1)


def _refusal(model, tmp_path, shape) -> str:
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    np.save(tmp_path / "cal.npy", RNG.random((4, *shape)).astype(np.float32))
    code, _, err = cli([path, "--device", "MAX78000", "--calibration", tmp_path / "cal.npy",
                        "-o", tmp_path / "p"])
    assert code == 1 and "Traceback" not in err
    assert not (tmp_path / "p").exists()
    return err


def test_a_rank_change_that_moves_channels_names_the_node_operator_and_axis(tmp_path):
    """Unsqueeze(1) makes the 8 channels a spatial axis: a real data movement."""
    nodes, inits = _conv1d_head()
    nodes += [helper.make_node("Unsqueeze", ["r", "a1"], ["u"], name="node_unsqueeze"),
              helper.make_node("Conv", ["u", "K2"], ["y"], name="conv2",
                               kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    inits += [_c("a1", np.array([1], np.int64)), _w("K2", 4, 1, 3, 3)]
    err = _refusal(_model(nodes, inits, (4, 16)), tmp_path, (4, 16))
    assert "node node_unsqueeze (Unsqueeze): Unsqueeze (1, 8, 16) -> (1, 1, 8, 16)" in err
    assert "moves the 8 channels (axis 1) to axis 2" in err, err
    assert "Squeeze of" not in err


def test_a_window_longer_than_its_data_is_refused_without_negative_sizes(tmp_path):
    """The form of a third-party export of a 1-D network (input declared (128, C, 1):
    its batch and length swapped): the first window that does not fit is named, no
    negative count reaches the dense layer."""
    nodes = [helper.make_node("Conv", ["x", "K"], ["c"], name="conv1", kernel_shape=[1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "K2"], ["c2"], name="conv2", kernel_shape=[3],
                              pads=[0, 0]),
             helper.make_node("Reshape", ["c2", "s"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "W"], ["y"], name="fc", transB=1)]
    inits = [_w("K", 8, 16, 1), _w("K2", 8, 8, 3), _c("s", np.array([1, -1], np.int64)),
             _w("W", 5, 64)]
    model = _model(nodes, inits, (16, 1))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 128
    err = _refusal(model, tmp_path, (16, 1))
    assert "error[model.input-shape] node conv2 (Conv)" in err, err
    assert "(-" not in err and "-2" not in err and "--cpu-fallback" not in err
    assert "declares (16, 1) per sample" in err


def test_reshape_zero_copies_the_dimension(tmp_path):
    """Reshape (0, -1) without allowzero: 0 keeps the batch, -1 takes the rest."""
    nodes, inits = _conv1d_head()
    nodes += [helper.make_node("Reshape", ["r", "s"], ["f"], name="flat"),
              helper.make_node("Gemm", ["f", "W"], ["y"], name="fc", transB=1)]
    inits += [_c("s", np.array([0, -1], np.int64)), _w("W", 5, 128)]
    path = tmp_path / "m.onnx"
    onnx.save(_model(nodes, inits, (4, 16)), str(path))
    fm = read_float_model(path, "MAX78000")
    assert fm.network.layers[-1].flatten


def test_a_resize_other_than_nearest_2x_is_refused_with_its_mode(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "K"], ["c"], name="conv", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["c", "", "sc"], ["y"], name="up", mode="linear")]
    inits = [_w("K", 4, 3, 3, 3), _c("sc", np.array([1, 1, 2, 2], np.float32))]
    err = _refusal(_model(nodes, inits, (3, 8, 8)), tmp_path, (3, 8, 8))
    assert "error[float.upsample] node up (Resize): linear" in err, err


def test_upsampling_is_exact_on_the_accelerator(tmp_path):
    """Nearest 2x upsampling as the ConvTranspose2d [0,1,1]x[0,1,1]: the converted
    model's integers are the input's integers repeated (no rounding anywhere)."""
    nodes = [helper.make_node("Conv", ["x", "K"], ["c"], name="conv", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Resize", ["r", "", "sc"], ["u"], name="up", mode="nearest"),
             # a ReLU (of non-negative data) keeps the output 8-bit (not the wide output)
             helper.make_node("Relu", ["u"], ["y"], name="up_relu")]
    inits = [_w("K", 4, 3, 3, 3), _c("sc", np.array([1, 1, 2, 2], np.float32))]
    path = tmp_path / "m.onnx"
    onnx.save(_model(nodes, inits, (3, 6, 6)), str(path))
    np.save(tmp_path / "cal.npy", RNG.random((16, 3, 6, 6)).astype(np.float32))
    code, _, err = cli([path, "--device", "MAX78000", "--calibration", tmp_path / "cal.npy",
                        "-o", tmp_path / "p", "--verify"])
    assert code == 0, err
    import custom_ops

    q = onnx.load(str(tmp_path / "p" / "m.onnx"))
    names = [o.name for o in q.graph.output]
    inner = [n.output[0] for n in q.graph.node if n.name == "conv/clamp"]
    assert inner, [n.name for n in q.graph.node]
    q.graph.output.append(helper.make_tensor_value_info(inner[0], TensorProto.INT8, None))
    sess = custom_ops.session(q)
    xq = RNG.integers(-128, 128, (3, 3, 6, 6), dtype=np.int8)
    y, c = sess.run([names[0], inner[0]], {sess.get_inputs()[0].name: xq})
    np.testing.assert_array_equal(y, c.repeat(2, axis=2).repeat(2, axis=3))


def test_read_errors_are_ai8x_errors():
    with pytest.raises(Ai8xError):
        read_float_model(_model([helper.make_node("Unsqueeze", ["x", "a"], ["y"],
                                                  name="u")],
                                [_c("a", np.array([1], np.int64))], (4, 16)), "MAX78000")


@pytest.mark.parametrize("auto", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_auto_pad_is_taken_on_known_sizes(auto, tmp_path):
    """A 1-D convolution with auto_pad (TFLite's form through tf2onnx): explicit pads
    from the known length (SAME pads 0 and 1 here, the odd one after for SAME_UPPER),
    the same values as onnxruntime's."""
    nodes = [helper.make_node("Conv", ["x", "K"], ["c"], name="conv", kernel_shape=[4],
                              auto_pad=auto),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "W"], ["y"], name="fc", transB=1)]
    n_out = 16 if auto != "VALID" else 13
    inits = [_w("K", 8, 4, 4), _w("W", 5, 8 * n_out)]
    path = tmp_path / "m.onnx"
    onnx.save(_model(nodes, inits, (4, 16)), str(path))
    fm = read_float_model(path, "MAX78000")
    x = RNG.random((4, 4, 16)).astype(np.float32)
    sess = ort.InferenceSession(fm.model_bytes, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {fm.input_name: x})[0], float_run(path, x),
                               rtol=1e-4, atol=1e-5)
    conv = fm.network.layers[0]
    assert conv.padding[0] == (0 if auto == "VALID" else 2)  # widened to 5 taps, pad 2
    np.save(tmp_path / "cal.npy", RNG.random((32, 4, 16)).astype(np.float32))
    code, _, err = cli([path, "--device", "MAX78000", "--calibration", tmp_path / "cal.npy",
                        "-o", tmp_path / "p", "--verify"])
    assert code == 0, err


def test_an_outputs_layout_change_is_the_hosts(tmp_path):
    """Conv1d -> Unsqueeze -> Transpose to channels-last -> Reshape, the graph output (a
    channels-last exporter's 1-D output): the accelerator's result is the convolution's,
    channels-first, and the report names that tensor."""
    nodes, inits = _conv1d_head()
    nodes += [helper.make_node("Unsqueeze", ["r", "a2"], ["u"], name="lift"),
              helper.make_node("Transpose", ["u"], ["t"], name="to_last", perm=[0, 2, 3, 1]),
              helper.make_node("Identity", ["t"], ["i"], name="copy"),
              helper.make_node("Reshape", ["i", "s"], ["y"], name="drop")]
    inits += [_c("a2", np.array([2], np.int64)), _c("s", np.array([1, 16, 8], np.int64))]
    path = tmp_path / "m.onnx"
    onnx.save(_model(nodes, inits, (4, 16)), str(path))
    fm = read_float_model(path, "MAX78000")
    assert len(fm.network.layers) == 1 and fm.output_tensors == ("r",), fm.output_tensors
    assert any("left to the host" in r for r in fm.rewrites)


def test_1d_upsampling_is_exact_on_the_accelerator(tmp_path):
    """Nearest 2x upsampling of 1-D data: read as (C, L, 1), upsampled in both axes,
    one of the two equal columns kept by a 1x2 max pooling: the integers are the
    input's repeated."""
    nodes, inits = _conv1d_head()
    nodes += [helper.make_node("Resize", ["r", "", "sc"], ["u"], name="up", mode="nearest"),
              helper.make_node("Relu", ["u"], ["y"], name="up_relu")]
    inits += [_c("sc", np.array([1, 1, 2], np.float32))]
    path = tmp_path / "m.onnx"
    onnx.save(_model(nodes, inits, (4, 16)), str(path))
    np.save(tmp_path / "cal.npy", RNG.random((16, 4, 16)).astype(np.float32))
    code, _, err = cli([path, "--device", "MAX78000", "--calibration", tmp_path / "cal.npy",
                        "-o", tmp_path / "p", "--verify"])
    assert code == 0, err
    import custom_ops

    q = onnx.load(str(tmp_path / "p" / "m.onnx"))
    out = q.graph.output[0].name
    inner = next(n.output[0] for n in q.graph.node if n.name == "conv/clamp")
    q.graph.output.append(helper.make_tensor_value_info(inner, TensorProto.INT8, None))
    sess = custom_ops.session(q)
    xq = RNG.integers(-128, 128, (3, 4, 16), dtype=np.int8)
    y, c = sess.run([out, inner], {sess.get_inputs()[0].name: xq})
    np.testing.assert_array_equal(y.reshape(3, 8, 32), c.reshape(3, 8, 16).repeat(2, axis=2))
