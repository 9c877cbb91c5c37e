"""Channels-last forms other tf2onnx versions and settings write, built by hand: each is
rewritten exactly (the canonical model gives the source's outputs on random inputs) and
converts. The fixtures made by the real tool are in test_keras.py."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx2ai8x.importer.float_onnx import read_float_model
from tests.float_onnx.helpers import cli, float_run

RNG = np.random.default_rng(24)


def _c(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _w(name: str, *shape: int) -> onnx.TensorProto:
    return _c(name, (RNG.standard_normal(shape) * 0.3).astype(np.float32))


def _head(first: str = "x") -> tuple[list, list]:
    """NHWC input (1, 8, 8, 3) -> Transpose -> Conv 3x3 (8) -> Relu -> Transpose back."""
    nodes = [helper.make_node("Transpose", [first], ["xt"], name="in_t", perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["xt", "K", "kb"], ["c"], name="conv",
                              kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Transpose", ["r"], ["rt"], name="out_t", perm=[0, 2, 3, 1])]
    return nodes, [_w("K", 8, 3, 3, 3), _w("kb", 8)]


def _form(name: str) -> onnx.ModelProto:
    nodes, inits = _head()
    if name == "reducemean":  # GlobalAveragePooling2D as Mean over (1, 2)
        nodes += [helper.make_node("ReduceMean", ["rt"], ["m"], name="gap", axes=[1, 2],
                                   keepdims=0),
                  helper.make_node("MatMul", ["m", "W"], ["y"], name="dense")]
        inits += [_w("W", 8, 10)]
    elif name == "reducemean_keepdims":
        nodes += [helper.make_node("ReduceMean", ["rt"], ["m"], name="gap", axes=[1, 2],
                                   keepdims=1),
                  helper.make_node("Flatten", ["m"], ["f"], name="flat", axis=1),
                  helper.make_node("MatMul", ["f", "W"], ["y"], name="dense")]
        inits += [_w("W", 8, 10)]
    elif name == "matmul_4d":  # Dense on a 4-D tensor as one MatMul (no Tensordot)
        nodes += [helper.make_node("MatMul", ["rt", "D"], ["d"], name="dense4d"),
                  helper.make_node("Add", ["d", "db"], ["da"], name="dense4d_bias"),
                  helper.make_node("Relu", ["da"], ["dr"], name="dense4d_relu"),
                  helper.make_node("Flatten", ["dr"], ["f"], name="flat", axis=1),
                  helper.make_node("Gemm", ["f", "W", "b"], ["y"], name="dense", transB=1)]
        inits += [_w("D", 8, 6), _w("db", 6), _w("W", 10, 384), _w("b", 10)]
    elif name == "concat_last":  # Concatenate(axis=-1) of two channels-last tensors
        nodes += [helper.make_node("Conv", ["xt", "K2"], ["c2"], name="conv2",
                                   kernel_shape=[1, 1]),
                  helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
                  helper.make_node("Transpose", ["r2"], ["rt2"], name="out_t2",
                                   perm=[0, 2, 3, 1]),
                  helper.make_node("Concat", ["rt", "rt2"], ["cc"], name="cat", axis=3),
                  helper.make_node("Reshape", ["cc", "shape"], ["f"], name="flat"),
                  helper.make_node("MatMul", ["f", "W"], ["y"], name="dense")]
        inits += [_w("K2", 8, 3, 1, 1), _c("shape", np.array([-1, 1024], np.int64)),
                  _w("W", 1024, 10)]
    elif name == "input_offset":  # Rescaling(1/255, offset=-0.5) before the Transpose
        nodes, inits = _head("xs")
        nodes = [helper.make_node("Mul", ["x", "k"], ["xm"], name="rescale/mul"),
                 helper.make_node("Add", ["xm", "o"], ["xs"], name="rescale/add")] + nodes
        nodes += [helper.make_node("Reshape", ["rt", "shape"], ["f"], name="flat"),
                  helper.make_node("MatMul", ["f", "W"], ["y"], name="dense")]
        inits += [_c("k", np.float32(1 / 255)), _c("o", np.float32(-0.5)),
                  _c("shape", np.array([-1, 512], np.int64)), _w("W", 512, 10)]
    elif name in SHAPES:
        return _other_input(name)
    else:
        raise AssertionError(name)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["unk__0", 8, 8, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__0", 10])
    model = helper.make_model(helper.make_graph(nodes, "tf", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="tf2onnx")
    onnx.checker.check_model(model, full_check=True)
    return model


def _other_input(name: str) -> onnx.ModelProto:
    if name == "nchw_normalization":
        # --inputs-as-nchw: Transpose to NHWC, Normalization per channel, Transpose back
        nodes = [helper.make_node("Transpose", ["x"], ["xl"], name="nchw_t", perm=[0, 2, 3, 1]),
                 helper.make_node("Sub", ["xl", "mean"], ["xs"], name="norm/sub"),
                 helper.make_node("Div", ["xs", "std"], ["xn"], name="norm/div"),
                 helper.make_node("Transpose", ["xn"], ["xt"], name="conv_t", perm=[0, 3, 1, 2]),
                 helper.make_node("Conv", ["xt", "K", "kb"], ["c"], name="conv",
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c"], ["r"], name="relu"),
                 helper.make_node("Flatten", ["r"], ["f"], name="flat", axis=1),
                 helper.make_node("MatMul", ["f", "W"], ["y"], name="dense")]
        inits = [_c("mean", np.float32([0.2, 0.5, 0.7])), _c("std", np.float32([0.3, 0.2, 2.0])),
                 _w("K", 8, 3, 3, 3), _w("kb", 8), _w("W", 512, 10)]
    else:  # an MLP on 64 features with a Normalization per feature
        nodes = [helper.make_node("Sub", ["x", "mean"], ["xs"], name="norm/sub"),
                 helper.make_node("Div", ["xs", "std"], ["xn"], name="norm/div"),
                 helper.make_node("MatMul", ["xn", "W1"], ["h"], name="dense1"),
                 helper.make_node("Add", ["h", "b1"], ["hb"], name="dense1/bias"),
                 helper.make_node("Relu", ["hb"], ["hr"], name="dense1/relu"),
                 helper.make_node("MatMul", ["hr", "W"], ["y"], name="dense")]
        inits = [_c("mean", RNG.uniform(0, 0.5, 64).astype(np.float32)),
                 _c("std", RNG.uniform(0.2, 2, 64).astype(np.float32)),
                 _w("W1", 64, 32), _w("b1", 32), _w("W", 32, 10)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["unk__0", *SHAPES[name]])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__0", 10])
    model = helper.make_model(helper.make_graph(nodes, "tf", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="tf2onnx")
    onnx.checker.check_model(model, full_check=True)
    return model


SHAPES = {"nchw_normalization": (3, 8, 8), "mlp_normalization": (64,)}
FORMS = ["reducemean", "reducemean_keepdims", "matmul_4d", "concat_last", "input_offset",
         *SHAPES]


@pytest.mark.parametrize("name", FORMS)
def test_form_is_rewritten_exactly_and_converts(name, tmp_path):
    path = tmp_path / f"{name}.onnx"
    onnx.save(_form(name), str(path))
    scale = 255.0 if name == "input_offset" else 1.0
    x = (RNG.uniform(0, 1, (16, *SHAPES.get(name, (8, 8, 3)))) * scale).astype(np.float32)
    fm = read_float_model(path, "MAX78000")
    # tf2onnx's rules, then at most the exporter-independent passes (movement, axes)
    assert fm.canonical.dialects[0] == "tf2onnx"
    assert set(fm.canonical.dialects[1:]) <= {"movement", "axes"}, fm.canonical.dialects
    sess = ort.InferenceSession(fm.model_bytes, providers=["CPUExecutionProvider"])
    got = sess.run(None, {fm.input_name: x})[0]
    np.testing.assert_allclose(got, float_run(path, x), rtol=1e-4, atol=1e-4)
    np.save(tmp_path / "cal.npy", x)
    code, _, err = cli([path, "--device", "MAX78000", "--calibration", tmp_path / "cal.npy",
                        "-o", tmp_path / "p"])
    assert code == 0, err
    # no transposed tensor is left inside the network: only the input's layout change
    canon = onnx.load_from_string(fm.model_bytes)
    transposes = [n for n in canon.graph.node if n.op_type == "Transpose"]
    assert [t.input[0] for t in transposes] == ([] if name in SHAPES else [fm.input_name])
    if name in SHAPES:  # the per-channel scale went into the first layer's weights
        assert "per-channel scales folded into the first layer's weights" in \
            " ".join(fm.rewrites)
        assert len(fm.input_offset) == SHAPES[name][0]


def test_malformed_channels_last_graph_is_a_message(tmp_path):
    """Constants that cannot broadcast together (a damaged file): one error naming
    tf2onnx, exit 1, no traceback."""
    nodes, inits = _head("xs")
    nodes = [helper.make_node("Mul", ["x", "k"], ["xm"], name="rescale/mul"),
             helper.make_node("Add", ["xm", "o"], ["xs"], name="rescale/add")] + nodes
    nodes += [helper.make_node("Flatten", ["rt"], ["f"], name="flat", axis=1),
              helper.make_node("MatMul", ["f", "W"], ["y"], name="dense")]
    inits += [_c("k", np.ones((1, 1, 1, 2), np.float32)),
              _c("o", np.ones((1, 1, 1, 3), np.float32)), _w("W", 512, 10)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["unk__0", 8, 8, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__0", 10])
    model = helper.make_model(helper.make_graph(nodes, "tf", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="tf2onnx")
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    np.save(tmp_path / "cal.npy", np.zeros((2, 8, 8, 3), np.float32))
    code, _, err = cli(["quantize", "-d", "MAX78000",
                        path, "--calibration", tmp_path / "cal.npy", "-o",
                        tmp_path / "q.onnx"])
    assert code == 1, err
    assert err.startswith("error[tf2onnx.unreadable]") and "tf2onnx" in err, err
    assert "Traceback" not in err and "internal error" not in err
