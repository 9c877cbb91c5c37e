"""import-izer known-answer test: the imported ONNX computes what the accelerator writes.

For each golden case: import network.yaml + checkpoint.pth.tar, run sample.npy through
the ai8x onnxruntime session, lay the output layers out in data memory as the
accelerator does, and compare with `expected_output` of expected.json.gz.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import GOLDEN, golden_params
from tests.golden.pipeline import stated_order, stated_order_of

pytest.importorskip("torch")


def checked_layers(name: str | Path, resolved) -> list:
    """The layers the vendor's known answer checks: the output layers along the layer
    order the sidecar states (`simulated_sequence`, else `next_sequence`), and the layer
    where that order stops (seed 004). `name`: a golden case, or a sidecar's path."""
    order = stated_order_of(name) if isinstance(name, Path) else stated_order(name)
    return [resolved.layers[ll] for ll in order
            if resolved.layers[ll].output_layer or ll == order[-1]]


# Data memory geometry (vendor izer/tornadocnn.py): base of data SRAM, distance between
# processor groups, and 32-bit words per memory instance (one instance per 4 processors).
MEMORY = {
    "MAX78000": {"sram": 0x50400000, "group": 0x400000, "instance_words": 2048},
    "MAX78002": {"sram": 0x51800000, "group": 0x1000000, "instance_words": 8192},
}
P_SHARED = 4
P_NUMPRO = 16
MAX_PROC = 64


def _passes(channels: int) -> tuple[int, int]:
    """(passes, processors per pass) for `channels` output channels."""
    passes = (channels + MAX_PROC - 1) // MAX_PROC
    per_pass = (channels + passes - 1) // passes
    if channels > MAX_PROC:
        per_pass = min((per_pass + P_SHARED - 1) & ~(P_SHARED - 1), MAX_PROC)
    return passes, per_pass


def layout_output(values: np.ndarray, device: str, out_offset: int, processor_map: int,
                  output_width: int, write_gap: int) -> dict[int, int]:
    """Memory words {address: value} holding `values` (C, H, W) as the accelerator writes.

    HWC: per pixel, the channels of one pass go to the enabled processors in order, four
    processors share one 32-bit word (one byte each); with 32-bit output each channel
    takes a whole word. Further passes (channels beyond 64) follow in the next words.
    """
    mem = MEMORY[device]
    chans, height, width = values.shape
    passes, per_pass = _passes(chans)
    out_size = output_width // 8
    first = (processor_map & -processor_map).bit_length() - 1
    start = first & ~(P_SHARED - 1)
    words: dict[int, int] = {}
    for pixel in range(height * width):
        row, col = divmod(pixel, width)
        c = 0
        quad_proc = start
        remaining = processor_map >> start
        while c < chans:
            if c % per_pass == 0:
                quad_proc, remaining = start, processor_map >> start
            this_pass = c // per_pass
            slots = []
            for _ in range(P_SHARED):
                if remaining & 1:
                    slots.append(c if c < chans else None)
                    c += 1
                else:
                    slots.append(None)
                remaining >>= 1
            base = mem["sram"] + out_offset + 4 * (
                ((quad_proc % P_NUMPRO) * mem["instance_words"]
                 | (quad_proc // P_NUMPRO) * mem["group"] // 4)
                + (pixel * passes * out_size + this_pass * out_size) * (write_gap + 1))
            if out_size == 1:
                word = 0
                for i, ch in enumerate(slots):
                    if ch is not None:
                        word |= (int(values[ch, row, col]) & 0xFF) << (8 * i)
                words[base] = word
            else:
                used = [ch for ch in slots if ch is not None]
                for i, ch in enumerate(used):
                    words[base + 4 * i] = int(values[ch, row, col]) & 0xFFFFFFFF
            quad_proc += P_SHARED
    return words


def _compare(expected_groups, words: dict[int, int]) -> list[str]:
    problems = []
    for address, mask, values in expected_groups:
        for i, want in enumerate(values):
            addr = address + 4 * i
            got = words.get(addr)
            if got is None:
                problems.append(f"{addr:#x}: not written by any output layer")
            elif (got ^ want) & mask:
                problems.append(f"{addr:#x}: got {got & mask:#010x}, want {want & mask:#010x}")
            if len(problems) > 8:
                return problems
    return problems


@pytest.mark.parametrize("name", golden_params())
def test_import_matches_expected_output(name, tmp_path):
    case_dir = GOLDEN / name
    if not (case_dir / "case.json").is_file():
        pytest.skip("golden corpus absent")
    pytest.importorskip("custom_ops.builder", reason="custom_ops.builder not available yet")
    import custom_ops
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.runner import fit_to_input
    from onnx2ai8x.sidecar.izer import build_onnx, resolve_project

    case = json.loads((case_dir / "case.json").read_text())
    device = case["device"]
    resolved = resolve_project(case_dir / "network.yaml", case_dir / "checkpoint.pth.tar",
                               get_device(device), case_dir / "sample.npy")
    model = build_onnx(resolved)
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    session = custom_ops.session(path)
    sample = np.load(case_dir / "sample.npy")
    inp = session.get_inputs()[0]
    x = fit_to_input(sample, len(inp.shape), str(case_dir / "sample.npy"))
    outputs = session.run(None, {inp.name: x})

    out_layers = checked_layers(name, resolved)
    assert len(outputs) == len(out_layers)
    words: dict[int, int] = {}
    for lay, out in zip(out_layers, outputs, strict=True):
        h, w = lay.output_dim
        values = np.asarray(out, dtype=np.int64).reshape(lay.output_channels, h, w)
        words.update(layout_output(values, device, lay.out_offset,
                                   lay.output_processor_map, lay.output_width,
                                   lay.write_gap))
    expected = json.load(gzip.open(case_dir / "expected.json.gz"))["expected_output"]
    problems = _compare(expected, words)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", golden_params())
def test_output_layout_covers_expected_addresses(name):
    """The layout (without the model) writes exactly the words the vendor checks."""
    case_dir = GOLDEN / name
    if not (case_dir / "case.json").is_file():
        pytest.skip("golden corpus absent")
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.sidecar.izer import resolve_project

    case = json.loads((case_dir / "case.json").read_text())
    resolved = resolve_project(case_dir / "network.yaml", case_dir / "checkpoint.pth.tar",
                               get_device(case["device"]), case_dir / "sample.npy")
    words: dict[int, int] = {}
    for lay in checked_layers(name, resolved):
        zeros = np.zeros((lay.output_channels, *lay.output_dim), dtype=np.int64)
        words.update(layout_output(zeros, case["device"], lay.out_offset,
                                   lay.output_processor_map, lay.output_width,
                                   lay.write_gap))
    expected = json.load(gzip.open(case_dir / "expected.json.gz"))["expected_output"]
    addresses = {a + 4 * i for a, _, values in expected for i in range(len(values))}
    assert addresses == set(words)


def test_layout_of_a_known_word():
    # 5 channels on processors 4..8 (map 0x1f0), 1x1 pixel, MAX78000, offset 0x100:
    # channels 0-3 in the word of processors 4-7, channel 4 in the word of processors 8-11
    values = np.arange(1, 6).reshape(5, 1, 1)
    words = layout_output(values, "MAX78000", 0x100, 0x1F0, 8, 0)
    assert words == {0x50400000 + 0x8000 + 0x100: 0x04030201,
                     0x50400000 + 0x10000 + 0x100: 0x05}
