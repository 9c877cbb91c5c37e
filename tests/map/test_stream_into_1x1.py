"""Networks whose first layers must stream, followed by 1x1 convolutions, map
automatically (issue 17: the vendor's face-ID 112x112 network has this shape).

Streaming has no 1x1 path: a 1x1 convolution that streams, or that reads the last
streaming layer's output, runs on the 3x3 hardware with its weight in the centre and
padding 1 (legalize.facts.runs_1x1_as_3x3). The networks are built with ai8x_torch modules, given
random quantized weights, exported and converted without a sidecar; the first layer's
output does not fit a data memory instance, so the mapper must stream, and the layer
after the streaming part (or one inside it) is a 1x1 convolution, which the mapper
refused before. The project must pass the memory checker and the virtual accelerator
(`convert --verify`: its known answer, the onnxruntime reference, is what the registers
compute), and the written sidecar must give the same project back.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import ai8x_torch as ai8x
from onnx2ai8x.convert import plan
from onnx2ai8x.devices import MAX78000
from onnx2ai8x.map.hw import streams_1x1_as_3x3
from onnx2ai8x.map.memory_check import check_placement, output_bytes
from tests.ai8x_torch.helpers import randomize
from tests.lowering import lowered

DIM = 96  # 96 x 96 words of HWC output exceed a 32 KiB MAX78000 data memory instance

# The streaming layers have no bias, as in the vendor's face-ID model ("bias = False due
# to streaming"; seed 000, "Streaming Mode": bias values may not be added correctly).


class StreamThen1x1(nn.Module):
    """Two 3x3 layers (the second pools), then 1x1 / 3x3 / 1x1 on the pooled frame."""

    def __init__(self) -> None:
        super().__init__()
        self.conv0 = ai8x.FusedConv2dReLU(3, 8, 3, padding=1, bias=False)
        self.conv1 = ai8x.FusedMaxPoolConv2dReLU(8, 8, 3, padding=1, pool_size=2,
                                                 pool_stride=2, bias=False)
        self.conv2 = ai8x.FusedConv2dReLU(8, 16, 1, padding=0)
        self.conv3 = ai8x.FusedMaxPoolConv2dReLU(16, 16, 3, padding=1, pool_size=2,
                                                 pool_stride=2)
        self.conv4 = ai8x.Conv2d(16, 4, 1, padding=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv4(self.conv3(self.conv2(self.conv1(self.conv0(x)))))


class Streams1x1(nn.Module):
    """A full-size 1x1 layer that must stream itself, then a pooling 3x3 and a 1x1."""

    def __init__(self) -> None:
        super().__init__()
        self.conv0 = ai8x.FusedConv2dReLU(3, 8, 3, padding=1, bias=False)
        self.conv1 = ai8x.FusedConv2dReLU(8, 8, 1, padding=0, bias=False)
        self.conv2 = ai8x.FusedMaxPoolConv2dReLU(8, 16, 3, padding=1, pool_size=2,
                                                 pool_stride=2, bias=False)
        self.conv3 = ai8x.Conv2d(16, 4, 1, padding=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv3(self.conv2(self.conv1(self.conv0(x))))


# model, streaming layers, layers running a 1x1 kernel on the 3x3 hardware
CASES = {
    "after": (StreamThen1x1, [True, True, False, False, False], [2]),
    "inside": (Streams1x1, [True, True, True, False], [1, 3]),
}


def _export(tmp_path: Path, kind: str) -> Path:
    model = CASES[kind][0]()
    randomize(model, np.random.default_rng(17))
    path = tmp_path / f"{kind}.onnx"
    with ai8x.using_device(85):
        ai8x.export_onnx(model, torch.zeros(1, 3, DIM, DIM), path, device="MAX78000")
    return path


@pytest.mark.parametrize("kind", sorted(CASES))
def test_streams_then_1x1_maps_and_runs(tmp_path: Path, kind: str) -> None:
    path = _export(tmp_path, kind)
    result = plan(path, MAX78000, None)
    net, placement = result.network, result.placement
    # the first layer's whole output does not fit: streaming is needed
    assert output_bytes(net.layers[0]) > 0x8000
    assert check_placement(placement) == []
    _, streaming, as_3x3 = CASES[kind]
    assert [pl.streaming for pl in placement.layers] == streaming
    assert [ll for ll in range(len(net.layers))
            if streams_1x1_as_3x3(placement, ll)] == as_3x3
    assert all(tuple(net.layers[ll].kernel_size) == (1, 1) for ll in as_3x3)
    # the report counts the kernel columns the allocation gives each layer (a 3x3 kernel
    # per column, nine 1x1 ones)
    owners = lowered(placement).weights.kernels.owners
    stored = [max(int((owners[p] == ll).sum()) for p in range(owners.shape[0]))
              for ll in range(len(net.layers))]
    assert [row.kernel_columns for row in result.report.layers] == stored

    cli = [sys.executable, "-m", "onnx2ai8x.cli", str(path), "--device", "MAX78000"]
    out = tmp_path / "auto"
    proc = subprocess.run([*cli, "-o", str(out), "--verify"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout + proc.stderr
    written = out / f"{path.stem}.yaml"
    assert "--fifo" in written.read_text()  # streaming: the input comes through FIFOs
    again = tmp_path / "again"
    proc = subprocess.run([*cli, "-q", "-o", str(again), "--sidecar", str(written)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    for name in ("cnn.c", "weights.h", "sampleoutput.h"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
