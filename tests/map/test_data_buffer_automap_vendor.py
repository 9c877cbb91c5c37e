"""Vendor differential for the automatically mapped data buffer: the vendor's action-
recognition network (ai85actiontcn, with a rolling data buffer) imported from its own
sidecar and checkpoint, mapped again without a sidecar, and the sidecar we write for
that mapping fed to the vendor tool with the same checkpoint and sample. The vendor's
known answer (sampleoutput.h) must equal our reference (the model run on onnxruntime
with the ai8x kernels), on both devices, with only the options the written sidecar's
header names.

Needs the vendor tool (ONNX2AI8X_VENDOR_SYNTH, ONNX2AI8X_VENDOR_PYTHON) and the model's
inputs (ONNX2AI8X_TCN_DIR: ckpt.pth.tar, sample.npy, kinetics.yaml, the vendor's
networks/ai85-kinetics-actiontcn.yaml; skips without them); the vendor run only with
--golden-all or ONNX2AI8X_VENDOR_PROJECTS set. Also: the automatic placement's cycle
estimate is no worse than the vendor's sidecar's on the same model.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import custom_ops
from onnx2ai8x.convert import plan
from onnx2ai8x.devices import get_device

SYNTH = Path(os.environ.get("ONNX2AI8X_VENDOR_SYNTH", "/tmp/vendor/synth"))
PYTHON = Path(os.environ.get("ONNX2AI8X_VENDOR_PYTHON", "/tmp/vendor/venv/bin/python"))
TCN = Path(os.environ.get("ONNX2AI8X_TCN_DIR", "/tmp/tcn"))
INPUTS = ("ckpt.pth.tar", "sample.npy", "kinetics.yaml")


def implied_options(sidecar_text: str) -> list[str]:
    """The command-line options a written sidecar's header names (`#   --flag  (why)`)."""
    head = sidecar_text.split("\narch:")[0]
    return re.findall(r"^#\s+(--[a-z0-9-]+)\s", head, flags=re.M)


def known_answer(header: Path) -> list[int]:
    """The values of the vendor's sampleoutput.h: runs of (address, mask, count, values),
    in the order the file lists them (for a 1x1 output, the channel order)."""
    words = [int(w, 16) for w in re.findall(r"0x[0-9a-fA-F]+", header.read_text())]
    values, i = [], 0
    while i + 2 < len(words) and words[i]:
        count = words[i + 2]
        values += [w - (1 << 32) if w >> 31 else w for w in words[i + 3:i + 3 + count]]
        i += 3 + count
    return values


def test_implied_options_read_from_the_header() -> None:
    text = "---\n# x\n#   --zero-sram  (why)\n#   --overlap-data  (why)\narch: a\n"
    assert implied_options(text) == ["--zero-sram", "--overlap-data"]


@pytest.fixture(scope="module")
def tcn_model(tmp_path_factory) -> Path:
    """The vendor's actiontcn imported from its sidecar and checkpoint (ai8x-ONNX)."""
    if not all((TCN / f).is_file() for f in INPUTS):
        pytest.skip(f"actiontcn inputs are absent ({TCN}: {', '.join(INPUTS)})")
    from onnx2ai8x.api import import_izer

    out = tmp_path_factory.mktemp("tcn") / "imp.onnx"
    import_izer(TCN / "kinetics.yaml", TCN / "ckpt.pth.tar", get_device("MAX78000"),
                sample=TCN / "sample.npy", output=out)
    return out


@pytest.fixture
def vendor_tool(request: pytest.FixtureRequest) -> None:
    if not (request.config.getoption("--golden-all")
            or os.environ.get("ONNX2AI8X_VENDOR_PROJECTS")):
        pytest.skip("vendor differential: run with --golden-all or ONNX2AI8X_VENDOR_PROJECTS=1")
    if not (SYNTH / "ai8xize.py").is_file() or not PYTHON.is_file():
        pytest.skip(f"vendor synthesis tool is absent ({SYNTH}, {PYTHON})")


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
def test_cycles_no_worse_than_the_vendor_sidecar(device: str, tcn_model: Path) -> None:
    """The automatic placement's estimate against the vendor's hand-written sidecar for
    the same model (the one it was imported from)."""
    ours = plan(tcn_model, get_device(device), None)
    theirs = plan(tcn_model, get_device(device), TCN / "kinetics.yaml")
    assert sum(ours.cycles) <= sum(theirs.cycles), (sum(ours.cycles), sum(theirs.cycles))


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
def test_written_sidecar_gives_the_vendor_our_answer(device: str, tcn_model: Path,
                                                     vendor_tool: None,
                                                     tmp_path: Path) -> None:
    p = plan(tcn_model, get_device(device), None)
    assert p.placement.data_buffer is not None
    yaml_path = tmp_path / "auto.yaml"
    yaml_path.write_text(p.sidecar_text)
    options = implied_options(p.sidecar_text)
    assert {"--zero-sram", "--overlap-data"} <= set(options)
    run = subprocess.run(
        [str(PYTHON), "ai8xize.py", "--test-dir", str(tmp_path / "v"), "--prefix", "p",
         "--checkpoint-file", str(TCN / "ckpt.pth.tar"), "--config-file", str(yaml_path),
         "--device", device, "--sample-input", str(TCN / "sample.npy"),
         "--no-version-check", "--overwrite", *options],
        cwd=SYNTH, capture_output=True, text=True, timeout=1800,
        env={**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    theirs = known_answer(tmp_path / "v" / "p" / "sampleoutput.h")
    (ours, _state) = custom_ops.run(tcn_model, np.load(TCN / "sample.npy"))
    assert theirs == [int(v) for v in ours.ravel()]
