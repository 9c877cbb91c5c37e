"""Every legalizer rule has a network that violates it; the error names the layer."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from onnx2ai8x.devices import MAX78000, MAX78002
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.legalize import RULES, diagnose, legalize
from onnx2ai8x.network import (
    ACT_RELU,
    ELTWISE_ADD,
    ELTWISE_MUL,
    OP_CONV1D,
    OP_NONE,
)
from tests.legalize.builders import (
    conv1d,
    conv2d,
    convtranspose2d,
    linear,
    network,
    passthrough,
    weights_for,
    with_weights,
)


def _chain(n: int, cin: int = 64, cout: int = 64, dim: int = 8, **kw):
    """n Conv2d layers, each feeding the next."""
    layers = [conv2d(f"c{i}", cin if i == 0 else cout, cout, dim, **kw) for i in range(n)]
    return network(*layers)


def _distinct_chain(n: int):
    """`_chain`, each layer with its own weights (identical ones are stored once)."""
    net = _chain(n)
    layers = [replace(lay, weights=weights_for(lay, value=1 + i % 127))
              for i, lay in enumerate(net.layers)]
    return replace(net, layers=tuple(layers))


def test_identical_weights_count_once_in_kernel_memory():
    """Thirteen 64x64 3x3 layers with the same weights are stored once (vendor kdedup);
    with distinct weights they exceed the MAX78000's kernel memory."""
    assert not [d for d in diagnose(_chain(13), MAX78000) if d.code == "limit.weight-memory"]
    assert [d for d in diagnose(_distinct_chain(13), MAX78000)
            if d.code == "limit.weight-memory"]


def _eltwise_multipass():
    lay = conv2d("fused_add", 128, 64, 8, eltwise=ELTWISE_ADD, operands=3)
    return network(lay, input_shape=(384, 8, 8))


def _concat_unaligned():
    a = conv2d("a", 4, 3, 8)
    b = conv2d("b", 3, 4, 8, in_sequences=(-1,), weights=None)
    b = with_weights(replace(b, input_channels=4))
    cat = conv2d("cat", 7, 8, 8, in_sequences=(0, 1))
    return network(a, b, cat)


def _wide_not_last():
    return network(conv2d("wide", 4, 8, 8, output_width=32), conv2d("next", 8, 8, 8))


def _binary_mix():
    a = conv2d("bin", 4, 8, 8, quantization=-1, output_shift=7)
    b = conv2d("one", 8, 8, 8, quantization=1, output_shift=7)
    return network(a, b)


def _bias_memory(values=lambda i: np.full(512, 128 * (1 + i), dtype=np.int64)):
    """Five 512-output linear layers, layer i with the bias `values(i)`: 2,560 values
    when they differ, more than the MAX78000's 2,048."""
    layers = []
    for i in range(5):
        lay = linear(f"fc{i}", 512, 512, quantization=1, output_shift=7)
        layers.append(replace(lay, bias=values(i)))
    return network(*layers, input_shape=(512, 1, 1))


@pytest.mark.parametrize("values", [
    lambda i: np.zeros(512, dtype=np.int64),  # all-zero biases are not stored
    lambda i: np.full(512, 128 * (1 + i % 2), dtype=np.int64),  # 2 distinct, shared
    # zero in the byte the hardware stores (the accumulator value is byte * 128)
    lambda i: np.full(512, 127 if i else 128, dtype=np.int64),
], ids=["zero", "shared", "below-one-byte"])
def test_bias_memory_counts_the_stored_biases(values):
    """As the vendor stores them: all-zero biases take no bias memory, identical ones
    one copy; the same 2,560 values all different exceed it (VIOLATIONS)."""
    assert not [d for d in diagnose(_bias_memory(values), MAX78000)
                if d.code == "limit.bias-memory"]


def _data_memory():
    # 100x100 HWC needs 40,000 bytes per instance (> 32 KiB) in every one of 10 layers:
    # streaming would have to reach layer 9.
    return _chain(10, cin=4, cout=4, dim=100)


# rule name -> (device, network, the layer the diagnostic must name)
def _buffer_insert_mismatch():
    """A layer inserting two positions as one into a 4-channel, 5-position buffer."""
    from onnx2ai8x.network import DATA_BUFFER, DataBuffer

    frame = conv2d("frame", cin=4, cout=4, dim=3)
    shift = passthrough("shift", ch=4, dim=1, input_dim=(4, 1), pooled_dim=(4, 1),
                        output_dim=(4, 1), in_sequences=(DATA_BUFFER,), buffer_shift=1)
    ins = conv2d("ins", cin=4, cout=4, dim=3, output_dim=(2, 1), pooled_dim=(3, 3),
                 padding=(0, 0), in_sequences=(0,), buffer_insert=1)
    return replace(network(frame, shift, ins), data_buffer=DataBuffer("b", 4, 5))


