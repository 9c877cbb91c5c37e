"""Warnings for placements the hardware may not run as computed (map/advice.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ai8x_torch as ai8x
from onnx2ai8x.convert import plan
from onnx2ai8x.devices import get_device
from tests.ai8x_torch.helpers import randomize
from tests.ai8xsim.test_stream_bias import DIM, BiasedStream


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
def test_streaming_bias_warning(device: str, tmp_path) -> None:
    """Seed 000 (MAX78000 streaming limits): a streaming layer's bias may not be added
    correctly; the MAX78002 adds it. Layer 0 streams with a bias, layer 1 streams
    without one."""
    model = BiasedStream()
    randomize(model, np.random.default_rng(5))
    with torch.no_grad():
        model.conv0.op.bias.copy_(torch.linspace(-0.9, 0.9, 8))
    path = tmp_path / "biased.onnx"
    dim = DIM if device == "MAX78000" else 2 * DIM  # needs streaming on either device
    with ai8x.using_device(85 if device == "MAX78000" else 87):
        ai8x.export_onnx(model, torch.zeros(1, 3, dim, dim), path, device=device)
    result = plan(path, get_device(device), None)
    streaming = [i for i, pl in enumerate(result.placement.layers) if pl.streaming]
    assert streaming[:2] == [0, 1]
    named = [w for w in result.warnings if w.startswith("warning[map.streaming-bias]")]
    if device == "MAX78002":
        assert named == []
        return
    assert any(w.startswith("warning[map.streaming-bias] layer 0 (conv0):") for w in named)
    assert not any("(conv1)" in w for w in named)  # no bias
    assert all("hint:" in w for w in named)
