"""The hardware view shared by map and emit: one multi-pass rule, map independent of emit,
and kernel/bias memory allocated once per conversion (issue 16)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import onnx2ai8x
import onnx2ai8x.map.weights as weights_mod
from onnx2ai8x.devices import MAX78000
from onnx2ai8x.map.hw import ffs, fls, multipass, popcount
from tests.test_convert_cli import model  # noqa: F401 - the small-model fixture


@pytest.mark.parametrize("channels, expected", [
    (0, (1, 0)),  # no channels: one empty pass (no division by zero)
    (1, (1, 1)), (64, (1, 64)),
    # seed 000 "Multi-Pass": 65 channels take 2 passes of ceil(65/2) = 33 channels,
    # rounded up to whole memory instances of 4 processors: 36
    (65, (2, 36)), (100, (2, 52)), (129, (3, 44)), (1024, (16, 64)),
])
def test_multipass(channels: int, expected: tuple[int, int]) -> None:
    assert multipass(channels) == expected
    passes, per_pass = multipass(channels)
    assert passes * per_pass >= channels


def test_bit_helpers() -> None:
    assert (ffs(0b10100), fls(0b10100), popcount(0b10100)) == (2, 4, 2)
    assert (ffs(0), fls(0), popcount(0)) == (-1, -1, 0)


def test_map_does_not_import_emit() -> None:
    root = Path(onnx2ai8x.__file__).parent / "map"
    found = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module.startswith("emit") or ".emit" in f".{node.module}"):
                found.append(f"{path.name}:{node.lineno} {node.module}")
    assert found == []


def test_weight_memory_is_allocated_once_per_conversion(model, tmp_path,  # noqa: F811
                                                       monkeypatch) -> None:
    from onnx2ai8x.convert import ConvertRequest, convert

    runs = {"kernels": 0, "bias": 0}

    def counting(name, real):
        def run(*args, **kwargs):
            runs[name] += 1
            return real(*args, **kwargs)
        return run

    monkeypatch.setattr(weights_mod, "allocate_kernels",
                        counting("kernels", weights_mod.allocate_kernels))
    monkeypatch.setattr(weights_mod, "allocate_bias",
                        counting("bias", weights_mod.allocate_bias))
    # the whole conversion: mapping, check, estimate, report and the C project
    convert(ConvertRequest(model=model, device=MAX78000, output=tmp_path / "out"))
    assert runs == {"kernels": 1, "bias": 1}
    assert "KERNELS" in (tmp_path / "out" / "weights.h").read_text()


@pytest.mark.parametrize("order, expected", [
    # layers 1 and 3 have an average-pool reset layer inserted before them (MAX78002):
    # hardware layers 0 | 1r 2 | 3 | 4r 5
    ([0, 1, 2, 3], (0, 1, 2, 3, 4, 5)),  # reached in sequence: through the reset layers
    ([0, 3], (0, 5)),  # a jump lands on the layer itself (its next-layer field's value)
    ([1, 2], (1, 2, 3)),  # a first layer with a reset layer starts there
    ([0, 2, 3], (0, 3, 4, 5)),
])
def test_hardware_order_of_a_layer_order(order: list[int], expected: tuple[int, ...]) -> None:
    """The order a known answer assumes (`simulated_sequence`, sidecar layers) as the
    hardware layers the sequencer runs (what `convert --verify` states for a snoop
    project)."""
    from types import SimpleNamespace

    from onnx2ai8x.map.hw import HwView

    resets = (False, True, False, True)
    hw = SimpleNamespace(layers=[SimpleNamespace(avgpool_reset=r) for r in resets],
                         hw_add_layers=(0, 1, 1, 2))
    hw.hw_index = lambda ll: ll + hw.hw_add_layers[ll]
    assert HwView.hardware_order(hw, order) == expected