VIOLATIONS = {
    "operator-kind": (MAX78000, lambda: network(conv2d("odd", operator=9, weights=None)),
                      "odd"),
    "conv2d-kernel": (MAX78000, lambda: network(with_weights(conv2d(
        "k5", kernel_size=(5, 5), padding=(2, 2), weights=None))), "k5"),
    "conv1d-kernel": (MAX78000, lambda: network(with_weights(conv1d(
        "k10", kernel_size=(10, 1), padding=(2, 0), output_dim=(27, 1), weights=None))),
        "k10"),
    "convtranspose2d-kernel": (MAX78000, lambda: network(with_weights(convtranspose2d(
        "up5", kernel_size=(5, 5), output_dim=(18, 18), weights=None))), "up5"),
    "linear-kernel": (MAX78000, lambda: network(with_weights(linear(
        "fc2x2", input_dim=(2, 2), pooled_dim=(2, 2), weights=None))), "fc2x2"),
    "padding": (MAX78000, lambda: network(with_weights(conv1d(
        "pad3", kernel_size=(7, 1), padding=(3, 0), weights=None))), "pad3"),
    "padding-kernel": (MAX78000, lambda: network(with_weights(conv2d(
        "pad1x1", kernel_size=(1, 1), padding=(1, 1), output_dim=(10, 10), weights=None))),
        "pad1x1"),
    "stride": (MAX78000, lambda: network(conv2d("s2", stride=(2, 2), output_dim=(4, 4))),
               "s2"),
    "conv2d-dilation": (MAX78002, lambda: network(conv2d(
        "dil", dilation=(2, 2), padding=(2, 2))), "dil"),
    "conv1d-dilation": (MAX78000, lambda: network(with_weights(conv1d(
        "d4k5", kernel_size=(5, 1), padding=(0, 0), dilation=(4, 1), output_dim=(16, 1),
        weights=None))), "d4k5"),
    "conv1d-multipass-padding": (MAX78002, lambda: network(conv1d("wide", 65, 8)), "wide"),
    "groups": (MAX78000, lambda: network(with_weights(conv2d(
        "dw", 4, 4, conv_groups=4, weights=None))), "dw"),
    "output-padding": (MAX78000, lambda: network(conv2d("opad", output_padding=(1, 1))),
                       "opad"),
    "pool-size": (MAX78000, lambda: network(conv2d(
        "p17", dim=34, pool=(17, 17), pool_stride=(17, 17), pooled_dim=(2, 2),
        output_dim=(2, 2))), "p17"),
    "pool-stride": (MAX78000, lambda: network(conv2d(
        "ps23", dim=12, pool=(2, 2), pool_stride=(2, 3), pooled_dim=(6, 4),
        output_dim=(6, 4))), "ps23"),
    "pool-dilation": (MAX78000, lambda: network(conv2d(
        "pd2", dim=9, pool=(2, 2), pool_stride=(2, 2), pool_dilation=(2, 2),
        pooled_dim=(4, 4), output_dim=(4, 4))), "pd2"),
    "pool-channels": (MAX78000, lambda: network(passthrough(
        "pool128", 128, 8, pool=(2, 2), pool_stride=(2, 2), pooled_dim=(4, 4),
        output_dim=(4, 4))), "pool128"),
    "pool-last-operands": (MAX78000, lambda: network(passthrough(
        "poollast", 8, 8, eltwise=ELTWISE_ADD, operands=3, pool_first=False, pool=(2, 2),
        pool_stride=(2, 2), pooled_dim=(4, 4), output_dim=(4, 4))), "poollast"),
    "convtranspose2d-pool": (MAX78000, lambda: network(convtranspose2d(
        "poolup", dim=8, pool=(2, 2), pool_stride=(2, 2), pooled_dim=(4, 4),
        output_dim=(8, 8))), "poolup"),
    "channels": (MAX78000, lambda: network(conv2d("wide_ch", 4, 1100)), "wide_ch"),
    "dimensions": (MAX78000, lambda: network(conv2d(
        "big", 1, 4, 1030, kernel_size=(1, 1), padding=(0, 0))), "big"),
    "shape-consistency": (MAX78000, lambda: network(conv2d(
        "badpool", dim=8, pool=(2, 2), pool_stride=(2, 2), pooled_dim=(5, 5),
        output_dim=(5, 5))), "badpool"),
    "flatten": (MAX78000, lambda: network(with_weights(linear(
        "flat", 16, 10, input_dim=(32, 32), pooled_dim=(32, 32), flatten=True,
        weights=None))), "flat"),
    "eltwise-kind": (MAX78000, lambda: network(passthrough(
        "mul", 8, 8, eltwise=ELTWISE_MUL, operands=2)), "mul"),
    "eltwise-operands": (MAX78000, lambda: network(passthrough(
        "add17", 4, 8, eltwise=ELTWISE_ADD, operands=17)), "add17"),
    "eltwise-conv1d": (MAX78000, lambda: network(conv1d(
        "add1d", eltwise=ELTWISE_ADD, operands=2)), "add1d"),
    "eltwise-multipass": (MAX78000, _eltwise_multipass, "fused_add"),
    "connectivity": (MAX78000, lambda: network(conv2d("c0"), conv2d("c1", 16, 8)), "c1"),
    "concat-alignment": (MAX78000, _concat_unaligned, "cat"),
    "data-buffer": (MAX78000, _buffer_insert_mismatch, "ins"),
    "activation": (MAX78000, lambda: network(passthrough("relu_pass", activation=ACT_RELU)),
                   "relu_pass"),
    "passthrough": (MAX78000, lambda: network(passthrough("shifted", output_shift=2)),
                    "shifted"),
    "output-width": (MAX78000, _wide_not_last, "wide"),
    "output-shift": (MAX78000, lambda: network(conv2d("shift20", output_shift=20)),
                     "shift20"),
    "weight-bits": (MAX78000, lambda: network(conv2d("binary", quantization=-1,
                                                     output_shift=7)), "binary"),
    "weights-shape": (MAX78000, lambda: network(conv2d(
        "wshape", weights=np.ones((8, 4, 1, 1), dtype=np.int64))), "wshape"),
    "bias-channels": (MAX78000, lambda: network(replace(
        linear("fc600", 64, 600), bias=np.zeros(600, dtype=np.int64)),
        input_shape=(64, 1, 1)), "fc600"),
    "layer-count": (MAX78000, lambda: _chain(33, 8, 8), "c32"),
    "binary-mix": (MAX78002, _binary_mix, "one"),
    "weight-memory": (MAX78000, lambda: _distinct_chain(13), "c0"),
    "bias-memory": (MAX78000, _bias_memory, "fc4"),
    "data-memory": (MAX78000, _data_memory, "c9"),
}


