"""Shared element-wise operands (a residual block's input, read by its first convolution
and by the add): read in place where the hardware can, copied where it cannot.

The operands of an element-wise layer are written interleaved (`write_gap`). On the
MAX78002 a single-pass layer reads one of them where it lies, skipping the other's words
(`read_gap`, seed 000 "read_gap"); the vendor's pascalvoc-fpndetector sidecar reads its
64-channel residual inputs that way. More than 64 channels (two passes), or the
MAX78000, still need a pass-through copy (legalize/rewrite.py), named in the report.

The networks are ai8x_torch models with random quantized weights, exported and converted
without a sidecar; the project's known answer (the onnxruntime reference of the
unchanged model) must be what the virtual accelerator computes (`verify`).
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
from onnx2ai8x.devices import MAX78000, MAX78002, get_device
from onnx2ai8x.map.memory_check import check_placement
from onnx2ai8x.network import OP_NONE
from tests.ai8x_torch.helpers import randomize


class Residual(nn.Module):
    """pre -> conv1 -> conv2, pre + conv2 -> head: `pre`'s output is read by conv1 and
    is an operand of the add (which the export fuses into the biased head; the MAX78002
    runs it as a pass-through element-wise layer of its own)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.pre = ai8x.FusedConv2dReLU(3, c, 3, padding=1)
        self.conv1 = ai8x.FusedConv2dReLU(c, c, 3, padding=1)
        self.conv2 = ai8x.FusedConv2dReLU(c, c, 3, padding=1)
        self.add = ai8x.Add()
        self.head = ai8x.FusedConv2dReLU(c, 8, 1, padding=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        return self.head(self.add(x, self.conv2(self.conv1(x))))


def _export(tmp_path: Path, device: str, c: int) -> Path:
    model = Residual(c)
    # shifts that keep the values spread (not all saturated), so a layer reading the
    # wrong words changes the known answer
    randomize(model, np.random.default_rng(c), shift_range=(-4, -3))
    path = tmp_path / "residual.onnx"
    with ai8x.using_device(85 if device == "MAX78000" else 87):
        ai8x.export_onnx(model, torch.zeros(1, 3, 12, 12), path, device=device)
    return path


def _convert(path: Path, device: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(path), "--device",
                           device, "-o", str(out), *extra],
                          capture_output=True, text=True, timeout=300)


def _layer(result, name: str) -> int:
    return next(ll for ll, lay in enumerate(result.network.layers) if lay.name == name)


def test_residual_input_is_read_in_place_on_max78002(tmp_path: Path) -> None:
    path = _export(tmp_path, "MAX78002", 32)
    result = plan(path, MAX78002, None)
    assert check_placement(result.placement) == []
    names = [lay.name for lay in result.network.layers]
    assert not any(n.endswith("_copy") for n in names), names
    pre, conv1 = _layer(result, "pre"), _layer(result, "conv1")
    add = next(ll for ll, lay in enumerate(result.network.layers) if lay.operands == 2)
    places = result.placement.layers
    # pre writes one operand slot of the add's interleaved input; conv1 reads it there
    assert places[pre].write_gap == 1 and places[add].in_sequences is not None
    assert pre in places[add].in_sequences
    assert (places[conv1].in_offset, places[conv1].input_skip) == (places[pre].out_offset, 1)
    assert "read_gap: 1" in result.sidecar_text

    out = tmp_path / "p"
    proc = _convert(path, "MAX78002", out, "--verify")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout + proc.stderr
    # the report names the unfused add, and no copy
    notes = json.loads((out / "report.json").read_text())["notes"]
    assert len(notes) == 1 and "element-wise pass-through" in notes[0], notes

    # The read gap is what makes it right: the same placement read without it is refused
    # by the checker every sidecar now passes (issue 25), at the sidecar's line.
    written = (out / "residual.yaml").read_text()
    assert written.count("read_gap: 1") == 1
    broken = tmp_path / "no-gap.yaml"
    broken.write_text(written.replace("read_gap: 1", "read_gap: 0"))
    proc = _convert(path, "MAX78002", tmp_path / "q", "--sidecar", str(broken), "--verify")
    assert proc.returncode != 0
    assert "error[map.read-gap]" in proc.stderr and f"{broken}:" in proc.stderr


@pytest.mark.parametrize("device,c", [("MAX78000", 32), ("MAX78002", 96)],
                         ids=["max78000-no-read-gap", "max78002-two-passes"])
def test_residual_input_is_copied_where_it_cannot_be_read_in_place(
        tmp_path: Path, device: str, c: int) -> None:
    """The MAX78000 has no read gap; 96 channels are read in two passes, where the
    MAX78002 allows none either (the vendor's fpndetector copies its 128-channel residual
    inputs: "gapped version" layers)."""
    path = _export(tmp_path, device, c)
    result = plan(path, get_device(device), None)
    assert check_placement(result.placement) == []
    copy = _layer(result, "pre_copy")
    lay = result.network.layers[copy]
    assert lay.operator == OP_NONE and lay.in_sequences in (None, (_layer(result, "pre"),))
    assert all(pl.input_skip == 0 for pl in result.placement.layers)
    out = tmp_path / "p"
    proc = _convert(path, device, out, "--verify")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout + proc.stderr
    notes = json.loads((out / "report.json").read_text())["notes"]
    assert any("`pre_copy` reading `pre`" in note for note in notes), notes


def test_checker_holds_reads_to_the_gap_they_were_written_with(tmp_path: Path) -> None:
    """The checker judges a dropped copy: a layer reading interleaved data without the
    read gap, or a read gap the device or the pass count does not allow."""
    import dataclasses

    from onnx2ai8x.map.memory_check import check_sidecar_placement
    from tests.map.examined import examined

    path = _export(tmp_path, "MAX78002", 32)
    result = plan(path, MAX78002, None)
    placement = result.placement
    conv1 = _layer(result, "conv1")

    def with_layer(ll: int, **changes):
        layers = list(placement.layers)
        layers[ll] = dataclasses.replace(layers[ll], **changes)
        return dataclasses.replace(placement, layers=tuple(layers))

    no_gap = check_placement(with_layer(conv1, input_skip=0))
    assert [(d.code, d.where) for d in no_gap] == [("map.read-gap", "layer `conv1`")]
    assert "write_gap 1" in no_gap[0].message and "`pre`" in no_gap[0].message
    on_max78000 = dataclasses.replace(placement, device=MAX78000)
    codes = {(d.code, d.where) for d in check_placement(on_max78000)}
    assert ("map.read-gap", "layer `conv1`") in codes
    assert [d.code for d in check_sidecar_placement(examined(on_max78000))] == \
        ["map.read-gap"]

    wide = plan(_export(tmp_path, "MAX78002", 96), MAX78002, None)
    head = len(wide.network.layers) - 1  # reads 96 channels in two passes
    forced = dataclasses.replace(wide.placement, layers=(
        *wide.placement.layers[:head],
        dataclasses.replace(wide.placement.layers[head], input_skip=1)))
    diags = check_sidecar_placement(examined(forced))
    assert [d.code for d in diags] == ["map.read-gap"] and "2 passes" in diags[0].message
