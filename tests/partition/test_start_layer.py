"""A CPU segment between accelerator layers resumes the accelerator at a later layer.
Seed 000: the MAX78002 "supports starting a network at any pre-programmed layer"; the
MAX78000 starts every run at layer 0 (the vendor tool's MAX_START_LAYER is 0 there), so
its second run would compute the first layers again over the CPU's result. Such a split
is refused on MAX78000 (partition.start-layer), and the hint — MAX78002 — is applied
here: the same model and command for MAX78002 convert and verify."""
from __future__ import annotations

from pathlib import Path

import pytest

from onnx2ai8x.devices import get_device
from tests.float_onnx.helpers import cli

from .test_between_shape import _export

pytest.importorskip("torch")


def test_start_layer_facts() -> None:
    assert get_device("MAX78000").max_start_layer == 0
    assert get_device("MAX78002").max_start_layer > 0


def test_between_runs_on_max78000_is_refused_and_the_hint_holds(tmp_path: Path) -> None:
    model, cal = _export(tmp_path, "")  # a Sigmoid between two convolutions
    code, _, stderr = cli([model, "--device", "MAX78000", "--calibration", cal,
                           "-o", tmp_path / "p78000", "--cpu-fallback"])
    assert code != 0 and not (tmp_path / "p78000").exists()
    assert "partition.start-layer" in stderr and "Traceback" not in stderr
    assert "--device MAX78002" in stderr
    # without --cpu-fallback the refusal does not propose a flag that cannot work
    code, _, stderr = cli([model, "--device", "MAX78000", "--calibration", cal,
                           "-o", tmp_path / "plain"])
    assert code != 0 and "--cpu-fallback" not in stderr, stderr
    # the hint applied
    project = tmp_path / "p78002"
    code, _, stderr = cli([model, "--device", "MAX78002", "--calibration", cal,
                           "-o", project, "--cpu-fallback"])
    assert code == 0, stderr
    rc, stdout, _ = cli(["verify", project])
    assert rc == 0 and stdout.startswith("PASS") and "CPU segment" in stdout, stdout
