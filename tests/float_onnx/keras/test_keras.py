"""Keras models exported by tf2onnx with its default settings (issue 24, item 2).

The fixtures were written by the real tools (make_fixtures.py: tensorflow-cpu, Keras 3,
tf2onnx's command line); tensorflow is not needed here. Each model converts with the
calibration split, its project passes `onnx2ai8x verify`, and its top-1 accuracy on the
held-out digits is within 2 points of the float model's, computed here on onnxruntime
from the file tf2onnx wrote. The rewrites of the tf2onnx dialect are checked exact: the
canonical model the walker reads gives the source's outputs on the held-out digits.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.float_onnx.helpers import cli, float_run, quantized_float_output
from tests.float_onnx.keras.digits import HERE, held_out, layout

FIXTURES = json.loads((HERE / "fixtures.json").read_text())
NAMES = sorted(FIXTURES)


def _calibration(name: str, tmp: Path) -> Path:
    kind = FIXTURES[name]["input"]
    if kind == "gray_nchw":
        path = tmp / "cal_gray_nchw.npy"
        np.save(path, np.load(HERE / "cal_gray.npy")[..., 0][:, np.newaxis])
        return path
    return HERE / f"cal_{kind}.npy"


def _held_out(name: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = held_out("gray")
    return layout(x[..., 0], FIXTURES[name]["input"]), y


@pytest.fixture(scope="module", params=NAMES)
def converted(request, tmp_path_factory):
    """(name, project directory, convert's stdout) of one fixture."""
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    out = tmp / name
    # --cpu-tail: a fixture ending in a softmax is compared by its top-1 (the softmax
    # keeps the order), as an application applying it would
    code, stdout, err = cli([HERE / f"{name}.onnx", "--device", FIXTURES[name]["device"],
                             "--calibration", _calibration(name, tmp), "-o", out,
                             "--cpu-tail"])
    assert code == 0, err
    return name, out, stdout


def accuracies(name: str, project: Path) -> tuple[float, float]:
    """Top-1 on the held-out digits: the source model on onnxruntime, and the converted
    model's integers (the bit-exact reference) mapped as its metadata says."""
    x, y = _held_out(name)
    float_acc = float((float_run(HERE / f"{name}.onnx", x).argmax(1) == y).mean())
    q = onnx.load(str(project / f"{project.name}.onnx"))
    got = quantized_float_output(q, x).reshape(len(y), -1)
    return float_acc, float((got.argmax(1) == y).mean())


def test_converts_verifies_and_keeps_the_accuracy(converted):
    name, project, _ = converted
    code, out, err = cli(["verify", project])
    assert code == 0, out + err
    assert out.startswith("PASS"), out
    float_acc, quant_acc = accuracies(name, project)
    # the file tf2onnx wrote is the model Keras trained
    assert float_acc == pytest.approx(FIXTURES[name]["keras_accuracy"], abs=0.005)
    assert float_acc > 0.95
    assert float_acc - quant_acc <= 0.02, (name, float_acc, quant_acc)


@pytest.mark.parametrize("name", NAMES)
def test_rewrites_are_exact(name):
    """The canonical model (after the tf2onnx dialect's rewrites) computes the source's
    outputs on every held-out digit."""
    from onnx2ai8x.importer.float_onnx import read_float_model

    fm = read_float_model(HERE / f"{name}.onnx", FIXTURES[name]["device"])
    x, _ = _held_out(name)
    sess = ort.InferenceSession(fm.model_bytes, providers=["CPUExecutionProvider"])
    got = sess.run(None, {fm.input_name: x})[0]
    want = float_run(HERE / f"{name}.onnx", x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    rewrites = " | ".join(fm.canonical.rewrites)
    for needed in EXPECTED_REWRITES.get(name, ()):
        assert needed in rewrites, (needed, rewrites)


# What each fixture needs from the tf2onnx dialect (the walker refuses the raw forms).
EXPECTED_REWRITES = {
    "gray_cnn": ("reshape (8, 8, 1) -> (1, 8, 8) moves only size-1 axes",
                 "dense weights' rows permuted"),
    "gray_cnn_nchw": ("dense weights' rows permuted",),
    "gray_norm_nchw": ("an offset per channel in the input mapping, scale 2.66063 in the "
                       "input mapping",),
    "gray_norm": ("reshape (8, 8, 1) -> (1, 8, 8)", "an offset per channel in the input "
                  "mapping, scale 2.66063 in the input mapping"),
    "rgb_norm": ("an offset per channel in the input mapping, per-channel scales folded "
                 "into the first layer's weights",),
    "rgb_concat": ("(Tensordot) = MatMul", "a 1x1 convolution", "cancel",
                   "dense weights' rows permuted"),
    "rows_conv1d": ("Transpose (0, 2, 1) then Unsqueeze", "does nothing along the size-1 axes",
                    "dense weights' rows permuted"),
}


def _messages_ok(text: str) -> None:
    assert "tf2onnx" in text and "Traceback" not in text
    assert "np.int64" not in text and "np.float" not in text


def test_same_padding_that_tensorflow_pads_unequally_is_refused(tmp_path):
    """An 8x8 input, a 3x3 stride-2 "same" convolution: TensorFlow pads 0 before and 1
    after, which the accelerator cannot; the message says so and what to export."""
    code, _, err = cli([HERE / "refused_same_stride2_even.onnx", "--device", "MAX78000",
                        "--calibration", HERE / "cal_gray.npy", "-o", tmp_path / "p"])
    assert code == 1
    assert "error[tf2onnx.same-padding]" in err and "8 x 8" in err, err
    assert "ZeroPadding2D" in err
    _messages_ok(err)
    assert not (tmp_path / "p").exists()


def test_input_offset_is_in_the_mapping(converted):
    """Normalization's mean is an offset of the input mapping (in the metadata `run`
    reads), not folded into a bias: the first convolution's zero padding is zeros of the
    normalized input, as in the model."""
    name, project, stdout = converted
    meta = {p.key: p.value for p in onnx.load(str(project / f"{name}.onnx")).metadata_props}
    offset = json.loads(meta.get("ai8x.input_offset", "[]"))
    channels = json.loads(meta["ai8x.input_shape"])[0]
    if name in ("gray_norm", "gray_norm_nchw", "rgb_norm"):
        assert len(offset) == channels and any(offset), offset
        assert "offset per channel" in stdout
    else:
        assert offset == []


def test_run_maps_float_samples_with_the_offset(converted, tmp_path):
    """`onnx2ai8x run` on a float sample in the model's own layout (NHWC) gives the
    output the test computes from the metadata."""
    name, project, _ = converted
    x, _ = _held_out(name)
    np.save(tmp_path / "x.npy", x[:3])
    code, _, err = cli(["run", project / f"{name}.onnx", "--input", tmp_path / "x.npy",
                        "-o", tmp_path / "y.npy"])
    assert code == 0, err
    q = onnx.load(str(project / f"{name}.onnx"))
    meta = {p.key: p.value for p in q.metadata_props}
    scale = json.loads(meta["ai8x.output_scales"])[0]
    want = quantized_float_output(q, x[:3])
    got = np.load(tmp_path / "y.npy").astype(np.float64) * scale
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_walker_refusals_name_the_tf2onnx_form(tmp_path):
    """An operator the accelerator lacks in a tf2onnx export (Keras' LeakyReLU is written
    as LeakyRelu): the message names the node and says the model is tf2onnx's export."""
    model = onnx.load(str(HERE / "gray_cnn.onnx"))
    relu = next(n for n in model.graph.node if n.op_type == "Relu")
    relu.op_type = "LeakyRelu"
    path = tmp_path / "leaky.onnx"
    onnx.save(model, str(path))
    code, _, err = cli([path, "--device", "MAX78000", "--calibration",
                        HERE / "cal_gray.npy", "-o", tmp_path / "p"])
    assert code == 1
    assert err.startswith("error[float.unsupported-op]") and relu.name in err, err
    assert "export of a Keras/TensorFlow model" in err and "use ReLU" in err
    _messages_ok(err)
