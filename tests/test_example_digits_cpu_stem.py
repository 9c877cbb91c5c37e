"""The digits example with a CPU stem (issue 28): a plain PyTorch model whose 5x5 first
convolution the accelerator refuses converts with --cpu-fallback; the held-out accuracy
of the split model (the CPU stem's and the accelerator's bit-exact integers) is the one
the README states and within 2 points of the float model's; verify passes.

The held-out digits are recomputed with scikit-learn directly (not through the
example's train.py); float accuracy comes from onnxruntime on the committed model.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import custom_ops
from onnx2ai8x.devices import MAX78000
from onnx2ai8x.frontend import QuantizeRequest
from onnx2ai8x.partition.build import partition

from .float_onnx.helpers import cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "digits_float"
MODEL = EXAMPLE / "digits_cpu_stem.onnx"
CALIBRATION = EXAMPLE / "calibration.npy"


@pytest.fixture(scope="module")
def metrics() -> dict:
    return json.loads((EXAMPLE / "metrics_cpu_stem.json").read_text())


@pytest.fixture(scope="module")
def held_out(metrics):
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    _, x_test, _, y_test = train_test_split(
        x, digits.target, test_size=metrics["held_out_samples"], random_state=metrics["seed"],
        stratify=digits.target)
    return x_test, y_test


def test_float_and_split_accuracy(metrics, held_out) -> None:
    x, y = held_out
    sess = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    logits = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    float_acc = float((logits.argmax(1) == y).mean())
    assert float_acc == pytest.approx(metrics["float_accuracy"], abs=1e-6)
    part = partition(MODEL, MAX78000, QuantizeRequest(calibration=CALIBRATION))
    assert part.stem is not None and part.head is None and not part.between
    assert [op.kind for op in part.stem.ops] == ["conv"] and part.stem.ops[0].kernel == (5, 5)
    q = part.quantize_input(x)
    acc_in = np.stack([part.run_stem(s) for s in q]).astype(np.int8)
    out = custom_ops.run(custom_ops.session(part.quant.model), acc_in)[0]
    split_acc = float((np.asarray(out).reshape(len(y), -1).argmax(1) == y).mean())
    assert split_acc == pytest.approx(metrics["quantized_accuracy"], abs=1e-6)
    assert split_acc >= float_acc - 0.02
    readme = (EXAMPLE / "README.md").read_text()
    assert f"{100 * float_acc:.2f} %" in readme and f"{100 * split_acc:.2f} %" in readme


def test_converts_and_verifies(tmp_path: Path) -> None:
    project = tmp_path / "p"
    code, stdout, stderr = cli([MODEL, "--device", "MAX78000", "--calibration", CALIBRATION,
                                "--cpu-fallback", "-o", project, "--verify"])
    assert code == 0, stderr
    assert "CPU stem:" in stdout and "PASS: CPU stem, accelerator in order" in stdout
