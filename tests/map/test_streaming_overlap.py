"""The output of the last streaming layer must stay clear of the streaming input buffers
(map.memory_check.streaming_output_clear), for automatic mappings and for sidecars."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from onnx2ai8x.map.memory_check import (
    _stream_buffers,
    check_sidecar_placement,
    stream_count,
    streaming_output_clear,
)
from tests.conftest import GOLDEN, golden_params
from tests.emit.synthetic import one_conv
from tests.map.examined import examined

CASE = "ai85-suite-fifostream-32"  # three streaming layers, the last one is the output


def _moved(placement, ll: int, out_offset: int):
    layers = list(placement.layers)
    layers[ll] = dataclasses.replace(layers[ll], out_offset=out_offset)
    return dataclasses.replace(placement, layers=tuple(layers))


def test_synthetic_output_over_the_input_buffer() -> None:
    pl = one_conv(streaming=True)
    assert streaming_output_clear(examined(pl)) == []  # output at 0x2000, input at 0
    (_, (start, end), _), = _stream_buffers(examined(pl))
    bad = _moved(pl, 0, end)  # the vendor's ranges include both ends: touching clashes
    diags = streaming_output_clear(examined(bad))
    assert [d.code for d in diags] == ["map.streaming-overlap"]
    assert "conv" in diags[0].where and f"{start:#06x}-{end:#06x}" in diags[0].message
    assert streaming_output_clear(examined(_moved(pl, 0, end + 4))) == []


def test_the_rule_is_named_and_explains_itself() -> None:
    doc = " ".join((streaming_output_clear.__doc__ or "").split())
    assert "circular buffer" in doc and "Streaming Mode" in doc


@pytest.mark.parametrize("name", golden_params())
def test_vendor_accepted_sidecars_pass(name: str) -> None:
    # Every golden sidecar went through the vendor tool, which refuses such overlaps.
    if not (GOLDEN / name / "case.json").is_file():
        pytest.skip("golden corpus ../shared/golden is absent")
    pytest.importorskip("torch")
    from tests.golden.case_placement import case_placement

    placement = case_placement(GOLDEN / name)
    assert check_sidecar_placement(examined(placement)) == []


def _bad_sidecar(tmp_path: Path) -> tuple[Path, int, int]:
    """The golden case's sidecar with the last layer's output moved into the middle of
    the second layer's streaming buffer; returns it, that buffer's start and end."""
    pytest.importorskip("torch")
    from tests.golden.case_placement import case_placement

    placement = case_placement(GOLDEN / CASE)
    assert stream_count(placement) == len(placement.layers) == 3
    _, (start, end), _ = _stream_buffers(examined(placement))[1]
    data = yaml.safe_load((GOLDEN / CASE / "network.yaml").read_text())
    data["layers"][2]["out_offset"] = (start + end) // 2 & ~3
    path = tmp_path / "overlap.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, start, end


def test_sidecar_output_over_a_streaming_buffer_is_refused(tmp_path: Path) -> None:
    if not (GOLDEN / CASE / "case.json").is_file():
        pytest.skip("golden corpus ../shared/golden is absent")
    from tests.golden import pipeline

    sidecar, start, end = _bad_sidecar(tmp_path)
    model = pipeline.imported_model(CASE, tmp_path)
    out = tmp_path / "project"
    done = pipeline.convert(model, "MAX78000", out, "--sidecar", str(sidecar), "--fifo")
    assert done.returncode == 1, done.stderr
    assert "map.streaming-overlap" in done.stderr and "overlap.yaml" in done.stderr
    assert f"{start:#06x}-{end:#06x}" in done.stderr  # the buffer's addresses
    assert "`out_offset` of layer" in done.stderr and f"{end + 4:#06x}" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()
    # the fix the message names clears it
    data = yaml.safe_load(sidecar.read_text())
    data["layers"][2]["out_offset"] = end + 4
    sidecar.write_text(yaml.safe_dump(data, sort_keys=False))
    again = pipeline.convert(model, "MAX78000", out, "--sidecar", str(sidecar), "--fifo")
    assert "map.streaming-overlap" not in again.stderr


def test_the_vendor_tool_refuses_the_same_sidecar(tmp_path: Path) -> None:
    root = os.environ.get("AI8X_SYNTHESIS")
    if not root or not (Path(root) / "ai8xize.py").is_file():
        pytest.skip("vendor tool absent: set AI8X_SYNTHESIS (and AI8X_SYNTHESIS_PYTHON)")
    if not (GOLDEN / CASE / "case.json").is_file():
        pytest.skip("golden corpus ../shared/golden is absent")
    sidecar, _, _ = _bad_sidecar(tmp_path)
    python = os.environ.get("AI8X_SYNTHESIS_PYTHON", sys.executable)
    done = subprocess.run([python, "ai8xize.py", "--test-dir", str(tmp_path / "v"), "--prefix",
                           "p", "--checkpoint-file", str(GOLDEN / CASE / "checkpoint.pth.tar"),
                           "--config-file", str(sidecar), "--device", "MAX78000",
                           "--sample-input", str(GOLDEN / CASE / "sample.npy"), "--fifo",
                           "--no-version-check", "--overwrite"], cwd=root,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode != 0
    assert "overlaps streaming buffer" in done.stdout + done.stderr