def test_every_rule_has_a_violation_case():
    assert set(VIOLATIONS) == {rule.name for rule in RULES}


def test_rule_names_are_unique_and_documented():
    names = [rule.name for rule in RULES]
    assert len(names) == len(set(names))
    for rule in RULES:
        assert rule.reason, f"rule {rule.name} has no docstring"
        assert "Seed" in rule.fn.__doc__ or "Vendor tool" in rule.fn.__doc__ or \
            "vendor" in rule.fn.__doc__, rule.name


@pytest.mark.parametrize("rule", sorted(VIOLATIONS))
def test_rule_violation_names_the_layer(rule):
    device, build, where = VIOLATIONS[rule]
    net = build()
    with pytest.raises(Ai8xError) as info:
        legalize(net, device)
    hits = [d for d in info.value.diagnostics if d.code == f"limit.{rule}"]
    assert hits, f"no limit.{rule} among {[d.code for d in info.value.diagnostics]}"
    assert any(d.where == where for d in hits), [d.where for d in hits]
    for d in hits:
        assert d.message and d.hint
        assert d.render().startswith(f"error[limit.{rule}] {d.where}: ")


LEGAL = {
    "conv2d": lambda: network(conv2d()),
    "conv2d-1x1": lambda: network(with_weights(conv2d(kernel_size=(1, 1), padding=(0, 0),
                                                      weights=None))),
    "conv1d-stretched-dilation": lambda: network(with_weights(conv1d(
        kernel_size=(4, 1), padding=(0, 0), dilation=(2, 1), output_dim=(26, 1),
        weights=None))),
    "conv1d-long-dilation": lambda: network(with_weights(conv1d(
        kernel_size=(3, 1), padding=(0, 0), dilation=(13, 1), output_dim=(6, 1),
        weights=None))),
    "pool-then-conv": lambda: network(conv2d(dim=16, pool=(2, 2), pool_stride=(2, 2),
                                             pooled_dim=(8, 8), output_dim=(8, 8))),
    "upsample": lambda: network(convtranspose2d()),
    "flatten-linear": lambda: network(with_weights(linear(
        "fc", 16, 10, input_dim=(4, 4), pooled_dim=(4, 4), flatten=True, weights=None))),
    "wide-last": lambda: network(conv2d(), with_weights(linear(
        "fc", 8, 10, input_dim=(8, 8), pooled_dim=(8, 8), flatten=True, output_width=32,
        weights=None))),
    "eltwise-two-inputs": lambda: network(
        conv2d("a"), conv2d("b", in_sequences=(-1,)),
        passthrough("sum", 8, 8, eltwise=ELTWISE_ADD, operands=2, in_sequences=(0, 1))),
    "concat-aligned": lambda: network(
        conv2d("a", 4, 4), conv2d("b", 4, 4, in_sequences=(-1,)),
        conv2d("cat", 8, 8, in_sequences=(0, 1))),
    "bias-512": lambda: network(replace(linear("fc", 64, 512), bias=np.zeros(512, int)),
                                input_shape=(64, 1, 1)),
    "streaming-first-layers": lambda: network(
        conv2d("s0", 3, 4, 100), conv2d("s1", 4, 4, 100, pool=(2, 2), pool_stride=(2, 2),
                                        pooled_dim=(50, 50), output_dim=(50, 50)),
        conv2d("c2", 4, 4, 50)),
}


