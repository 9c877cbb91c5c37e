"""A full sidecar with more entries than the model has hardware layers is refused with a
message naming both counts (it used to stop with an IndexError in kernel allocation)."""
from __future__ import annotations

from pathlib import Path

import pytest

from onnx2ai8x.convert import plan
from onnx2ai8x.devices import MAX78000
from onnx2ai8x.errors import Ai8xError
from tests.map.test_outputs import detector


def test_extra_sidecar_layer_is_a_clear_error(tmp_path: Path) -> None:
    from custom_ops.builder import build_model

    model = tmp_path / "detector.onnx"
    model.write_bytes(build_model(detector()).SerializeToString())
    written = plan(model, MAX78000, None).sidecar_text
    extra = ("  - processors: 0x00000000000000ff\n    output_processors: 0x00000000000000ff\n"
             "    out_offset: 0x4000\n    operation: passthrough\n")
    sidecar = tmp_path / "extra.yaml"
    sidecar.write_text(written.rstrip("\n") + "\n" + extra)
    with pytest.raises(Ai8xError) as info:
        plan(model, MAX78000, sidecar)
    d = info.value.diagnostics[0]
    assert d.code == "sidecar.layers"
    assert "6 layers" in d.message and "5 hardware layers" in d.message
    # the written sidecar itself still applies
    same = tmp_path / "same.yaml"
    same.write_text(written)
    # (its header now says where the keys came from: issue 25)
    assert plan(model, MAX78000, same).sidecar_text == written.replace(
        "# Every mapping key below was chosen by onnx2ai8x; edit and pass back with "
        "--sidecar.", "# Mapping keys given in same.yaml are kept (checked by onnx2ai8x), "
        "the rest were chosen by onnx2ai8x; edit and pass back with --sidecar.")
