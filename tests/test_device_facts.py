"""Every per-device fact lives in onnx2ai8x/devices.py: no other module of the converter
keeps its own table of a device's numbers (the issue-16 refactor; a table elsewhere
drifts from the device model and hides a missing device behind a fallback)."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import onnx2ai8x
from onnx2ai8x.devices import DEVICES, MAX78000, MAX78002, get_device

PACKAGE = Path(onnx2ai8x.__file__).parent
# Fields whose values are "no limit" sentinels rather than a device's characteristic
# numbers (2**16 pooling passes on MAX78002 would match every 16-bit mask).
SENTINELS = {"pool_passes_max"}


def _int_fields(record: object, prefix: str = "") -> dict[str, int]:
    out: dict[str, int] = {}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            out[prefix + f.name] = value
        elif dataclasses.is_dataclass(value):
            out.update(_int_fields(value, f"{f.name}."))
    return out


def characteristic_numbers() -> dict[int, list[str]]:
    """Numbers that tell the devices apart: a field's value where the two parts differ,
    leaving out small numbers and powers of two below 64 Ki that also mean other things
    (bit fields, KiB); addresses and odd sizes (768, 5120, 0x14000) stay."""
    a, b = (_int_fields(d) for d in DEVICES)
    out: dict[int, list[str]] = {}
    for name in set(a) | set(b):
        if name in SENTINELS or a.get(name) == b.get(name):
            continue
        for value in (a.get(name), b.get(name)):
            if value is not None and value >= 256 and (value & (value - 1) or value >= 1 << 16):
                out.setdefault(value, []).append(name)
    return out


def device_fact_findings(root: Path) -> list[str]:
    """Places outside devices.py that restate a device's numbers or key a table by a
    device name."""
    numbers = characteristic_numbers()
    names = {n for d in DEVICES for n in (d.name, *d.aliases) if not n.isdigit()}
    findings = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "devices.py" and path.parent == root:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and type(node.value) is int \
                    and node.value in numbers:
                findings.append(f"{path.relative_to(root)}:{node.lineno}: {node.value:#x} "
                                f"({', '.join(sorted(numbers[node.value]))})")
            if isinstance(node, ast.Dict) and any(
                    isinstance(k, ast.Constant) and k.value in names for k in node.keys):
                findings.append(f"{path.relative_to(root)}:{node.lineno}: a table keyed by "
                                "device name")
    return findings


def test_characteristic_numbers_are_found() -> None:
    # The scan knows what to look for: each part's memory bases and sizes.
    numbers = characteristic_numbers()
    for dev in (MAX78000, MAX78002):
        assert dev.kernel_base in numbers and dev.sram_base in numbers
    assert MAX78000.kernel_words_small in numbers and MAX78002.kernel_words_large in numbers


def test_scan_catches_a_private_table(tmp_path: Path) -> None:
    (tmp_path / "stage.py").write_text(
        'TABLE = {"MAX78000": 0x50180000, "MAX78002": 0x51400000}\nWIDTH = 768\n')
    found = device_fact_findings(tmp_path)
    assert any("keyed by device name" in f for f in found)
    assert sum("0x50180000" in f or "0x51400000" in f or "0x300" in f for f in found) == 3


def test_no_module_outside_devices_defines_device_numbers() -> None:
    assert device_fact_findings(PACKAGE) == []


def test_unknown_device_is_an_error() -> None:
    with pytest.raises(onnx2ai8x.errors.Ai8xError, match="MAX99999"):
        get_device("MAX99999")
    assert get_device("ai87") is MAX78002 and get_device(MAX78000) is MAX78000
