"""Golden round trip: case network -> custom_ops.builder -> read_model is the same Network."""
from __future__ import annotations

import pytest

from onnx2ai8x.devices import get_device
from onnx2ai8x.legalize import legalize
from tests.conftest import GOLDEN, golden_params

builder = pytest.importorskip("custom_ops.builder")
case_network_mod = pytest.importorskip("tests.golden.case_network")
pytest.importorskip("torch")  # the golden checkpoints are read with torch

from onnx2ai8x.importer.onnx_reader import read_model  # noqa: E402
from tests.importer.test_onnx_reader import layer_differences  # noqa: E402


@pytest.mark.parametrize("case", golden_params())
def test_golden_round_trip(case):
    net = case_network_mod.case_network(GOLDEN / case)
    back = read_model(builder.build_model(net))
    assert layer_differences(net, back) == []
    assert back.device == net.device
    assert legalize(back, get_device(back.device)).layers == back.layers
