"""The plain-PyTorch digits example: float ONNX in, quantized by onnx2ai8x with the
calibration split, within 2 points of the float accuracy on held-out digits.

The split is recomputed here with scikit-learn directly (not through train.py); float
accuracy comes from onnxruntime on the committed float model, quantized accuracy from
the bit-exact reference on the model `onnx2ai8x quantize` writes.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import custom_ops
from onnx2ai8x.devices import MAX78000

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "digits_float"
MODEL = EXAMPLE / "digits_float.onnx"
CALIBRATION = EXAMPLE / "calibration.npy"


@pytest.fixture(scope="module")
def metrics() -> dict:
    return json.loads((EXAMPLE / "metrics.json").read_text())


@pytest.fixture(scope="module")
def held_out(metrics):
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    x_rest, x_test, y_rest, y_test = train_test_split(
        x, digits.target, test_size=metrics["held_out_samples"], random_state=metrics["seed"],
        stratify=digits.target)
    _, x_cal, _, _ = train_test_split(x_rest, y_rest,
                                      test_size=metrics["calibration_samples"],
                                      random_state=metrics["seed"], stratify=y_rest)
    return x_test, y_test, x_cal


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    from onnx2ai8x.api import quantize

    out = tmp_path_factory.mktemp("digits_float") / "digits_float_q.onnx"
    quantize(MODEL, MAX78000, calibration=CALIBRATION, output=out)
    return out


def test_committed_model_is_plain_float_onnx():
    model = onnx.load(str(MODEL))
    onnx.checker.check_model(model, full_check=True)
    assert {imp.domain for imp in model.opset_import} <= {"", "ai.onnx"}
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT


def test_calibration_split_is_disjoint_from_the_held_out_digits(held_out):
    x_test, _, x_cal = held_out
    np.testing.assert_array_equal(np.load(CALIBRATION), x_cal)


def test_quantized_accuracy_within_two_points_of_float(metrics, held_out, quantized):
    x_test, y_test, _ = held_out
    sess = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    logits = sess.run(None, {sess.get_inputs()[0].name: x_test})[0]
    float_acc = float((logits.argmax(1) == y_test).mean())
    model = onnx.load(str(quantized))
    onnx.checker.check_model(model, full_check=True)
    meta = {p.key: p.value for p in model.metadata_props}
    scale = float(meta["ai8x.input_scale"])
    q = np.clip(np.floor(x_test / scale + 0.5), -128, 127).astype(np.int8)
    out = custom_ops.run(custom_ops.session(quantized), q)[0]
    quant_acc = float((np.asarray(out).reshape(len(y_test), -1).argmax(1) == y_test).mean())
    assert float_acc == pytest.approx(metrics["float_accuracy"], abs=1e-6)
    assert quant_acc == pytest.approx(metrics["quantized_accuracy"], abs=1e-6)
    assert float_acc - quant_acc <= 0.02
    assert float_acc > 0.95


def test_readme_command_writes_the_project_and_its_known_answer(tmp_path, quantized):
    out = tmp_path / "digits_float"
    result = subprocess.run(
        [sys.executable, "-m", "onnx2ai8x.cli", str(MODEL), "--device", "MAX78000",
         "--calibration", str(CALIBRATION), "--labels",
         str(EXAMPLE / "calibration_labels.npy"), "-o", str(out)],
        capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "SQNR dB" in result.stdout and "accuracy: float" in result.stdout
    for name in ("cnn.c", "weights.h", "sampledata.h", "sampleoutput.h", "report.json",
                 "digits_float.onnx"):
        assert (out / name).is_file(), name
    report = json.loads((out / "report.json").read_text())
    q = report["quantization"]
    assert len(q["layers"]) == 4 and q["calibration_samples"] == 200
    assert q["float_accuracy"] is not None and q["top1_agreement"] >= 0.95
    # The project's known answer is what `onnx2ai8x run` gives for its sample (the first
    # calibration digit, mapped to int8 as the report states).
    from tests.float_onnx.helpers import cli, kat_matches

    sample = tmp_path / "first.npy"
    np.save(sample, np.load(CALIBRATION)[0])
    code, _, err = cli(["run", out / "digits_float.onnx", "--input", sample, "-o",
                        tmp_path / "y.npy"])
    assert code == 0, err
    assert kat_matches(out, [np.load(tmp_path / "y.npy")[0]])
    # And the converted ONNX in the project is the quantized model `quantize` writes.
    assert [i.name for i in onnx.load(str(quantized)).graph.initializer] == \
        [i.name for i in onnx.load(str(out / "digits_float.onnx")).graph.initializer]
