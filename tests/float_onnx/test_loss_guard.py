"""The silent-loss guard (issue 24, part 5): a quantized model that departs from its
float source on the calibration samples is refused (exit 1, the per-layer table, the
first layer where the SQNR collapses) unless --accept-loss, on every path that
quantizes; a model that quantizes well is unaffected.

The failing model is an honest one: its first convolution writes two channels whose
range is 500 times that of the other two, and the second convolution reads (almost)
only the quiet channels. One int8 scale per tensor (the hardware's) must cover the loud
channels, so the quiet ones round to a few codes and the second layer's output is lost.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from .helpers import cli

ROOT = Path(__file__).resolve().parents[2]
DIGITS_FLOAT = ROOT / "examples" / "digits_float"


@pytest.fixture(scope="module")
def bad_model(tmp_path_factory) -> tuple[Path, Path]:
    torch = pytest.importorskip("torch")
    from torch import nn

    from .mobilenet import export

    class Ranges(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
            self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
            self.fc = nn.Linear(8 * 8 * 8, 10)

        def forward(self, x):
            x = torch.relu(self.conv1(x))
            x = torch.relu(self.conv2(x))
            return self.fc(torch.flatten(x, 1))

    torch.manual_seed(7)
    model = Ranges()
    with torch.no_grad():
        model.conv1.weight[:2] *= 500.0  # the loud channels
        model.conv1.bias[:2] *= 500.0
        model.conv2.weight[:, :2] *= 1e-4  # ... which the next layer barely reads
    tmp = tmp_path_factory.mktemp("loss")
    path = export(model, tmp / "ranges.onnx", (1, 8, 8))
    cal = tmp / "cal.npy"
    np.save(cal, np.random.default_rng(3).uniform(0, 1, (64, 1, 8, 8)).astype(np.float32))
    return path, cal


def test_quantize_refuses_the_loss_and_names_the_layer(bad_model, tmp_path: Path) -> None:
    path, cal = bad_model
    out = tmp_path / "q.onnx"
    code, stdout, stderr = cli(["quantize", "-d", "MAX78000",
                                path, "--calibration", cal, "-o", out])
    assert code == 1, stderr
    assert "error[quantize.loss]" in stderr
    # the per-layer table comes with the error, and the collapse is at the second
    # convolution (its node named), not at the loud first one
    assert "SQNR dB" in stderr and "clipped %" in stderr
    assert "collapses first at layer 1 `conv2`" in stderr and "/conv2/Conv" in stderr
    assert "--accept-loss" in stderr
    assert not out.exists() and not (tmp_path / "q.report.json").exists()


def test_convert_with_calibration_refuses_it_too(bad_model, tmp_path: Path) -> None:
    path, cal = bad_model
    out = tmp_path / "proj"
    code, _, stderr = cli([path, "--device", "MAX78000", "--calibration", cal, "-o", out])
    assert code == 1 and "error[quantize.loss]" in stderr
    assert not out.exists()
    # check runs the same front end, so it refuses the same model the same way
    code, _, stderr = cli(["check", path, "--device", "MAX78000", "--calibration", cal])
    assert code == 1 and "error[quantize.loss]" in stderr and "`conv2`" in stderr


def test_accept_loss_converts_with_a_warning(bad_model, tmp_path: Path) -> None:
    path, cal = bad_model
    out = tmp_path / "q.onnx"
    code, _, stderr = cli(["quantize", "-d", "MAX78000", path, "--calibration", cal, "-o", out,
                           "--accept-loss"])
    assert code == 0, stderr
    assert "warning[quantize.loss]" in stderr and "`conv2`" in stderr
    report = json.loads((tmp_path / "q.report.json").read_text())
    # the report holds the figures the guard judged (not a rubber stamp)
    assert report["model_sqnr_db"] < 10 or report["top1_agreement_decided"] < 0.9
    sqnr = {r["name"]: r["sqnr_db"] for r in report["layers"]}
    assert sqnr["conv1"] > 20 and sqnr["conv2"] < 10
    proj = tmp_path / "proj"
    code, _, stderr = cli([path, "--device", "MAX78000", "--calibration", cal, "-o", proj,
                           "--accept-loss"])
    assert code == 0 and "warning[quantize.loss]" in stderr and (proj / "cnn.c").is_file()
    # --quiet means errors only (issue 35)
    code, _, stderr = cli([path, "--device", "MAX78000", "--calibration", cal, "-o",
                           tmp_path / "proj-q", "--accept-loss", "-q"])
    assert code == 0 and stderr == ""


def test_a_model_that_quantizes_well_is_unaffected(tmp_path: Path) -> None:
    out = tmp_path / "q.onnx"
    code, stdout, stderr = cli(["quantize", "-d", "MAX78000", DIGITS_FLOAT / "digits_float.onnx",
                                "--calibration", DIGITS_FLOAT / "calibration.npy",
                                "-o", out])
    assert code == 0, stderr
    assert "quantize.loss" not in stderr + stdout
    report = json.loads((tmp_path / "q.report.json").read_text())
    assert report["model_sqnr_db"] >= 10 and report["top1_agreement_decided"] >= 0.9


def test_help_states_the_limits() -> None:
    for command in ("quantize", "convert", "check"):
        code, stdout, _ = cli([command, "--help"])
        text = " ".join(stdout.split())
        assert code == 0 and "--accept-loss" in text
        assert "90 %" in text and "10 dB" in text


def test_decided_agreement_ignores_near_ties_only() -> None:
    from onnx2ai8x.quantize.ptq import _decided_agreement

    ref = np.array([[5.0, 0.0, 0.0], [1.0, 1.01, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 3.0]])
    # the near-tie (sample 1) flips: not counted; every clear sample agrees
    got = ref + np.array([[0.1, 0, 0], [0, -0.05, 0], [0, 0, 0.1], [0.1, 0, 0]])
    agree, n = _decided_agreement(ref, got)
    assert (agree, n) == (1.0, 3)
    # a clear sample that flips counts against the model
    got[0] = [0.0, 6.0, 0.0]
    agree, n = _decided_agreement(ref, got)
    assert n < 4 and agree < 1.0
