"""The sidecar language: spellings, defaults and references (seed 004)."""
from __future__ import annotations

import pytest

from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.network import (
    ACT_ABS,
    ACT_RELU,
    ELTWISE_ADD,
    ELTWISE_OR,
    ELTWISE_XOR,
    OP_CONV1D,
    OP_CONV2D,
    OP_CONVTRANSPOSE2D,
    OP_LINEAR,
    OP_NONE,
)
from onnx2ai8x.sidecar import parse_text


def _one(body: str):
    text = "arch: a\ndataset: d\nlayers:\n" + body
    return parse_text(text)


@pytest.mark.parametrize("key", ["op", "operation", "operator", "convolution"])
@pytest.mark.parametrize("value, operator, eltwise", [
    ("Conv2d", OP_CONV2D, 0), ("conv1d", OP_CONV1D, 0),
    ("ConvTranspose2d", OP_CONVTRANSPOSE2D, 0), ("None", OP_NONE, 0),
    ("Passthrough", OP_NONE, 0), ("Linear", OP_LINEAR, 0), ("FC", OP_LINEAR, 0),
    ("MLP", OP_LINEAR, 0), ("Add", OP_NONE, ELTWISE_ADD), ("BitwiseOr", OP_NONE, ELTWISE_OR),
    ("Xor", OP_NONE, ELTWISE_XOR),
])
def test_operation_spellings(key, value, operator, eltwise):
    lay = _one(f"  - processors: 1\n    {key}: {value}\n").layers[0]
    assert (lay.operator, lay.eltwise) == (operator, eltwise)
    assert lay.operands == (2 if eltwise else 1)


def test_defaults_per_operation():
    sc = _one("  - processors: 1\n"  # no op: Conv2d 3x3 pad 1
              "  - processors: 1\n    op: conv1d\n    pad: 2\n"
              "  - processors: 1\n    op: mlp\n"
              "  - processors: 1\n    op: none\n"
              "  - processors: 1\n    op: convtranspose2d\n")
    conv, c1d, mlp, none, tconv = sc.layers
    assert conv.kernel_size == (3, 3) and conv.padding == (1, 1) and conv.activation is None
    assert c1d.kernel_size == (9, 1) and c1d.padding == (2, 0)
    assert mlp.kernel_size == (1, 1) and mlp.padding == (0, 0)
    assert none.kernel_size == (1, 1) and none.padding == (0, 0)
    assert tconv.stride == (2, 2) and tconv.output_padding == (1, 1)
    assert conv.out_offset == 0 and conv.in_offset is None and conv.output_width == 8


def test_masks_values_and_synonyms():
    lay = _one("  - processors: 0x0000.0000.0000.0111\n    output_processors: '0xf_0'\n"
               "    activation: abs\n    max_pool: [2, 3]\n    pool_stride: 2\n"
               "    quantization: binary\n    data_format: big\n    in_dim: 32\n"
               "    groups: 4\n    bias_group: 2\n    read_gap: 1\n").layers[0]
    assert lay.processors == 0x111 and lay.output_processors == 0xF0
    assert lay.activation == ACT_ABS and lay.pool == (2, 3) and lay.pool_stride == (2, 2)
    assert lay.quantization == -1 and lay.big_data and lay.in_dim == (32, 1)
    assert lay.conv_groups == 4 and lay.bias_group == (2,) and lay.read_gap == 1
    relu = _one("  - processors: 1\n    activate: ReLU\n").layers[0]
    assert relu.activation == ACT_RELU


def test_sequence_gaps_and_names():
    sc = _one("  - processors: 1\n    sequence: 4\n    name: late\n"
              "  - processors: 1\n    sequence: 0\n    name: early\n"
              "  - processors: 1\n    in_sequences: [Early, input]\n    next_sequence: stop\n")
    # a layer without `sequence` follows the previous entry: early (0), third (1), late (4)
    assert [lay.name for lay in sc.layers] == ["early", None, "late"]
    assert sc.layers[1].in_sequences == (0, -1)
    assert sc.layers[1].next_sequence == -1
    assert sc.layers[2].yaml_index == 0


def test_conv1d_default_pad_is_shared_like_the_vendor_tool():
    # A Conv1d relying on the default pad zeroes the second entry of every layer relying
    # on it (vendor list aliasing); explicit pads are unaffected.
    sc = _one("  - processors: 1\n    op: conv2d\n"
              "  - processors: 1\n    op: conv2d\n    pad: 1\n"
              "  - processors: 1\n    op: conv1d\n")
    assert [lay.padding for lay in sc.layers] == [(1, 0), (1, 1), (1, 0)]


def test_globals():
    sc = parse_text("arch: a\ndataset: d\noutput_map: 0x0ff0\nsnoop: [1, 2]\n"
                    "unload:\n  - processors: 0xf\n    channels: 4\n    dim: [2, 2]\n"
                    "    offset: 0x100\n"
                    "data_buffer:\n  - processors: 0xf\n    channels: 4\n    dim: 15\n"
                    "    offset: 0x7fc4\n    name: buf\n"
                    "layers:\n  - processors: 0xf\n    in_sequences: buf\n    in_offset: 0\n"
                    "    out_offset: 0\n    in_dim: 15\n    in_channels: 4\n    op: none\n")
    assert sc.output_map == 0xFF0 and sc.snoop == (1, 2)
    assert sc.unload[0].dim == (2, 2) and sc.unload[0].width == 8
    assert sc.data_buffer[0].dim == (15, 1)
    assert sc.layers[0].in_sequences == (-2,)


def test_one_data_buffer_only():
    buf = "  - processors: 0xf\n    channels: 4\n    dim: 15\n    offset: 0\n    name: b{}\n"
    with pytest.raises(Ai8xError) as err:
        parse_text("arch: a\ndataset: d\ndata_buffer:\n" + buf.format(1) + buf.format(2)
                   + "layers:\n  - processors: 0xf\n")
    d = err.value.diagnostics[0]
    assert d.code == "sidecar.value" and "2 buffers" in d.message and "data_buffer" in d.where


def test_layer_numbering_in_messages():
    with pytest.raises(Ai8xError) as err:
        _one("  - processors: 1\n  - processors: 1\n    name: second\n    pad: x\n")
    assert "layer 1 (second), `pad`" in err.value.render()


def test_sidecar_modules_do_not_import_torch():
    import subprocess
    import sys

    code = ("import sys, onnx2ai8x.sidecar.resolve, onnx2ai8x.sidecar.izer; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
