"""FIFO input without streaming: `convert --fifo` on a network that has no streaming
layer (the vendor tool allows it; seed 000, "FIFOs"). Layer 0 takes its frame from the
FIFOs, as a streaming first layer does, and writes to data memory; the layers after it
run as usual. verify runs such projects (issue 14) instead of calling them not modelled.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ai8xsim.verify import FAIL, NOT_MODELLED, PASS, execute, input_tensor, render

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits"


def _convert(out: Path, *options: str) -> Path:
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(EXAMPLE / "digits.onnx"),
                           "--device", "MAX78000", "-o", str(out), "--sample-input",
                           str(EXAMPLE / "sample.npy"), "--quiet", *options],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("fifo")
    return _convert(tmp / "memory"), _convert(tmp / "fifo", "--fifo")


def test_fifo_project_passes(projects) -> None:
    _, fifo = projects
    outcome = execute(fifo)
    assert outcome.verdict == PASS, render(outcome)
    assert outcome.machine.fifos and outcome.checked_words == 10


def test_layer_zero_reads_the_sample_from_the_fifo(projects) -> None:
    """The frame layer 0 took from the FIFO is the sample itself, and every layer writes
    what the same network loaded into data memory writes."""
    memory, fifo = projects
    by_fifo, by_memory = execute(fifo), execute(memory)
    sample = np.load(EXAMPLE / "sample.npy")
    got = input_tensor(by_fifo)
    assert got is not None
    np.testing.assert_array_equal(got[:sample.shape[0]], sample.reshape(got[:1].shape))
    assert len(by_fifo.layers) == len(by_memory.layers) == 4
    for a, b in zip(by_fifo.layers, by_memory.layers, strict=True):
        np.testing.assert_array_equal(a.value, b.value)


def _run_model(sample: np.ndarray, tmp: Path) -> np.ndarray:
    """The digits model's output on `sample` (the reference, `onnx2ai8x run`)."""
    x, y = tmp / "x.npy", tmp / "y.npy"
    np.save(x, sample)
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", "run",
                           str(EXAMPLE / "digits.onnx"), "--input", str(x), "-o", str(y),
                           "--overwrite"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return np.load(y)


def test_a_changed_fifo_word_fails(projects, tmp_path: Path) -> None:
    """The input word of the sample's largest pixel, fed through the FIFO, set to zero:
    the reference says the network's output changes with it, so verify must fail."""
    _, fifo = projects
    sample = np.load(EXAMPLE / "sample.npy")
    flat = sample.reshape(-1)
    k = int(np.argmax(np.abs(flat)))
    zeroed = flat.copy()
    zeroed[k] = 0
    assert not np.array_equal(_run_model(sample, tmp_path),
                              _run_model(zeroed.reshape(sample.shape), tmp_path))
    changed = tmp_path / "changed"
    shutil.copytree(fifo, changed)
    data = changed / "sampledata.h"
    text = data.read_text()
    # one channel, HWC: FIFO word k holds pixel k in its low byte
    words = list(re.finditer(r"0x[0-9a-f]{8}", text))
    assert len(words) == flat.size
    assert int(words[k].group(0), 16) & 0xFF == int(flat[k]) & 0xFF
    data.write_text(text[:words[k].start()] + "0x00000000" + text[words[k].end():])
    assert execute(changed).verdict == FAIL


def test_transposed_first_layer_from_the_fifo_is_not_modelled(tmp_path: Path) -> None:
    """A transposed (or 1-D, or element-wise) layer 0 fed from the FIFOs is outside the
    model: NOT MODELLED, never a verdict it cannot vouch for."""
    import onnx
    from onnx import TensorProto, helper

    w = np.random.default_rng(3).integers(-64, 64, (4, 4, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3, 3],
                          strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])],
        "up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.reshape(-1).tolist())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "up.onnx"
    onnx.save(model, path)
    calibration, sample = tmp_path / "cal.npy", tmp_path / "x.npy"
    rng = np.random.default_rng(4)
    np.save(calibration, rng.uniform(-1, 1, (8, 4, 8, 8)).astype(np.float32))
    np.save(sample, rng.integers(-128, 128, (4, 8, 8)))
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(path), "--device",
                           "MAX78000", "-o", str(tmp_path / "p"), "--quiet", "--fifo",
                           "--calibration", str(calibration), "--sample-input", str(sample)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    outcome = execute(tmp_path / "p")
    assert outcome.verdict == NOT_MODELLED, render(outcome)
    assert "transposed" in outcome.unmodelled
