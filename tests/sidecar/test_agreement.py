"""A full sidecar that contradicts the model: a warning per layer, and the model is followed.

The vendor's ai85-autoencoder.yaml says `activate: ReLU` on layer 3, whose model layer is
a plain Linear; the vendor's tool (sidecar only) applies the ReLU, onnx2ai8x (sidecar for
the placement, model for the computation) does not. The warning names the layer, both
values and which one is followed.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GOLDEN
from tests.golden import pipeline

pytestmark = pytest.mark.skipif(not GOLDEN.is_dir(), reason="golden corpus is absent")

CASE = "ai85-mnist"  # layers 0-3 conv2d with ReLU, layer 4 linear without activation


def _convert(model: Path, sidecar: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "onnx2ai8x.cli", str(model), "--device", "MAX78000",
         "--sidecar", str(sidecar), "-o", str(out),
         "--sample-input", str(GOLDEN / CASE / "sample.npy")],
        capture_output=True, text=True, timeout=300)


def test_contradicting_sidecar_warns_and_the_model_is_followed(tmp_path: Path) -> None:
    model = pipeline.imported_model(CASE, tmp_path)
    good = GOLDEN / CASE / "network.yaml"
    text = good.read_text()
    # layer 0 loses its ReLU, layer 4 (the linear layer, `activate: None`) gains one
    bad_text = text.replace("  - pad: 1\n    activate: ReLU\n", "  - pad: 1\n", 1)
    bad_text = bad_text.replace("activate: None", "activate: ReLU")
    assert bad_text.count("activate: ReLU") == 4
    bad = tmp_path / "bad.yaml"
    bad.write_text(bad_text)

    plain = _convert(model, good, tmp_path / "good")
    assert plain.returncode == 0 and plain.stderr == "", plain.stderr
    warned = _convert(model, bad, tmp_path / "bad")
    assert warned.returncode == 0, warned.stderr
    lines = [ln for ln in warned.stderr.splitlines() if ln.startswith("warning[")]
    assert len(lines) == 2, warned.stderr
    # at the line of layer 0's entry (its `activate` was removed: issue 25 names lines)
    entry_line = bad_text.splitlines().index("  - pad: 1") + 1
    assert lines[0].startswith(f"warning[sidecar.contradicts-model] {bad}:{entry_line}: "
                               "layer 0, `activate`: the sidecar gives layer 0 no "
                               "activation, but the model's layer `layer0` (conv2d) applies "
                               "ReLU; onnx2ai8x follows the model")
    assert "the model's layer `layer4` (linear) applies no activation" in lines[1]
    assert "the sidecar gives layer 4 `activate: ReLU`" in lines[1]
    assert "vendor's tool, which reads only the sidecar, would apply ReLU" in lines[1]
    # followed: the project is the one the agreeing sidecar gives, byte for byte
    for name in ("cnn.c", "weights.h", "sampledata.h", "sampleoutput.h", "main.c"):
        assert (tmp_path / "bad" / name).read_bytes() == \
            (tmp_path / "good" / name).read_bytes(), name


def test_vendor_autoencoder_sidecar(tmp_path: Path) -> None:
    """The vendor's own example of the contradiction (needs the vendor repositories)."""
    from onnx2ai8x.convert import plan
    from onnx2ai8x.devices import get_device
    from tests.map import vendor_zoo as vz
    from tests.map.test_vendor_zoo_automap import export

    if not (vz.available() and vz.available(vz.SYNTHESIS_MIRROR)):
        pytest.skip("the vendor training/synthesis mirrors are absent")
    arch = next(a for a in vz.architectures() if a.id == "ai85net-autoencoder:ai85autoencoder")
    model = export(arch, tmp_path)
    sidecar = tmp_path / "ai85-autoencoder.yaml"
    sidecar.write_text(vz.show("networks/ai85-autoencoder.yaml", vz.SYNTHESIS_MIRROR))
    warnings = plan(model, get_device(arch.device), sidecar).warnings
    assert len(warnings) == 1, warnings
    assert "layer 3" in warnings[0] and "`activate: ReLU`" in warnings[0]
    assert "(linear) applies no activation; onnx2ai8x follows the model" in warnings[0]
