"""`onnx2ai8x verify` on the digits example: PASS, FAIL with the word and the layer,
--stop-after dumps, --model localisation, convert --verify, usage errors."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x.devices import MAX78000

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("digits") / "digits"
    proc = _cli(str(EXAMPLE / "digits.onnx"), "--device", "MAX78000", "-o", str(out),
                "--sample-input", str(EXAMPLE / "sample.npy"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out


def _copy(project: Path, tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "copy"
    shutil.copytree(project, target)
    return target


def test_digits_project_passes(project: Path) -> None:
    proc = _cli("verify", str(project))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("PASS: MAX78000, 4 layers, 10 known-answer words equal")


def test_changed_known_answer_fails_with_address_and_layer(project: Path,
                                                           tmp_path: Path) -> None:
    bad = _copy(project, tmp_path)
    text = (bad / "sampleoutput.h").read_text()
    # the first output word of the table (after address, mask, count)
    m = re.search(r"0x50400000, 0xffffffff, 4, \\\n(0x[0-9a-f]{8})", text)
    assert m, text[:400]
    word = int(m.group(1), 16)
    text = text[:m.start(1)] + f"0x{word ^ 1:08x}" + text[m.end(1):]
    (bad / "sampleoutput.h").write_text(text)
    proc = _cli("verify", str(bad))
    assert proc.returncode == 1
    assert "FAIL: MAX78000, 1 of 10 known-answer words differ" in proc.stdout
    assert f"address 0x50400000 (written by layer 3): expected 0x{word ^ 1:08x}, " \
           f"actual 0x{word:08x}" in proc.stdout


def _reference_layers(sample: np.ndarray) -> list[np.ndarray]:
    from custom_ops.numpy_ref import run_network
    from onnx2ai8x.convert import plan

    net = plan(EXAMPLE / "digits.onnx", MAX78000, None).network
    return run_network(net, sample.reshape(net.input_shape),
                       outputs=list(range(len(net.layers))))


def test_stop_after_writes_the_layer_as_in_memory_and_as_tensor(project: Path,
                                                                tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    proc = _cli("verify", str(project), "--stop-after", "1", "-o", str(dump))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tensor = np.load(dump / "layer1.npy")
    ref = _reference_layers(np.load(EXAMPLE / "sample.npy"))[1]
    np.testing.assert_array_equal(tensor, ref)
    lines = (dump / "layer1.memory.txt").read_text().splitlines()
    # 32 channels x 4x4 pixels: 16 pixels in each of 8 memories
    assert len(lines) == 128
    addr, word = (int(x, 16) for x in lines[0].split(": "))
    # conv2's write pointer 0x0000a000: data memory 5 (processors 20-23), offset 0
    assert addr == 0x50808000
    assert word == sum((int(ref[c, 0, 0]) & 0xFF) << 8 * c for c in range(4))


def test_model_names_the_first_bad_layer(project: Path, tmp_path: Path) -> None:
    """A changed bias byte of conv2 (layer 1): the reference, run layer by layer, shows
    layer 1 as the first whose output differs."""
    bad = _copy(project, tmp_path)
    text = (bad / "weights.h").read_text()
    m = re.search(r"#define BIAS_0 \{ \\\n(0x[0-9a-f]{2})", text)
    assert m, text[-800:]
    byte = int(m.group(1), 16)
    text = text[:m.start(1)] + f"0x{(byte + 0x40) & 0xFF:02x}" + text[m.end(1):]
    (bad / "weights.h").write_text(text)
    proc = _cli("verify", str(bad), "--model", str(EXAMPLE / "digits.onnx"))
    assert proc.returncode == 1
    found = re.search(r"first bad layer: (\d+): address (0x[0-9a-f]{8})", proc.stdout)
    assert found, proc.stdout
    assert found.group(1) == "1"


def test_convert_verify(tmp_path: Path) -> None:
    out = tmp_path / "digits"
    proc = _cli(str(EXAMPLE / "digits.onnx"), "--device", "MAX78000", "-o", str(out),
                "--verify")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS: MAX78000" in proc.stdout


def test_usage_errors(tmp_path: Path) -> None:
    proc = _cli("verify", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "project directory not found" in proc.stderr
    proc = _cli("verify", str(tmp_path))
    assert proc.returncode == 2 and "not a generated C project" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("options", [("--no-mexpress",), ("--no-mexpress", "--zero-sram"),
                                     ("--compact-weights",), ("--new-kernel-loader",)])
def test_kernel_loader_options_pass(options: tuple[str, ...], tmp_path: Path) -> None:
    """Every kernel loader the converter can write gets the kernels where the layers read
    them. (--no-mexpress once wrote the express loader's packed bytes to the plain
    16-byte slots: every kernel was wrong and the known answer failed.)"""
    out = tmp_path / "digits"
    proc = _cli(str(EXAMPLE / "digits.onnx"), "--device", "MAX78000", "-o", str(out),
                "--sample-input", str(EXAMPLE / "sample.npy"), "--verify", *options)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS: MAX78000" in proc.stdout


def test_plain_kernel_stream_has_a_slot_per_kernel(tmp_path: Path) -> None:
    """Without the express loader each kernel is four words at its own 16-byte slot:
    byte 0 alone in word 0, bytes 1-8 in words 1-2, and a zero word (seed 000, kernel
    memory; the vendor's memcpy_96to128 writes the same)."""
    out = tmp_path / "digits"
    proc = _cli(str(EXAMPLE / "digits.onnx"), "--device", "MAX78000", "-o", str(out),
                "--no-mexpress", "--quiet")
    assert proc.returncode == 0, proc.stderr
    text = (out / "weights.h").read_text()
    body = text[text.index("#define KERNELS"):]
    numbers = [int(v, 0) for v in re.findall(r"0x[0-9a-f]+|\b\d+\b", body)]
    i = runs = 0
    while numbers[i] != 0:
        addr, n = numbers[i], numbers[i + 1]
        words = numbers[i + 2:i + 2 + n]
        assert addr % 16 == 0 and n % 4 == 0, (hex(addr), n)
        assert all(w <= 0xFF for w in words[0::4]) and not any(words[3::4])
        runs += 1
        i += 2 + n
    assert runs > 0
