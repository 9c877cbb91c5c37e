"""Energy hints (issue 29): the vendor tool's energy and performance notices, as named
warnings with the layer and a fix.

The converter's hints must name the layers the vendor tool names for the same sidecar
(vendor-gated, like tests/ai8xsim/test_vendor_projects.py); without the vendor tool the
hints are checked on cases whose layers are known to need them.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.ai8xsim.test_vendor_projects import PYTHON, SYNTH, vendor_tool  # noqa: F401
from tests.conftest import GOLDEN
from tests.golden import pipeline

# cases whose vendor notices cover both hints and none (checked against the vendor tool)
HINT_CASES = ("ai87-suite-depthwise17x5x7-move", "ai87-suite-depthwise1x1-move",
              "ai85-suite-conv1d-multilayer",
              "ai85-mnist", "ai87-kws20_v3_1")
_OURS = re.compile(r"^warning\[map\.energy-(channels|depthwise)\] layer (\d+) ", re.M)
_VENDORS = re.compile(r"Layer (\d+): (?:The input channel count|depth-wise convolution "
                      r"moves data)", re.M)


def _our_hints(name: str, tmp: Path) -> tuple[set[tuple[str, int]], str]:
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus absent")
    # not --quiet: the hints are warnings, which --quiet leaves out (issue 35)
    _, proc = pipeline.convert_case(name, tmp, sidecar=True, quiet=False)
    assert proc.returncode == 0, proc.stderr
    return {(kind, int(ll)) for kind, ll in _OURS.findall(proc.stderr)}, proc.stderr


def test_depthwise_moving_data_is_named_with_a_fix(tmp_path: Path) -> None:
    hints, stderr = _our_hints("ai87-suite-depthwise17x5x7-move", tmp_path)
    assert ("depthwise", 0) in hints
    assert "output_processor_map equal to processor_map" in stderr
    assert "0x000000000001ffff" in stderr  # the layer's input processors


@pytest.mark.parametrize("name", ["ai87-suite-depthwise17x5x7-move",
                                  "ai87-suite-depthwise1x1-move"])
def test_the_automatic_mapping_keeps_depthwise_data_in_place(name: str,
                                                             tmp_path: Path) -> None:
    """The cases whose own sidecars move a depthwise layer's data: mapped by onnx2ai8x
    the layer writes where it reads, and there is no hint."""
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus absent")
    _, proc = pipeline.convert_case(name, tmp_path, sidecar=False)
    assert proc.returncode == 0, proc.stderr
    assert "map.energy-depthwise" not in proc.stderr


def test_a_final_depthwise_layer_writes_where_it_reads(tmp_path: Path) -> None:
    """A depthwise layer whose output nobody reads is kept on its input processors
    (broadcast), not packed from processor 0: pinned by a partial sidecar to processors
    4-59, the last layer of a golden case writes there, with no hint, and the project
    passes its known-answer test on the virtual accelerator."""
    import subprocess
    import sys

    from ai8xsim.verify import execute, render
    from onnx2ai8x.convert import plan
    from onnx2ai8x.devices import MAX78002

    name = "ai87-suite-depthwise-quantpool-stream"
    if not (GOLDEN / name).is_dir():
        pytest.skip("golden corpus absent")
    model = pipeline.imported_model(name, tmp_path)
    pins = 0x0FFFFFFFFFFFFFF0
    sidecar = tmp_path / "pins.yaml"
    sidecar.write_text(f"arch: a\ndataset: b\nlayers:\n- {{}}\n- {{}}\n- processors: {pins:#x}\n")
    placed = plan(model, MAX78002, sidecar).placement.layers[2]
    assert placed.processor_map == placed.output_processor_map == pins
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(model), "--device",
                           "MAX78002", "--sidecar", str(sidecar), "-o", str(tmp_path / "p"),
                           "--sample-input", str(GOLDEN / name / "sample.npy")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "map.energy-depthwise" not in proc.stderr
    outcome = execute(tmp_path / "p")
    assert outcome.passed, render(outcome)


def test_hidden_layers_with_odd_channel_counts_are_named(tmp_path: Path) -> None:
    hints, stderr = _our_hints("ai85-suite-conv1d-multilayer", tmp_path)
    # its hidden layers 1-8 read 3 channels; layer 0 reads the input and is not named
    assert hints == {("channels", ll) for ll in range(1, 9)}
    assert "give the layer before it 4 output channels" in stderr


def test_a_network_without_waste_gets_no_hint(tmp_path: Path) -> None:
    hints, _ = _our_hints("ai85-mnist", tmp_path)
    assert hints == set()


@pytest.mark.parametrize("name", HINT_CASES)
def test_hints_name_the_vendors_layers(name: str, tmp_path: Path,
                                       vendor_tool) -> None:  # noqa: F811
    import json
    import os
    import subprocess

    case = json.loads((GOLDEN / name / "case.json").read_text())
    args = [a for a in case["vendor_args"] if a not in ("--verbose", "--display-checkpoint")]
    proc = subprocess.run(
        [str(PYTHON), "ai8xize.py", "--test-dir", str(tmp_path / "v"), "--prefix", "p",
         "--checkpoint-file", str(GOLDEN / name / "checkpoint.pth.tar"),
         "--config-file", str(GOLDEN / name / "network.yaml"),
         "--sample-input", str(GOLDEN / name / "sample.npy"), "--device", case["device"],
         "--no-version-check", "--overwrite", *args],
        cwd=SYNTH, env={**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-400:]
    vendor_layers = {int(ll) for ll in _VENDORS.findall(proc.stdout + proc.stderr)}
    (tmp_path / "o").mkdir()
    hints, _ = _our_hints(name, tmp_path / "o")
    assert {ll for _, ll in hints} == vendor_layers
