"""A biased streaming layer 0 on the MAX78000: the vendor tool stores a spare zero bias
byte at the layer's bias address and the real values after it (izer/kbias.py, "work
around a problem on AI85"); the hardware reads them one byte on. Our emitter writes the
same bias memory, and the virtual accelerator reads it as the hardware does."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import ai8x_torch as ai8x
import ai8xsim.device as simdev
from onnx2ai8x.verification import verify
from tests.ai8x_torch.helpers import randomize

DIM = 96  # the first layer's 8 x 96 x 96 output does not fit one data memory instance


class BiasedStream(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv0 = ai8x.FusedConv2dReLU(3, 8, 3, padding=1, bias=True)
        self.conv1 = ai8x.FusedMaxPoolConv2dReLU(8, 8, 3, padding=1, pool_size=2,
                                                 pool_stride=2, bias=False)
        self.conv2 = ai8x.FusedMaxPoolConv2dReLU(8, 16, 3, padding=1, pool_size=2,
                                                 pool_stride=2)
        self.conv3 = ai8x.Conv2d(16, 4, 1, padding=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv3(self.conv2(self.conv1(self.conv0(x))))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("stream-bias")
    model = BiasedStream()
    randomize(model, np.random.default_rng(5))
    with torch.no_grad():  # every output channel of layer 0 gets a distinct, large bias
        model.conv0.op.bias.copy_(torch.linspace(-0.9, 0.9, 8))
    path = tmp / "biased.onnx"
    with ai8x.using_device(85):
        ai8x.export_onnx(model, torch.zeros(1, 3, DIM, DIM), path, device="MAX78000")
    out = tmp / "p"
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(path), "--device",
                           "MAX78000", "-o", str(out)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "streaming: true" in (out / "biased.yaml").read_text()
    return out


def test_biased_streaming_layer_0_passes(project: Path) -> None:
    result = verify(project)
    assert result.passed, result.text


def test_reading_at_the_register_address_fails(project: Path, monkeypatch) -> None:
    """Without the one-byte skew layer 0 gets the spare zero byte and its neighbours'
    biases: the known answer fails there (so the passing test above depends on it)."""
    plain = dataclasses.replace(simdev.MAX78000, stream0_bias_skew=0)
    monkeypatch.setitem(simdev.DEVICES, "MAX78000", plain)
    result = verify(project, model=project / "biased.onnx")
    assert not result.passed
    assert "first bad layer: 0:" in result.text, result.text
