"""FIFO input without streaming: `convert --fifo` (or `--fast-fifo --riscv`) on a network
that has no streaming layer (the vendor tool allows it; seed 000, "FIFOs", "Fast FIFO").
Layer 0 takes its frame from the FIFOs, as a streaming first layer does, and writes to
data memory; the layers after it run as usual. verify runs such projects (issue 14)
instead of calling them not modelled, or failing them for words it did not deliver.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ai8xsim.machine import FAST_FIFO
from ai8xsim.verify import FAIL, PASS, execute, input_tensor, render

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
def memory_project(tmp_path_factory) -> Path:
    return _convert(tmp_path_factory.mktemp("memory") / "p")


# the FIFO options, and the FIFO stream the words must arrive in
KINDS = {"fifo": (("--fifo",), 0), "fast": (("--fast-fifo", "--riscv"), FAST_FIFO)}


@pytest.fixture(scope="module", params=sorted(KINDS))
def projects(request, tmp_path_factory, memory_project) -> tuple[Path, Path, int]:
    options, stream = KINDS[request.param]
    fifo = _convert(tmp_path_factory.mktemp(request.param) / "p", *options)
    return memory_project, fifo, stream


def test_fifo_project_passes(projects) -> None:
    _, fifo, stream = projects
    outcome = execute(fifo)
    assert outcome.verdict == PASS, render(outcome)
    assert list(outcome.machine.fifos) == [stream] and outcome.checked_words == 10


def test_layer_zero_reads_the_sample_from_the_fifo(projects) -> None:
    """The frame layer 0 took from the FIFO is the sample itself, and every layer writes
    what the same network loaded into data memory writes."""
    memory, fifo, _ = projects
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
    _, fifo, _ = projects
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
    # one channel: a word per pixel (HWC, pixel k in word k's low byte) or four pixels
    # per word (CHW, byte 0 first)
    words = list(re.finditer(r"0x[0-9a-f]{8}", text))
    per = flat.size // len(words)
    assert per in (1, 4) and len(words) * per == flat.size
    w, lane = divmod(k, per)
    value = int(words[w].group(0), 16)
    assert value >> 8 * lane & 0xFF == int(flat[k]) & 0xFF
    new = value & ~(0xFF << 8 * lane)
    data.write_text(f"{text[:words[w].start()]}0x{new:08x}{text[words[w].end():]}")
    assert execute(changed).verdict == FAIL


def _up_model(path: Path) -> None:
    """A float ONNX model: one 2x upsampling transposed convolution, 4 channels."""
    import onnx
    from onnx import TensorProto, helper

    w = np.random.default_rng(3).uniform(-0.5, 0.5, (4, 4, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3, 3],
                          strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])],
        "up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.reshape(-1).tolist())])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def test_transposed_first_layer_from_the_fifo(tmp_path: Path) -> None:
    """A transposed layer 0 reads its small frame from the FIFOs as from data memory
    (every other row and column of the frame its counters span): the FIFO project and
    the memory-loaded one of the same model write the same output. (The vendor tool's
    own --fifo projects of 1-D and transposed cases pass too: tests/ai8xsim/
    test_vendor_projects.py, opt-in.)"""
    path = tmp_path / "up.onnx"
    _up_model(path)
    calibration, sample = tmp_path / "cal.npy", tmp_path / "x.npy"
    rng = np.random.default_rng(4)
    np.save(calibration, rng.uniform(-1, 1, (8, 4, 8, 8)).astype(np.float32))
    np.save(sample, rng.integers(-128, 128, (4, 8, 8)))
    outcomes = []
    for name, options in (("memory", ()), ("fifo", ("--fifo",))):
        proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(path), "--device",
                               "MAX78000", "-o", str(tmp_path / name), "--quiet",
                               "--calibration", str(calibration), "--sample-input",
                               str(sample), *options],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        outcomes.append(execute(tmp_path / name))
    memory, fifo = outcomes
    assert memory.verdict == fifo.verdict == PASS, render(fifo)
    assert fifo.layers[0].regs.transposed and fifo.machine.fifos
    np.testing.assert_array_equal(fifo.layers[0].value, memory.layers[0].value)


def test_quad_fan_out_bit_without_the_quad_layout_fails(tmp_path: Path) -> None:
    """Quad fan-out (CTRL bit 31 with the fast FIFO) makes quadrant q compute every fourth
    output channel from its own kernels: a single fan-out project with only the bit set
    (its kernels all in quadrant 0) computes wrong channels and FAILs."""
    from ai8xsim.device import MAX78000

    fast = _convert(tmp_path / "p", "--fast-fifo", "--riscv")
    assert execute(fast).verdict == PASS
    ctl = MAX78000.ctl(0, MAX78000.reg_ctl)
    store = re.compile(rf"(\*\(\(volatile uint32_t \*\) 0x{ctl:08x}\) = )0x([0-9a-f]{{8}});")
    path = fast / "cnn.c"
    text, hits = store.subn(lambda m: f"{m.group(1)}0x{int(m.group(2), 16) | 1 << 31:08x};",
                            path.read_text())
    assert hits
    path.write_text(text)
    outcome = execute(fast)
    assert outcome.verdict == FAIL, render(outcome)


def test_quad_fan_out_computes_what_single_fan_out_does(tmp_path: Path) -> None:
    """--fast-fifo-quad: the first layer's kernels spread over the four quadrants, the
    CTRL bit set; the virtual accelerator's first layer gives the same values as with
    the single fan-out, and the known answer passes."""
    single = execute(_convert(tmp_path / "s", "--fast-fifo", "--riscv"))
    quad = execute(_convert(tmp_path / "q", "--fast-fifo-quad", "--riscv"))
    assert single.verdict == quad.verdict == PASS, render(quad)
    assert quad.layers[0].regs.quad and not single.layers[0].regs.quad
    np.testing.assert_array_equal(quad.layers[0].value, single.layers[0].value)


def test_odd_counts_of_a_transposed_layer_are_an_error(tmp_path: Path) -> None:
    """A transposed layer's counters span the zero-expanded frame (twice the stored
    one): an odd column count is a broken project, reported as ERROR, not a traceback."""
    path = tmp_path / "up.onnx"
    _up_model(path)
    calibration, sample = tmp_path / "cal.npy", tmp_path / "x.npy"
    rng = np.random.default_rng(5)
    np.save(calibration, rng.uniform(-1, 1, (8, 4, 8, 8)).astype(np.float32))
    np.save(sample, rng.integers(-128, 128, (4, 8, 8)))
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(path), "--device",
                           "MAX78000", "-o", str(tmp_path / "p"), "--quiet", "--calibration",
                           str(calibration), "--sample-input", str(sample)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    cnn = tmp_path / "p" / "cnn.c"
    columns = re.compile(r"(= )0x([0-9a-f]{8})(; // Columns)")
    text, hits = columns.subn(lambda m: f"{m.group(1)}0x{int(m.group(2), 16) - 1:08x}"
                                        f"{m.group(3)}", cnn.read_text(), count=1)
    assert hits == 1
    cnn.write_text(text)
    outcome = execute(tmp_path / "p")
    assert outcome.verdict == "ERROR" and "are even" in outcome.error, render(outcome)