@pytest.mark.parametrize("case", sorted(LEGAL))
def test_legal_networks_pass(case):
    net = LEGAL[case]()
    assert diagnose(net, MAX78000) == []
    out = legalize(net, MAX78000)
    assert out.device == "MAX78000"
    assert out.layers == net.layers


def test_depthwise_is_legal_on_max78002_only():
    net = network(with_weights(conv2d("dw", 16, 16, conv_groups=16, weights=None)))
    assert diagnose(net, MAX78002) == []
    assert [d.code for d in diagnose(net, MAX78000)] == ["limit.groups"]


def test_padded_multipass_conv1d_legal_on_max78000_and_unpadded_on_max78002():
    # The vendor's SUPPORT_MULTIPASS_PADDED_CONV1D: MAX78000 pads a two-pass Conv1d,
    # MAX78002 only one-pass ones (64 channels) or unpadded ones.
    assert diagnose(network(conv1d("wide", 65, 8)), MAX78000) == []
    assert diagnose(network(conv1d("c64", 64, 8)), MAX78002) == []
    unpadded = conv1d("np", 65, 8, padding=(0, 0), output_dim=(30, 1))
    assert diagnose(network(unpadded), MAX78002) == []


def test_depthwise_with_32_bit_output_is_refused():
    # No case shows what the hardware does; the vendor tool stops or fails on it.
    net = network(with_weights(conv2d("dw", 16, 16, conv_groups=16, output_width=32,
                                      weights=None)))
    diags = diagnose(net, MAX78002)
    assert [d.code for d in diags] == ["limit.output-width"]
    assert "depthwise" in diags[0].message


def test_binary_weights_legal_on_max78002():
    net = network(conv2d("bin", quantization=-1, output_shift=7,
                         weights=np.where(weights_for(conv2d()) > 0, 1, -1)))
    assert diagnose(net, MAX78002) == []


def test_all_violations_are_reported_together():
    # Three independent problems in three layers: one error lists all of them.
    net = network(conv2d("a", output_shift=20), conv2d("b", 8, 8, stride=(2, 2),
                                                       output_dim=(4, 4)),
                  passthrough("c", 8, 4, activation=ACT_RELU))
    with pytest.raises(Ai8xError) as info:
        legalize(net, MAX78000)
    got = {(d.code, d.where) for d in info.value.diagnostics}
    assert {("limit.output-shift", "a"), ("limit.stride", "b"),
            ("limit.activation", "c")} <= got
    text = info.value.render()
    assert "error[limit.output-shift] a:" in text and "hint:" in text


def test_pool_channels_is_a_max78000_limit():
    net = network(passthrough("pool128", 128, 8, pool=(2, 2), pool_stride=(2, 2),
                              pooled_dim=(4, 4), output_dim=(4, 4)))
    assert "limit.pool-channels" not in {d.code for d in diagnose(net, MAX78002)}


def test_conv1d_layer_is_1d():
    lay = conv1d()
    assert lay.operator == OP_CONV1D and network(lay).input_shape == (4, 32)
    assert passthrough().operator == OP_NONE
