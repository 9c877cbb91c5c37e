"""A project converted from float ONNX builds as firmware with the MSDK and the Arm
toolchain (skipped without them, as tests/emit/test_firmware_build.py; a failure in CI).
About 40 s (a private copy of the SDK and a build): with the long sweeps (--golden-all).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.emit.test_firmware_build import sdk  # noqa: F401 - the MSDK copy fixture

from .helpers import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_float"


@pytest.mark.slow
def test_digits_float_project_builds(sdk: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "digits_float"
    code, stdout, stderr = cli([EXAMPLE / "digits_float.onnx", "--device", "MAX78000",
                                "--calibration", EXAMPLE / "calibration.npy", "--softmax",
                                "-o", out, "--build", "--maxim-path", sdk])
    assert code == 0, stderr
    assert (out / "build" / "max78000.elf").is_file()
    assert "flash" in stdout.lower()


@pytest.mark.slow
def test_mobilenet_v2_on_max78002_builds(sdk: Path, tmp_path: Path) -> None:  # noqa: F811
    """MobileNetV2 0.35 (random weights, 3x32x32): the rewrites run before the device
    check on the float path, and the project builds and passes verify."""
    pytest.importorskip("torch")
    import numpy as np

    from .mobilenet import random_model, samples

    path = random_model(tmp_path / "mobilenet_v2.onnx", (3, 32, 32))
    cal = tmp_path / "cal.npy"
    np.save(cal, samples((3, 32, 32), 32))
    out = tmp_path / "proj"
    code, stdout, stderr = cli([path, "--device", "MAX78002", "--calibration", cal, "-o",
                                out, "--build", "--maxim-path", sdk, "--verify"])
    assert code == 0, stderr
    assert (out / "build" / "max78002.elf").is_file() and "PASS" in stdout
