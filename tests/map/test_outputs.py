"""Networks with several outputs (detector heads): every output is placed, kept alive to
the end, unloaded, checked and written to the sidecar so that it reads back the same."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x.devices import MAX78000
from onnx2ai8x.map.auto import auto_place
from onnx2ai8x.map.memory_check import check_placement, last_use
from onnx2ai8x.network import Network, output_layers
from onnx2ai8x.sidecar.write import write_sidecar
from tests.conftest import GOLDEN
from tests.map.test_auto import conv

C2TRACE = GOLDEN.parent / "tools" / "c2trace.py"


def detector(outputs: tuple[int, ...] | None = None) -> Network:
    """A backbone with a head after each of two stages (tinierSSD-like, in small)."""
    rng = np.random.default_rng(7)
    layers = [conv("c0", 3, 16, 16, (-1,)), conv("c1", 16, 16, 16, (0,)),
              conv("head_a", 16, 8, 16, (1,), k=1), conv("c2", 16, 16, 16, (1,), pool=2),
              conv("head_b", 16, 8, 8, (3,), k=1)]
    layers = [dataclasses.replace(lay, weights=rng.integers(-3, 4, lay.weights.shape),
                                  output_shift=-3) for lay in layers]
    return Network(layers=tuple(layers), input_shape=(3, 16, 16), device="MAX78000",
                   name="detector", outputs=outputs)


def test_unread_layers_are_the_outputs_unless_stated() -> None:
    assert output_layers(detector()) == (2, 4)
    assert output_layers(detector(outputs=(4, 1))) == (4, 1)


def test_every_head_is_an_output_and_stays_live() -> None:
    net = detector()
    placement = auto_place(net, MAX78000)
    assert check_placement(placement) == []
    assert [pl.output_layer for pl in placement.layers] == [False, False, True, False, True]
    text = write_sidecar(placement)
    assert text.count("output: true") == 2  # both heads, the final one included


def test_a_graph_output_read_by_later_layers_lives_to_the_end() -> None:
    net = detector(outputs=(1, 2, 4))
    assert last_use(net)[1] == len(net.layers)
    placement = auto_place(net, MAX78000)
    assert check_placement(placement) == []
    assert [pl.output_layer for pl in placement.layers] == [False, True, True, False, True]
    # nothing written after layer 1 may land on layer 1's output
    one = placement.layers[1]
    for later in placement.layers[2:]:
        overlap = later.output_processor_map & one.output_processor_map
        assert not overlap or later.out_offset != one.out_offset


def test_single_output_writes_no_output_key() -> None:
    net = dataclasses.replace(detector(), outputs=(4,))
    placement = auto_place(net, MAX78000)
    assert [pl.output_layer for pl in placement.layers] == [False] * 4 + [True]
    assert "output:" not in write_sidecar(placement)


@pytest.mark.skipif(not C2TRACE.is_file(), reason="../shared/tools/c2trace.py is absent")
def test_converted_detector_checks_both_heads_and_round_trips(tmp_path: Path) -> None:
    from custom_ops.builder import build_model

    net = detector()
    model = tmp_path / "detector.onnx"
    model.write_bytes(build_model(net).SerializeToString())
    out = tmp_path / "auto"
    cli = [sys.executable, "-m", "onnx2ai8x.cli"]
    proc = subprocess.run([*cli, str(model), "--device", "MAX78000", "-o", str(out), "-q"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    written = out / "detector.yaml"
    assert written.read_text().count("output: true") == 2
    trace = subprocess.run([sys.executable, str(C2TRACE), str(out)], capture_output=True,
                           text=True, check=True, timeout=120).stdout
    import json

    words = sum(len(w) for _, _, w in json.loads(trace)["expected_output"])
    # 8 channels x 16x16 (head_a) + 8 channels x 8x8 (head_b), four 8-bit values a word
    assert words == (8 * 16 * 16 + 8 * 8 * 8) // 4
    again = tmp_path / "again"
    proc = subprocess.run([*cli, str(model), "--device", "MAX78000", "-o", str(again), "-q",
                           "--sidecar", str(written)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    for name in ("cnn.c", "main.c", "sampleoutput.h", "weights.h"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
