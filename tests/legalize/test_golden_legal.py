"""Every golden network (the vendor tool accepted it) is legal for its device."""
from __future__ import annotations

import pytest

from onnx2ai8x.devices import get_device
from onnx2ai8x.legalize import diagnose, legalize
from tests.conftest import GOLDEN, golden_params

case_network_mod = pytest.importorskip("tests.golden.case_network")
pytest.importorskip("torch")  # the golden checkpoints are read with torch


@pytest.mark.parametrize("case", golden_params())
def test_golden_network_is_legal(case):
    net = case_network_mod.case_network(GOLDEN / case)
    device = get_device(net.device)
    assert [d.render() for d in diagnose(net, device)] == []
    assert legalize(net, device).device == device.name

