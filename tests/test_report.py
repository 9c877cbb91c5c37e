"""Summary report: per-layer figures, totals and deterministic JSON."""
from __future__ import annotations

import json

import numpy as np

from onnx2ai8x.devices import get_device
from onnx2ai8x.map.auto import auto_place
from onnx2ai8x.map.latency import estimate_cycles
from onnx2ai8x.network import OP_LINEAR, Layer, Network
from onnx2ai8x.report import layer_macs, render_table, summarize, to_json
from tests.lowering import lowered
from tests.map.test_auto import chain, conv


def _report(net: Network, device: str = "MAX78000"):
    p = auto_place(net, get_device(device))
    hw = lowered(p)
    return summarize(hw, estimate_cycles(hw))


def test_macs_formulae() -> None:
    # 3x3 conv, 16 -> 32 channels on a 32x32 output: H*W*Cout*Cin*9
    assert layer_macs(conv("c", 16, 32, 32, (-1,))) == 32 * 32 * 32 * 16 * 9
    fc = Layer(name="fc", operator=OP_LINEAR, input_channels=16, output_channels=10,
               input_dim=(4, 4), pooled_dim=(4, 4), output_dim=(1, 1), flatten=True,
               weights=np.ones((10, 256)))
    assert layer_macs(fc) == 10 * 256


def test_layers_and_totals() -> None:
    net = chain()
    r = _report(net)
    assert [row.name for row in r.layers] == ["c0", "c1", "c2", "c3"]
    assert r.layers[2].in_shape == (32, 16, 16) and r.layers[2].out_shape == (100, 16, 16)
    assert [row.processors for row in r.layers] == [3, 16, 32, 52]
    assert r.layers[3].passes == 2
    assert r.total_macs == sum(layer_macs(lay) for lay in net.layers)
    assert r.total_cycles == r.startup_cycles + sum(row.cycles for row in r.layers)
    # 8-bit weights: one byte each
    assert r.weight_bytes == sum(int(lay.weights.size) for lay in net.layers)
    assert 0 < r.weight_memory_pct < 100 and 0 < r.data_memory_pct <= 100
    # data memory in bytes per instance: c2's output is 100 channels in 2 passes of 16x16
    assert r.layers[2].data_out_bytes == 16 * 16 * 2 * 4


def test_table_and_json() -> None:
    r = _report(chain())
    table = render_table(r)
    assert "c2" in table and f"{r.total_cycles:,}" in table
    text = to_json(r)
    assert text == to_json(_report(chain()))
    data = json.loads(text)
    assert data["total_macs"] == r.total_macs
    assert [row["name"] for row in data["layers"]] == ["c0", "c1", "c2", "c3"]


def test_kernel_figures_come_from_the_allocation() -> None:
    net = chain()
    r = _report(net)
    # c0: each of its 3 input processors holds one 3x3 kernel per output channel (16);
    # c1: 32 per processor; c3 (1x1, 10 outputs) packs its kernels into whole columns.
    assert [row.kernel_columns for row in r.layers[:2]] == [16, 32]
    # no weights are shared here, so the used columns are exactly the layers' columns
    # in each of their input processors (alignment gaps between layers do not count)
    assert r.kernel_columns_used == sum(row.kernel_columns * row.processors
                                        for row in r.layers)
    assert r.kernel_columns_used < r.kernel_columns_total
