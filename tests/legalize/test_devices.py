"""Device records: names, and the sizes the vendor guide states in its own words."""
from __future__ import annotations

import dataclasses

import pytest

from onnx2ai8x.devices import MAX78000, MAX78002, Device, device_names, get_device
from onnx2ai8x.errors import EXIT_USAGE, Ai8xError


@pytest.mark.parametrize("name,want", [
    ("MAX78000", "MAX78000"), ("max78000", "MAX78000"), ("AI85", "MAX78000"),
    ("85", "MAX78000"), (85, "MAX78000"), ("MAX78002", "MAX78002"), ("ai87", "MAX78002"),
    ("87", "MAX78002"), (" MAX78002 ", "MAX78002"),
])
def test_get_device_names(name, want):
    assert get_device(name).name == want


def test_get_device_accepts_a_device():
    assert get_device(MAX78002) is MAX78002


def test_unknown_device_lists_valid_names():
    with pytest.raises(Ai8xError) as info:
        get_device("MAX78001")
    err = info.value
    assert err.code == "usage.device" and err.exit_code == EXIT_USAGE
    hint = err.diagnostics[0].hint
    for name in ("MAX78000", "MAX78002", "AI85", "AI87", "85", "87"):
        assert name in hint
    assert set(device_names()) >= {"MAX78000", "MAX78002", "AI85", "AI87", "85", "87"}


def test_devices_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        MAX78000.max_layers = 64  # type: ignore[misc]
    assert isinstance(MAX78000, Device)


def test_sizes_match_the_guide():
    # "MAX78000 and MAX78002 Hardware and Resources" / the limitation chapters.
    assert MAX78000.kernel_memory_bytes == 432 * 1024
    assert MAX78002.kernel_memory_bytes == 2340 * 1024
    assert MAX78000.data_memory_bytes == 512 * 1024
    assert MAX78002.data_memory_bytes == 1280 * 1024
    assert (MAX78000.max_layers, MAX78002.max_layers) == (32, 128)
    assert MAX78000.processors == MAX78002.processors == 64
    assert MAX78000.quadrants * MAX78000.processors_per_quadrant == 64
    # "768 * 64 3x3 Q7 kernels"; MAX78002 "processors 0, 16, 32, and 48 ... 5,120".
    assert [MAX78000.kernel_words(p) for p in (0, 1, 63)] == [768, 768, 768]
    assert [MAX78002.kernel_words(p) for p in (0, 16, 1, 47)] == [5120, 5120, 4096, 4096]
    # HWC: 8,192 / 20,480 pixels per channel fit one instance (4 channels per word).
    assert MAX78000.data_instance_bytes // 4 == 8192
    assert MAX78002.data_instance_bytes // 4 == 20480
    assert MAX78000.data_instance_words * 4 * 4 == MAX78000.data_instance_bytes
    assert MAX78002.data_instance_words * 4 * 4 == MAX78002.data_instance_bytes
    assert not MAX78000.binary_weights and MAX78002.binary_weights
    assert not MAX78000.depthwise and MAX78002.depthwise
    assert MAX78000.flatten_inputs_max == MAX78002.flatten_inputs_max == 16384


def test_data_memory_base_matches_golden(golden_dir):
    # The expected outputs of golden cases live in data memory: every unload address lies
    # inside the device's data memory window.
    import gzip
    import json

    for case in ("ai85-mnist", "ai87-cats-dogs"):
        folder = golden_dir / case
        if not (folder / "expected.json.gz").is_file():
            pytest.skip(f"{case} absent")
        device = get_device(json.loads((folder / "case.json").read_text())["device"])
        with gzip.open(folder / "expected.json.gz", "rt") as fh:
            groups = json.load(fh)["expected_output"]
        top = device.sram_base + device.quadrants * device.quadrant_stride
        for address, _mask, words in groups:
            assert device.sram_base <= address and address + 4 * len(words) <= top
