"""The committed digits example: a valid model, its stated accuracy, and the conversion.

The held-out split is recomputed here from the seed in `metrics.json` with scikit-learn
directly (not through train.py), and the accelerator's input from the vendor's
`normalize` rule written out plainly.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import custom_ops

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "digits"
FILES = ("digits.onnx", "sample.npy", "metrics.json")


@pytest.fixture(scope="module")
def metrics() -> dict:
    return json.loads((EXAMPLE / "metrics.json").read_text())


@pytest.fixture(scope="module")
def held_out(metrics):
    sklearn = pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    assert sklearn is not None
    digits = load_digits()
    # Pixels 0..16 -> [0, 1] -> (x - 0.5) * 256, rounded and clamped to signed 8 bits.
    x = np.clip(np.round((digits.images / 16.0 - 0.5) * 256.0), -128, 127)
    _, x_test, _, y_test = train_test_split(
        x.reshape(-1, 1, 8, 8), digits.target, test_size=metrics["held_out_samples"],
        random_state=metrics["seed"], stratify=digits.target)
    return x_test.astype(np.int64), y_test


def test_committed_model_passes_the_full_onnx_check():
    model = onnx.load(EXAMPLE / "digits.onnx")
    onnx.checker.check_model(model, full_check=True)
    domains = {imp.domain for imp in model.opset_import}
    assert {"", "ai8x"} <= domains


def test_quantized_accuracy_is_reproduced_by_the_reference(metrics, held_out):
    x_test, y_test = held_out
    assert len(y_test) == metrics["held_out_samples"]
    logits = custom_ops.run(custom_ops.session(EXAMPLE / "digits.onnx"), x_test)[0]
    predicted = np.asarray(logits).reshape(len(y_test), -1).argmax(1)
    accuracy = float((predicted == y_test).mean())
    assert accuracy == pytest.approx(metrics["quantized_accuracy"], abs=1e-6)
    assert accuracy > 0.90
    assert abs(metrics["float_accuracy"] - accuracy) <= 0.02


def test_sample_is_a_held_out_digit_as_the_accelerator_sees_it(metrics, held_out):
    x_test, y_test = held_out
    sample = np.load(EXAMPLE / "sample.npy")
    assert sample.shape == (1, 8, 8)
    assert sample.min() >= -128 and sample.max() <= 127
    np.testing.assert_array_equal(sample, x_test[metrics["sample_index"]])
    assert y_test[metrics["sample_index"]] == metrics["sample_label"]


def test_readme_run_command_writes_the_project(tmp_path):
    out = tmp_path / "digits"
    result = subprocess.run(
        [sys.executable, "-m", "onnx2ai8x.cli", str(EXAMPLE / "digits.onnx"),
         "--device", "MAX78000", "--sample-input", str(EXAMPLE / "sample.npy"),
         "-o", str(out), "--quiet"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    for name in ("cnn.c", "cnn.h", "weights.h", "main.c", "sampledata.h",
                 "sampleoutput.h", "Makefile", "project.mk", "report.json"):
        assert (out / name).is_file(), name
    report = json.loads((out / "report.json").read_text())
    assert report["device"] == "MAX78000"


# How far a retrained model's accuracies may be from the committed ones: float training
# is seeded, single-threaded and deterministic, but the summation order of the CPU's
# vector units (AVX2 vs AVX-512) changes the last bits of the weights, and 7 of 9 weight
# tensors differ on another CPU (issue 25) — a few of the 360 held-out digits flip.
ACCURACY_TOLERANCE = 0.015


@pytest.mark.slow
def test_training_reproduces_what_it_can(tmp_path, metrics):
    """What is reproducible on any CPU: the split, the sample and the settings exactly,
    the accuracies within ACCURACY_TOLERANCE; and the conversion of the model training
    wrote is byte-identical from one run to the next. Byte-identical weights hold on the
    CPU that wrote the committed files only, so they are not asserted."""
    pytest.importorskip("torch")
    result = subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--out",
                             str(tmp_path), "--quiet"], capture_output=True, text=True,
                            check=False, timeout=600)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "sample.npy").read_bytes() == (EXAMPLE / "sample.npy").read_bytes()
    again = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("seed", "train_samples", "held_out_samples", "float_epochs", "qat_epochs",
                "sample_index", "sample_label"):
        assert again[key] == metrics[key], key
    for key in ("float_accuracy", "qat_float_accuracy", "quantized_accuracy"):
        assert abs(again[key] - metrics[key]) <= ACCURACY_TOLERANCE, (key, again[key])
    onnx.checker.check_model(onnx.load(tmp_path / "digits.onnx"), full_check=True)
    outs = []
    for run in ("a", "b"):
        out = tmp_path / run
        proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli",
                               str(tmp_path / "digits.onnx"), "-o", str(out), "--quiet"],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        outs.append({f.name: f.read_bytes() for f in sorted(out.iterdir()) if f.is_file()})
    assert outs[0] == outs[1]
