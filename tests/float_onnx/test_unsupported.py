"""Float models the accelerator cannot run: one clear error naming the node, exit 1, no
traceback, nothing written."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from .helpers import cli

RNG = np.random.default_rng(3)


def _w(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array((RNG.standard_normal(shape) * 0.3).astype(np.float32),
                                   name)


def _const(name: str, values, dtype=np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype), name)


def _model(nodes, inits, *, shape=("N", 3, 8, 8), out="y", opset=13,
           dtype=TensorProto.FLOAT, extra_inputs=()) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", dtype, list(shape))
    y = helper.make_tensor_value_info(out, TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "bad", [x, *extra_inputs], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _conv(inp: str, out: str, name: str, cin: int = 3, cout: int = 8, k: int = 3,
          pads=(1, 1, 1, 1)) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    node = helper.make_node("Conv", [inp, f"{name}.w", f"{name}.b"], [out], name=name,
                            kernel_shape=[k, k], pads=list(pads))
    return node, [_w(f"{name}.w", cout, cin, k, k), _w(f"{name}.b", cout)]


def _after_conv(op: str, name: str, attrs: dict | None = None, inputs=()):
    """conv -> op -> conv: op mid-network."""
    c0, i0 = _conv("x", "c0", "conv0")
    mid = helper.make_node(op, ["c0", *inputs], ["m"], name=name, **(attrs or {}))
    c1, i1 = _conv("m", "y", "conv1", cin=8)
    return [c0, mid, c1], i0 + i1


def _case(name: str):
    if name == "leaky_relu":
        return _model(*_after_conv("LeakyRelu", "act_leaky", {"alpha": 0.1})), "act_leaky"
    if name == "sigmoid_mid":
        return _model(*_after_conv("Sigmoid", "gate_sigmoid")), "gate_sigmoid"
    if name == "softmax_mid":
        return _model(*_after_conv("Softmax", "mid_softmax", {"axis": 1})), "mid_softmax"
    if name == "tanh":
        return _model(*_after_conv("Tanh", "squash")), "squash"
    if name == "kernel_5x5":
        c0, i0 = _conv("x", "y", "big_kernel", k=5, pads=(2, 2, 2, 2))
        return _model([c0], i0), "big_kernel"
    if name == "dynamic_spatial":
        c0, i0 = _conv("x", "y", "conv0")
        return _model([c0], i0, shape=("N", 3, "H", "W")), "input x"
    if name == "asymmetric_padding":
        c0, i0 = _conv("x", "y", "asym_pad_conv", pads=(0, 0, 1, 1))
        return _model([c0], i0), "asym_pad_conv"
    if name == "pad_op":
        # reflection padding (zero padding onnxsim folds into the next convolution)
        nodes, inits = _after_conv("Pad", "explicit_pad", {"mode": "reflect"},
                                   inputs=("pads",))
        inits.append(_const("pads", [0, 0, 1, 1, 0, 0, 1, 1], np.int64))
        return _model(nodes, inits), "explicit_pad"
    if name == "resize":
        # (nearest 2x upsampling converts: tests/float_onnx/rank)
        nodes, inits = _after_conv("Resize", "upsample", {"mode": "linear"},
                                   inputs=("", "scales"))
        inits.append(_const("scales", [1, 1, 2, 2]))
        return _model(nodes, inits), "upsample"
    if name == "mul_activations":
        c0, i0 = _conv("x", "a", "conv_a")
        c1, i1 = _conv("x", "b", "conv_b")
        mul = helper.make_node("Mul", ["a", "b"], ["y"], name="gate_mul")
        return _model([c0, c1, mul], i0 + i1), "gate_mul"
    if name == "clip_negative":
        nodes, inits = _after_conv("Clip", "hardtanh", inputs=("lo", "hi"))
        inits += [_const("lo", -1.0), _const("hi", 1.0)]
        return _model(nodes, inits), "hardtanh"
    if name == "batchnorm_on_input":
        bn = helper.make_node("BatchNormalization", ["x", "g", "bb", "mu", "var"], ["n"],
                              name="bn_input")
        c0, i0 = _conv("n", "y", "conv0")
        inits = [_const(k, v) for k, v in (("g", [1.0] * 3), ("bb", [0.0] * 3),
                                            ("mu", [0.1] * 3), ("var", [1.0] * 3))]
        return _model([bn, c0], inits + i0), "bn_input"
    if name == "concat_height":
        c0, i0 = _conv("x", "a", "conv_a")
        c1, i1 = _conv("x", "b", "conv_b")
        cat = helper.make_node("Concat", ["a", "b"], ["y"], name="cat_rows", axis=2)
        return _model([c0, c1, cat], i0 + i1), "cat_rows"
    if name == "reshape_not_flatten":
        c0, i0 = _conv("x", "c", "conv0")
        rs = helper.make_node("Reshape", ["c", "shape"], ["y"], name="fold_rows")
        return _model([c0, rs], i0 + [_const("shape", [-1, 64, 8], np.int64)]), "fold_rows"
    if name == "gather":
        nodes, inits = _after_conv("Gather", "pick", {"axis": 1}, inputs=("idx",))
        inits.append(_const("idx", [0, 1, 2, 3, 4, 5, 6, 7], np.int64))
        return _model(nodes, inits), "pick"
    if name == "maxpool_padding":
        nodes, inits = _after_conv("MaxPool", "padded_pool",
                                   {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
        return _model(nodes, inits), "padded_pool"
    if name == "transposed_conv_input":
        nodes, inits = _after_conv("Transpose", "swap_hw", {"perm": [0, 1, 3, 2]})
        return _model(nodes, inits), "node swap_hw (Transpose)"
    if name == "input_minus_mean":
        sub = helper.make_node("Sub", ["x", "mean"], ["n"], name="normalize")
        c0, i0 = _conv("n", "y", "conv0")
        return _model([sub, c0], i0 + [_const("mean", 0.5)]), "normalize"
    if name == "dense_on_4d":
        c0, i0 = _conv("x", "c", "conv0")
        mm = helper.make_node("MatMul", ["c", "W"], ["y"], name="dense_4d")
        return _model([c0, mm], i0 + [_w("W", 8, 4)]), "dense_4d"
    if name == "global_pool_too_big":
        gp = helper.make_node("GlobalAveragePool", ["c"], ["y"], name="gap32")
        c0, i0 = _conv("x", "c", "conv0")
        return _model([c0, gp], i0, shape=("N", 3, 32, 32)), "gap32"
    if name == "split":
        c0, i0 = _conv("x", "c", "conv0")
        sp = helper.make_node("Split", ["c", "parts"], ["y", "z"], name="halves", axis=1)
        return _model([c0, sp], i0 + [_const("parts", [4, 4], np.int64)]), "halves"
    if name == "int8_input":
        c0, i0 = _conv("x", "y", "conv0")
        return _model([c0], i0, dtype=TensorProto.INT8), "input x"
    if name == "opset_9":
        c0, i0 = _conv("x", "y", "conv0")
        return _model([c0], i0, opset=9), "opset 9"
    raise AssertionError(name)


CASES = ["leaky_relu", "sigmoid_mid", "softmax_mid", "tanh", "kernel_5x5", "dynamic_spatial",
         "asymmetric_padding", "pad_op", "resize", "mul_activations", "clip_negative",
         "batchnorm_on_input", "concat_height", "reshape_not_flatten", "gather",
         "maxpool_padding", "transposed_conv_input", "dense_on_4d",
         "global_pool_too_big", "split", "int8_input", "opset_9"]


def write_case(name: str, tmp_path: Path, rng: np.random.Generator
               ) -> tuple[onnx.ModelProto, str, Path, Path]:
    """Case `name` written to tmp_path: (model, named node, model file, calibration
    file of 4 uniform samples drawn from `rng`)."""
    model, named = _case(name)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    shape = [d.dim_value or 8 for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    cal = tmp_path / "cal.npy"
    np.save(cal, rng.uniform(-1, 1, (4, *shape)).astype(np.float32))
    return model, named, path, cal


@pytest.mark.parametrize("name", CASES)
def test_unsupported_pattern_is_one_clear_error(name: str, tmp_path: Path) -> None:
    _, named, path, cal = write_case(name, tmp_path, RNG)
    out = tmp_path / "q.onnx"
    code, stdout, stderr = cli(["quantize", "-d", "MAX78000", path, "--calibration", cal,
                                "-o", out])
    assert code == 1, (stdout, stderr)
    assert stderr.startswith("error["), stderr
    assert named in stderr.splitlines()[0], stderr
    assert "hint:" in stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert "np." not in stderr  # no numpy reprs such as np.int64(8) in messages
    assert not out.exists() and not (tmp_path / "q.report.json").exists()
    # The main form refuses it the same way and writes no project.
    code, _, stderr2 = cli([path, "--device", "MAX78000", "--calibration",
                            tmp_path / "cal.npy", "-o", tmp_path / "proj"])
    assert code == 1 and stderr2.splitlines()[0] == stderr.splitlines()[0]
    assert not (tmp_path / "proj").exists()


def test_input_offset_is_part_of_the_input_mapping(tmp_path: Path) -> None:
    """`x - mean` before a zero-padded convolution (once refused here) is exact as an
    offset of the input mapping: the accelerator's padding holds zeros of x - mean, as
    the model's does (issue 24: Normalization folded into the input mapping)."""
    import json

    from .helpers import float_run, metadata, quantized_float_output, sqnr_db

    model, _ = _case("input_minus_mean")
    path = tmp_path / "n.onnx"
    onnx.save(model, str(path))
    x = RNG.uniform(0, 1, (32, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "cal.npy", x)
    code, stdout, stderr = cli(["quantize", "-d", "MAX78000",
                                path, "--calibration", tmp_path / "cal.npy",
                                "-o", tmp_path / "q.onnx"])
    assert code == 0, stderr
    assert "offset per channel -0.5, -0.5, -0.5" in stdout
    q = onnx.load(str(tmp_path / "q.onnx"))
    assert json.loads(metadata(q)["ai8x.input_offset"]) == [-0.5, -0.5, -0.5]
    assert sqnr_db(float_run(path, x), quantized_float_output(q, x)) > 25


def test_float_model_without_calibration_says_how(tmp_path: Path) -> None:
    c0, i0 = _conv("x", "y", "conv0")
    path = tmp_path / "f.onnx"
    onnx.save(_model([c0], i0), str(path))
    code, _, stderr = cli([path, "--device", "MAX78000", "-o", tmp_path / "p"])
    assert code == 2 and "--calibration" in stderr


def test_calibration_of_the_wrong_shape_is_a_usage_error(tmp_path: Path) -> None:
    c0, i0 = _conv("x", "y", "conv0")
    path = tmp_path / "f.onnx"
    onnx.save(_model([c0], i0), str(path))
    np.save(tmp_path / "cal.npy", np.zeros((4, 3, 6, 6), np.float32))
    code, _, stderr = cli(["quantize", "-d", "MAX78000",
                           path, "--calibration", tmp_path / "cal.npy", "-o",
                           tmp_path / "q.onnx"])
    assert code == 2 and "(3, 8, 8)" in stderr and "(3, 6, 6)" in stderr
