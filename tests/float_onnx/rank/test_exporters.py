"""1-D networks and upsampling from the real exporters (issue 34, items 1 and 2).

The fixtures were written by `make_torch.py` (torch 2.13's default exporter and the
TorchScript one) and `make_keras.py` (Keras 3 + tf2onnx's command line); the tests need
neither torch nor tensorflow. Each model converts with the Keras fixtures' calibration
digits, its project passes `onnx2ai8x verify`, the canonical model the walker reads gives
the source's outputs on the held-out digits (every rewrite exact), and the converted
model's top-1 accuracy on them is within 2 points of the source's (onnxruntime on the
exported file). The refusals name the node and give a hint that, applied, converts.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnx2ai8x.importer.float_onnx import read_float_model
from tests.float_onnx.helpers import cli, float_run, quantized_float_output
from tests.float_onnx.keras.digits import HERE as KERAS
from tests.float_onnx.keras.digits import held_out, layout
from tests.float_onnx.rank.layouts import torch_layout

HERE = Path(__file__).resolve().parent
FIXTURES = {**json.loads((HERE / "fixtures_torch.json").read_text()),
            **json.loads((HERE / "fixtures_keras.json").read_text())}
CONVERTING = sorted(n for n in FIXTURES  # (hint_*: forms proposed by a refusal, untrained)
                    if n != "keras_convtranspose_same" and not n.startswith("hint_"))


def _digits(x: np.ndarray, kind: str) -> np.ndarray:
    """(N, 8, 8) digits as the model of `kind` takes them."""
    return torch_layout(x, kind) if kind in ("gray_nchw", "rows_ncl") else layout(x, kind)


def _calibration(name: str, tmp: Path) -> Path:
    rows = np.load(KERAS / "cal_rows.npy")  # (N, 8, 8) digits, the Keras split's
    path = tmp / "cal.npy"
    np.save(path, _digits(rows, FIXTURES[name]["input"]))
    return path


@pytest.fixture(scope="module", params=CONVERTING)
def converted(request, tmp_path_factory):
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    code, stdout, err = cli([HERE / f"{name}.onnx", "--device", FIXTURES[name]["device"],
                             "--calibration", _calibration(name, tmp), "-o", tmp / name])
    assert code == 0, err
    return name, tmp / name, stdout


def test_converts_verifies_and_keeps_the_accuracy(converted):
    name, project, _ = converted
    code, out, err = cli(["verify", project])
    assert code == 0 and out.startswith("PASS"), out + err
    x, y = held_out("rows")
    x = _digits(x, FIXTURES[name]["input"])
    float_acc = float((float_run(HERE / f"{name}.onnx", x).argmax(1) == y).mean())
    if "keras_accuracy" in FIXTURES[name]:  # the file tf2onnx wrote is the model Keras ran
        assert float_acc == pytest.approx(FIXTURES[name]["keras_accuracy"], abs=0.005)
    q = onnx.load(str(project / f"{name}.onnx"))
    quant_acc = float((quantized_float_output(q, x).reshape(len(y), -1).argmax(1) == y)
                      .mean())
    assert float_acc > 0.85, (name, float_acc)
    assert float_acc - quant_acc <= 0.02, (name, float_acc, quant_acc)


@pytest.mark.parametrize("name", CONVERTING)
def test_rewrites_are_exact(name):
    fm = read_float_model(HERE / f"{name}.onnx", FIXTURES[name]["device"])
    x, _ = held_out("rows")
    x = _digits(x[:64], FIXTURES[name]["input"])
    sess = ort.InferenceSession(fm.model_bytes, providers=["CPUExecutionProvider"])
    got = sess.run(None, {fm.input_name: x})[0]
    np.testing.assert_allclose(got, float_run(HERE / f"{name}.onnx", x), rtol=1e-4,
                               atol=1e-4)
    rewrites = " | ".join(fm.rewrites)
    for needed in EXPECTED.get(name, ()):
        assert needed in rewrites, (needed, rewrites)


# What each form needed (the walker alone refuses the exporters' raw forms).
EXPECTED = {
    "torch_kws1d_dynamo": ("moved below node node_mean (ReduceMean)",),
    "torch_kws1d_maxglobal_dynamo": ("(ReduceMax)",),
    "torch_upsample_dynamo": ("nearest 2x upsampling = ConvTranspose2d",),
    "torch_upsample_script": ("nearest 2x upsampling = ConvTranspose2d",),
    "torch_depth_to_space_dynamo": ("nearest upsampling by 2 x 2",),
    "torch_depth_to_space_script": ("(DepthToSpace): nearest upsampling by 2 x 2",),
    "keras_kws1d": ("does nothing along the size-1 axes",),
    "keras_conv1d_stride2_same": ("padding (0, 1) = padding 1 on both sides with the kernel "
                                  "widened to 4",),
    "keras_upsampling2d": ("(Tile)", "nearest upsampling by 2 x 2"),
    "keras_upsampling1d": ("(Tile)", "nearest upsampling by 2", "1-D data upsampled"),
    "torch_upsample1d_dynamo": ("1-D data upsampled as",),
    "torch_upsample1d_script": ("1-D data upsampled as",),
    "keras_convtranspose_valid_cropped": ("a crop of", "output padding 1"),
}


def test_keras_convtranspose_same_is_refused_with_a_hint_that_converts(tmp_path):
    """Conv2DTranspose(3, strides=2, padding="same") keeps outputs 0 .. 2n-1 of the full
    result, the accelerator 1 .. 2n: refused, naming the node, its padding and the Keras
    change; the model with that change (keras_convtranspose_valid_cropped, made by the
    same script) converts above."""
    name = "keras_convtranspose_same"
    code, _, err = cli([HERE / f"{name}.onnx", "--device", "MAX78000", "--calibration",
                        _calibration(name, tmp_path), "-o", tmp_path / "p"])
    assert code == 1 and "Traceback" not in err
    assert err.startswith("error[float.padding] node ") and "(ConvTranspose)" in err, err
    assert "padded (0, 0) before and (1, 1) after" in err
    assert 'Conv2DTranspose(padding="valid") followed by Cropping2D(((1, 0), (1, 0)))' in err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("name", ["hint_same_stride2_odd", "hint_zeropadding_valid",
                                  "hint_stride1_maxpool"])
def test_the_same_padding_hint_applied_converts(name, tmp_path):
    """tf2onnx's refusal of a stride-2 "same" Conv2D on an even size
    (../keras/refused_same_stride2_even.onnx) proposes an odd-sized input,
    ZeroPadding2D(1) + padding="valid", or stride 1 + MaxPooling2D(2): each of those
    models, exported the same way, converts and verifies."""
    model = onnx.load(str(HERE / f"{name}.onnx"))
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    np.save(tmp_path / "cal.npy", np.random.default_rng(0).random((16, *dims))
            .astype(np.float32))
    code, _, err = cli([HERE / f"{name}.onnx", "--device", "MAX78000", "--calibration",
                        tmp_path / "cal.npy", "-o", tmp_path / "p", "--verify",
                        "--accept-loss"])
    assert code == 0, err
