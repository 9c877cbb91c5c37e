"""The Brevitas QAT digits example: its committed exports (QCDQ and QONNX) convert
exactly, without calibration data, to the figures of its metrics.json, and the README
command writes a project that passes verify. No Brevitas needed."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.float_onnx.helpers import cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "digits_brevitas"

pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def metrics() -> dict:
    return json.loads((EXAMPLE / "metrics.json").read_text())


def test_exports_convert_exactly_to_the_recorded_accuracy(metrics) -> None:
    from onnx2ai8x.quantize import quantize_file
    from tests.quantized_sources.helpers import held_out, run_converted, run_source

    x, y = held_out()
    source = run_source(EXAMPLE / "digits_brevitas_qcdq.onnx", x)
    ort_acc = float(np.mean(source.argmax(1) == y))
    assert ort_acc == pytest.approx(metrics["qcdq_onnxruntime_accuracy"], abs=1e-6)
    for name in ("digits_brevitas_qcdq.onnx", "digits_brevitas_qonnx.onnx"):
        result = quantize_file(EXAMPLE / name, None)
        assert result.summary["exact"] is True, name
        acc = float(np.mean(run_converted(result, x).argmax(1) == y))
        assert acc == pytest.approx(metrics["converted_accuracy"], abs=1e-6), name
        assert abs(acc - ort_acc) <= 0.01
    assert metrics["exact"] is True and metrics["converted_accuracy"] > 0.95


def test_readme_command_converts_and_verifies(tmp_path: Path) -> None:
    code, out, err = cli([EXAMPLE / "digits_brevitas_qcdq.onnx", "--device", "MAX78000",
                          "-o", tmp_path / "digits_brevitas", "--verify"])
    assert code == 0, err
    assert "PASS: MAX78000, 4 layers" in out + err
    report = json.loads((tmp_path / "digits_brevitas" / "report.json").read_text())
    assert report["quantization"]["exact"] is True
    assert report["quantization"]["qdq_scales"] == "exact"
