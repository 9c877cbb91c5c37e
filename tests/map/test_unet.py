"""U-Nets map automatically: encoder outputs that later layers read first are placed where
the decoder's concatenation needs them (ConvTranspose2d upsampling, concatenated skips).

The networks are built with ai8x_torch modules the way the vendor's U-Net model files are
(encoder: conv + max-pool stages; decoder: stride-2 transposed convolutions whose outputs
are concatenated with the encoder's), given random quantized weights, exported and
converted without a sidecar. The project's known answer must equal the reference, and the
written sidecar must reproduce the same project.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import ai8x_torch as ai8x
from onnx2ai8x.convert import plan
from onnx2ai8x.devices import MAX78000, get_device
from onnx2ai8x.map.memory_check import check_placement
from tests.ai8x_torch.helpers import randomize
from tests.conftest import GOLDEN

C2TRACE = GOLDEN.parent / "tools" / "c2trace.py"


class UNet(nn.Module):
    """Three encoder stages, a bottleneck, two decoder stages with skips."""

    def __init__(self, c: int, skip_first: bool, wide: bool = True) -> None:
        super().__init__()
        self.skip_first = skip_first
        self.enc1 = ai8x.FusedConv2dReLU(3, c, 3, padding=1)
        self.enc2 = ai8x.FusedMaxPoolConv2dReLU(c, 2 * c, 3, padding=1)
        self.enc3 = ai8x.FusedMaxPoolConv2dReLU(2 * c, 4 * c, 3, padding=1)
        self.bneck = ai8x.FusedConv2dReLU(4 * c, 4 * c, 3, padding=1)
        self.up3 = ai8x.ConvTranspose2d(4 * c, 2 * c, 3, stride=2, padding=1)
        self.dec3 = ai8x.FusedConv2dReLU(4 * c, 2 * c, 3, padding=1)
        self.up2 = ai8x.ConvTranspose2d(2 * c, c, 3, stride=2, padding=1)
        self.dec2 = ai8x.FusedConv2dReLU(2 * c, c, 3, padding=1)
        # 32-bit logits where they fit the output memory (4 bytes a value)
        self.head = ai8x.Conv2d(c, 4, 1, padding=0, wide=wide)

    def _cat(self, up: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return torch.cat([skip, up] if self.skip_first else [up, skip], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        e3 = self.bneck(self.enc3(e2))
        d3 = self.dec3(self._cat(self.up3(e3), e2))
        d2 = self.dec2(self._cat(self.up2(d3), e1))
        return self.head(d2)


CASES = [("MAX78000", 8, False, 32), ("MAX78000", 8, True, 32),
         ("MAX78002", 16, False, 48), ("MAX78000", 16, True, 64)]


def _export(tmp_path: Path, device: str, c: int, skip_first: bool, dim: int) -> Path:
    model = UNet(c, skip_first, wide=dim <= 48)
    randomize(model, np.random.default_rng(c * 7 + dim + skip_first))
    path = tmp_path / "unet.onnx"
    code = 85 if device == "MAX78000" else 87
    with ai8x.using_device(code):
        ai8x.export_onnx(model, torch.zeros(1, 3, dim, dim), path, device=device)
    return path


@pytest.mark.parametrize("device,c,skip_first,dim", CASES,
                         ids=[f"{d}-c{c}-{'skip' if s else 'up'}first-{n}"
                              for d, c, s, n in CASES])
def test_unet_maps_automatically(tmp_path: Path, device: str, c: int, skip_first: bool,
                                 dim: int) -> None:
    path = _export(tmp_path, device, c, skip_first, dim)
    result = plan(path, get_device(device), None)
    assert check_placement(result.placement) == []
    # every concatenation reads its inputs side by side, in the model's order
    for ll, lay in enumerate(result.network.layers):
        seqs = result.placement.layers[ll].in_sequences
        if seqs is None or len(seqs) < 2 or lay.eltwise:
            continue
        maps = [result.placement.layers[s].output_processor_map for s in seqs]
        start = (result.placement.layers[ll].processor_map & -result.placement.layers[ll]
                 .processor_map).bit_length() - 1
        for m, s in zip(maps, seqs, strict=True):
            assert (m & -m).bit_length() - 1 == start
            start += result.network.layers[s].output_channels


@pytest.mark.skipif(not C2TRACE.is_file(), reason="../shared/tools/c2trace.py is absent")
@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
def test_unet_project_known_answer_and_sidecar_round_trip(tmp_path: Path,
                                                          device: str) -> None:
    import custom_ops

    path = _export(tmp_path, device, 8, False, 32)
    sample = np.random.default_rng(5).integers(-128, 128, (3, 32, 32))
    np.save(tmp_path / "x.npy", sample)
    cli = [sys.executable, "-m", "onnx2ai8x.cli", str(path), "--device", device, "-q",
           "--sample-input", str(tmp_path / "x.npy")]
    out = tmp_path / "auto"
    proc = subprocess.run([*cli, "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # the known answer holds the reference's output, as the mapping placed it
    trace = json.loads(subprocess.run([sys.executable, str(C2TRACE), str(out)],
                                      capture_output=True, text=True, check=True,
                                      timeout=120).stdout)
    ref = custom_ops.run(custom_ops.session(path), sample[np.newaxis])[0][0]
    words = [w for _, _, ws in trace["expected_output"] for w in ws]
    assert len(words) == ref.size  # 32-bit output: one value per word
    values = np.array(words, dtype=np.uint32).view(np.int32)
    assert sorted(values.tolist()) == sorted(ref.astype(np.int32).ravel().tolist())
    again = tmp_path / "again"
    proc = subprocess.run([*cli, "-o", str(again), "--sidecar", str(out / "unet.yaml")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for name in ("cnn.c", "main.c", "weights.h", "sampleoutput.h"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def test_concatenation_over_64_channels_is_written_interleaved(tmp_path: Path) -> None:
    """Two 56-channel parts joined into 112 channels: the consumer reads them as two
    passes of one pixel's consecutive words, so each part is written with a gap of one
    word (seed 004 write_gap), not one frame after the other. The virtual accelerator
    runs the project's known answer."""
    from custom_ops.builder import build_model
    from onnx2ai8x.map.auto import auto_place
    from onnx2ai8x.network import Network
    from tests.map.test_auto import conv

    rng = np.random.default_rng(3)
    layers = [conv("a", 3, 56, 16, (-1,)), conv("b", 3, 56, 16, (-1,)),
              conv("cat", 112, 8, 16, (0, 1))]
    layers = [lay.__class__(**{**lay.__dict__, "weights": rng.integers(
        -2, 3, lay.weights.shape), "output_shift": -4}) for lay in layers]
    net = Network(layers=tuple(layers), input_shape=(3, 16, 16), device="MAX78000",
                  name="cat112")
    placement = auto_place(net, MAX78000)
    a, b, cat = placement.layers
    assert (a.write_gap, b.write_gap) == (1, 1)
    assert b.out_offset == a.out_offset + 4 and cat.in_offset == a.out_offset
    model = tmp_path / "cat112.onnx"
    model.write_bytes(build_model(net).SerializeToString())
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(model), "--device",
                           "MAX78000", "-o", str(tmp_path / "p"), "-q", "--verify"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
