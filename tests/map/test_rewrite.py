"""Element-wise rewrites before mapping (onnx2ai8x/legalize/rewrite.py): the layer
sequence the vendor's sidecars use, the same numbers as the model, and a placement."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x.devices import MAX78000, MAX78002, get_device
from onnx2ai8x.legalize import legalize
from onnx2ai8x.legalize.rewrite import (
    copy_shared_concat_parts,
    copy_shared_operands,
    inserted_layers,
    rewrite,
    split_multipass_eltwise,
)
from onnx2ai8x.map.auto import auto_place
from onnx2ai8x.map.memory_check import check_placement
from onnx2ai8x.network import ELTWISE_ADD, OP_NONE, Network
from tests.map.test_auto import conv


def _weights(net: Network, seed: int) -> Network:
    rng = np.random.default_rng(seed)
    layers = []
    for lay in net.layers:
        if lay.weights is not None:
            lay = dataclasses.replace(lay, weights=rng.integers(-4, 5, lay.weights.shape),
                                      output_shift=-2)
        layers.append(lay)
    return dataclasses.replace(net, layers=tuple(layers))


def resnet() -> Network:
    """conv1 -> conv2 -> (conv3 + conv2 fused into conv4): conv2's output is both read
    directly (conv3) and an element-wise operand (ai85ressimplenet's residual)."""
    layers = (conv("c0", 3, 16, 16, (-1,)), conv("c1", 16, 20, 16, (0,)),
              conv("c2", 20, 20, 16, (1,)),
              conv("c3", 20, 20, 16, (2, 1), eltwise=ELTWISE_ADD, operands=2),
              conv("c4", 20, 10, 16, (3,), k=1))
    return _weights(Network(layers=layers, input_shape=(3, 16, 16), device="MAX78000",
                            name="resnet"), 3)


def mbconv(bias: bool, ch: int = 96) -> Network:
    """A residual over 96 channels (two passes) fused into the next convolution, as
    ai8x_blocks.MBConvBlock chains export on the MAX78002."""
    b = np.arange(ch) % 7 - 3 if bias else None
    layers = (conv("c0", 3, ch, 8, (-1,)), conv("c1", ch, ch, 8, (0,), k=1),
              conv("c2", ch, ch, 8, (1, 0), eltwise=ELTWISE_ADD, operands=2, k=1,
                   bias=None if b is None else b * 128, bias_hw=b),
              conv("c3", ch, 10, 8, (2,), k=1))
    return _weights(Network(layers=layers, input_shape=(3, 8, 8), device="MAX78002",
                            name="mbconv"), 5)


def _same_numbers(a: Network, b: Network, outputs_a: tuple[int, ...],
                  outputs_b: tuple[int, ...]) -> None:
    import custom_ops
    from custom_ops.builder import build_model

    x = np.random.default_rng(1).integers(-128, 128, (1, *a.input_shape)).astype(np.int8)
    ra = custom_ops.run(custom_ops.session(build_model(a, outputs=outputs_a)), x)
    rb = custom_ops.run(custom_ops.session(build_model(b, outputs=outputs_b)), x)
    for u, v in zip(ra, rb, strict=True):
        np.testing.assert_array_equal(u, v)


def test_shared_operand_gets_a_copy_right_after_its_producer() -> None:
    net = resnet()
    out = copy_shared_operands(net, get_device("MAX78000"))
    assert [lay.name for lay in out.layers] == ["c0", "c1", "c1_copy", "c2", "c3", "c4"]
    copy = out.layers[2]
    assert copy.operator == OP_NONE and copy.in_sequences is None  # reads c1 (index 1)
    # c2 keeps reading c1; the element-wise layer reads the copy and c2 (vendor sidecar:
    # layer 3 `in_sequences: 1`, layer 4 `in_sequences: [2, 3]`)
    assert out.layers[3].in_sequences == (1,)
    assert out.layers[4].in_sequences == (3, 2)
    assert out.layers[5].in_sequences == (4,)
    _same_numbers(net, out, (4,), (5,))


def test_resnet_maps_after_the_copy() -> None:
    net = rewrite(resnet(), get_device("MAX78000"))
    placement = auto_place(net, MAX78000)
    assert check_placement(placement) == []
    assert placement.layers[4].in_sequences == (3, 2)


def test_without_the_copy_the_mapper_says_why() -> None:
    from onnx2ai8x.errors import Ai8xError

    with pytest.raises(Ai8xError) as info:
        auto_place(resnet(), MAX78000)
    assert info.value.code == "map.shared-operand"


@pytest.mark.parametrize("bias,ch", [(True, 96), (False, 96), (True, 32)],
                         ids=["bias", "no-bias", "bias-single-pass"])
def test_multipass_eltwise_with_bias_is_unfused_on_max78002(bias: bool, ch: int) -> None:
    """Also with one input pass (32 channels): the vendor tool refuses any element-wise
    operation fused with a biased convolution on the MAX78002 ("multi-pass" are the
    operands' passes; izer checks operands > 1)."""
    net = mbconv(bias, ch)
    device = get_device("MAX78002")
    out = split_multipass_eltwise(net, device)
    if not bias:
        assert out is net  # the fused form is legal: nothing to do
        return
    with pytest.raises(Exception):  # noqa: B017 - the raw network breaks the rule
        legalize(net, device)
    assert [lay.name for lay in out.layers] == ["c0", "c1", "c2_eltwise", "c2", "c3"]
    add, conv2 = out.layers[2], out.layers[3]
    assert add.operator == OP_NONE and add.eltwise == ELTWISE_ADD and add.operands == 2
    assert add.in_sequences == (1, 0)
    assert conv2.operands == 1 and conv2.in_sequences is None
    legalize(out, device)  # no violation left
    _same_numbers(net, out, (3,), (4,))
    # c0 is read by c1 and the add: c1 reads it in place with a read gap in one pass (32
    # channels), the add reads a copy with two (96)
    full = rewrite(net, device)
    assert any(lay.name == "c0_copy" for lay in full.layers) == (ch > 64)
    placement = auto_place(full, MAX78002)
    assert check_placement(placement) == []
    assert [pl.input_skip for pl in placement.layers][1] == (1 if ch <= 64 else 0)


def test_outputs_are_renumbered() -> None:
    net = dataclasses.replace(resnet(), outputs=(4, 2))
    out = copy_shared_operands(net, get_device("MAX78000"))
    assert out.outputs == (5, 3)


def skip112() -> Network:
    """The large U-Net's deepest skip in small: `enc` (56 channels) is read by the
    bottleneck and concatenated with the decoder's 56 channels into 112 (two passes);
    both parts of that concatenation are written interleaved."""
    layers = (conv("enc", 3, 56, 16, (-1,)), conv("bneck", 56, 56, 16, (0,)),
              conv("up", 56, 56, 16, (1,)), conv("dec", 112, 8, 16, (2, 0)),
              conv("head", 8, 4, 16, (3,), k=1))
    return _weights(Network(layers=layers, input_shape=(3, 16, 16), device="MAX78000",
                            name="skip112"), 7)


def test_shared_part_of_a_multipass_concatenation_gets_a_copy() -> None:
    net = skip112()
    device = get_device("MAX78000")
    out = copy_shared_concat_parts(net, device)
    # the copy sits right before the other part's producer (the vendor's
    # camvid-unet-large sidecar: layer 7 copies layer 5 before the upsampling, layer 8)
    assert [lay.name for lay in out.layers] == ["enc", "bneck", "enc_copy", "up", "dec",
                                                "head"]
    copy = out.layers[2]
    assert copy.operator == OP_NONE and copy.in_sequences == (0,)
    assert copy.output_channels == 56 and copy.weights is None
    assert out.layers[3].in_sequences == (1,)  # up still reads the bottleneck
    assert out.layers[4].in_sequences == (3, 2)  # dec reads up and the copy
    assert out.layers[1].in_sequences == (0,)  # the bottleneck still reads enc itself
    _same_numbers(net, out, (4,), (5,))
    assert inserted_layers(net, out) == (
        "inserted pass-through copy layer `enc_copy` reading `enc` for `dec`",)
    again = rewrite(net, device)
    assert [(lay.name, lay.in_sequences) for lay in again.layers] == \
        [(lay.name, lay.in_sequences) for lay in out.layers]


def test_single_pass_concatenation_needs_no_copy() -> None:
    # 28 + 28 channels: one pass, the parts sit side by side and the skip is read in place
    layers = (conv("enc", 3, 28, 16, (-1,)), conv("bneck", 28, 28, 16, (0,)),
              conv("up", 28, 28, 16, (1,)), conv("dec", 56, 8, 16, (2, 0)))
    net = Network(layers=layers, input_shape=(3, 16, 16), device="MAX78000", name="s")
    assert copy_shared_concat_parts(net, get_device("MAX78000")) is net
    assert inserted_layers(net, rewrite(net, get_device("MAX78000"))) == ()


@pytest.mark.parametrize("device", ["MAX78000"])
def test_shared_concatenation_part_maps_and_passes_verify(device: str, tmp_path) -> None:
    """Without the copy the mapper stops (on the MAX78000 the part cannot be written with
    gaps and read directly); with it the placement passes the checker, and the converted
    project's
    known answer (the onnxruntime reference of the unchanged model) is what the virtual
    accelerator computes. The report names the inserted layer."""
    import json
    import subprocess
    import sys

    from custom_ops.builder import build_model
    from onnx2ai8x.errors import Ai8xError

    net = dataclasses.replace(skip112(), device=device)
    with pytest.raises(Ai8xError) as info:
        auto_place(net, get_device(device))
    assert info.value.code == "map.shared-operand"
    full = rewrite(net, get_device(device))
    placement = auto_place(full, get_device(device))
    assert check_placement(placement) == []
    up, dec = placement.layers[3], placement.layers[4]
    copy = placement.layers[2]
    assert (up.write_gap, copy.write_gap) == (1, 1)
    assert copy.out_offset == up.out_offset + 4 and dec.in_offset == up.out_offset
    model = tmp_path / "skip112.onnx"
    model.write_bytes(build_model(net).SerializeToString())
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(model), "--device",
                           device, "-o", str(tmp_path / "p"), "--verify"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note: inserted pass-through copy layer `enc_copy`" in proc.stdout
    report = json.loads((tmp_path / "p" / "report.json").read_text())
    assert report["notes"] == [
        "inserted pass-through copy layer `enc_copy` reading `enc` for `dec`"]
    assert [row["name"] for row in report["layers"]][2] == "enc_copy"


def test_unfused_eltwise_project_passes_verify_against_its_model(tmp_path) -> None:
    """`convert --verify` runs the layer-by-layer reference on the model as converted:
    the unfused element-wise layer included (the model alone breaks the multi-pass
    element-wise limit; before, the reference stopped with limit.eltwise-multipass
    after a project had been written)."""

    from onnx2ai8x.errors import Ai8xError

    net = mbconv(True)
    with pytest.raises(Ai8xError) as info:
        legalize(net, MAX78002)
    assert info.value.code == "limit.eltwise-multipass"
    _convert_and_verify(net, tmp_path / "mbconv.onnx", tmp_path / "p")


def test_shared_concatenation_part_is_read_in_place_on_max78002(tmp_path) -> None:
    """On the MAX78002 the bottleneck reads the interleaved part where the concatenation
    needs it, skipping the other part's words (`read_gap`, seed 000): no copy, and the
    known answer of the unchanged model is what the virtual accelerator computes."""
    import json


    net = dataclasses.replace(skip112(), device="MAX78002")
    assert rewrite(net, get_device("MAX78002")).layers == net.layers
    placement = auto_place(net, MAX78002)
    assert check_placement(placement) == []
    enc, bneck, up, dec = (placement.layers[i] for i in range(4))
    assert (enc.write_gap, up.write_gap) == (1, 1)
    # dec reads [up, enc]: up first at the group's start, enc one word after it
    assert dec.in_offset == up.out_offset and enc.out_offset == up.out_offset + 4
    assert (bneck.in_offset, bneck.input_skip) == (enc.out_offset, 1)
    assert (up.input_skip, dec.input_skip) == (0, 0)
    _convert_and_verify(net, tmp_path / "skip112.onnx", tmp_path / "p")
    assert json.loads((tmp_path / "p" / "report.json").read_text())["notes"] == []
    assert "read_gap: 1" in (tmp_path / "p" / "skip112.yaml").read_text()


def _convert_and_verify(net: Network, model: Path, out: Path) -> None:
    """Build `net` as ai8x-ONNX, convert it for the MAX78002 with --verify: the project's
    known answer (from the model) must be what the virtual accelerator computes."""
    import subprocess
    import sys

    from custom_ops.builder import build_model

    model.write_bytes(build_model(net).SerializeToString())
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(model), "--device",
                           "MAX78002", "-o", str(out), "--verify"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout + proc.stderr
