"""Sidecar writer: vendor syntax that the sidecar reader resolves to the same placement."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

from onnx2ai8x.devices import MAX78000, Device
from onnx2ai8x.map.auto import auto_place
from onnx2ai8x.network import (
    ACT_ABS,
    ELTWISE_ADD,
    OP_CONV1D,
    OP_LINEAR,
    Layer,
    Network,
)
from onnx2ai8x.sidecar.write import write_sidecar
from tests.map.test_auto import chain, conv, passthrough


def _roundtrip(net: Network, device: Device = MAX78000):
    from onnx2ai8x.sidecar.parse import parse_text
    from onnx2ai8x.sidecar.resolve import (
        resolve,
        resolve_placement,
        to_network,
        weights_from_network,
    )

    placement = auto_place(net, device)
    text = write_sidecar(placement)
    back = resolve_placement(parse_text(text), net, device)
    resolved = to_network(resolve(parse_text(text), weights_from_network(net), device,
                                  net.input_shape))
    return placement, text, back, resolved


GEOMETRY = ("operator", "input_channels", "output_channels", "input_dim", "pooled_dim",
            "output_dim", "kernel_size", "padding", "stride", "dilation", "conv_groups", "pool",
            "pool_stride", "pool_average", "pool_first", "eltwise", "operands", "activation",
            "output_shift", "output_width", "flatten")


def _assert_same(net: Network, placement, back, resolved) -> None:
    assert back.layers == placement.layers
    assert back.final_layer == placement.final_layer
    for a, b in zip(net.layers, resolved.layers, strict=True):
        for f in GEOMETRY:
            assert getattr(a, f) == getattr(b, f), (a.name, f)


def residual() -> Network:
    return Network(layers=(
        conv("c0", 3, 16, 16, (-1,)),
        passthrough("copy", 16, 16, (0,)),
        conv("c2", 16, 16, 16, (0,), output_shift=-1),
        dataclasses.replace(passthrough("add", 16, 16, (1, 2)), eltwise=ELTWISE_ADD,
                            operands=2),
        conv("c4", 16, 8, 16, (3,), pool=2, pool_average=True, activation=ACT_ABS),
    ), input_shape=(3, 16, 16), name="residual")


def one_d() -> Network:
    c0 = Layer(name="t0", operator=OP_CONV1D, input_channels=4, output_channels=8,
               input_dim=(40, 1), pooled_dim=(20, 1), output_dim=(20, 1), kernel_size=(5, 1),
               padding=(2, 0), pool=(2, 1), pool_stride=(2, 1), in_sequences=(-1,),
               quantization=4, output_shift=4, weights=np.ones((8, 4, 5), dtype=np.int64))
    fc = Layer(name="fc", operator=OP_LINEAR, input_channels=8, output_channels=3,
               input_dim=(20, 1), pooled_dim=(20, 1), output_dim=(1, 1), flatten=True,
               in_sequences=(0,), output_width=32, weights=np.ones((3, 160), dtype=np.int64))
    return Network(layers=(c0, fc), input_shape=(4, 40), name="oned")


@pytest.mark.parametrize("make", [chain, residual, one_d])
def test_roundtrip(make) -> None:
    net = make()
    placement, text, back, resolved = _roundtrip(net)
    _assert_same(net, placement, back, resolved)


def test_text_is_yaml_with_vendor_keys_and_reasons() -> None:
    net = residual()
    text = write_sidecar(auto_place(net, MAX78000))
    data = yaml.safe_load(text)
    assert set(data) == {"arch", "dataset", "layers"}
    add = data["layers"][3]
    assert add["in_sequences"] == ["copy", "c2"]
    assert add["eltwise"] == "add"
    assert data["layers"][1]["write_gap"] == 1
    assert data["layers"][4]["avg_pool"] == 2 and data["layers"][4]["activate"] == "Abs"
    assert all("processors" in lay and "out_offset" in lay for lay in data["layers"])
    assert "write_gap 1: output interleaved" in text
    assert "# Layer 0: conv2d, 3x16x16 -> 16x16x16" in text


def test_extra_reasons_and_determinism() -> None:
    net = chain()
    p = auto_place(net, MAX78000)
    a = write_sidecar(p, reasons={"c1": "hand-picked by the user"})
    assert "# hand-picked by the user" in a
    assert a == write_sidecar(p, reasons={"c1": ["hand-picked by the user"]})
    assert write_sidecar(p) == write_sidecar(p)


def test_non_default_keys_only_where_needed() -> None:
    net = chain()
    data = yaml.safe_load(write_sidecar(auto_place(net, MAX78000)))
    # in_offset follows the previous out_offset by default: never written for a chain
    assert all("in_offset" not in lay for lay in data["layers"][1:])
    assert all("output_processors" not in lay for lay in data["layers"][:-1])


def test_streaming_first_layer_states_fifo_in_the_header() -> None:
    # The vendor tool refuses a streaming first layer without --fifo, and the YAML has no
    # key for it: the written sidecar says so in its header.
    from onnx2ai8x.sidecar.write import implied_flags
    from tests.map.test_auto_streaming import big_input

    net = big_input()
    placement = auto_place(net, MAX78000)
    assert placement.layers[0].streaming
    flags = implied_flags(placement)
    assert [flag for flag, _ in flags] == ["--fifo"]
    text = write_sidecar(placement, flags=flags)
    header = text[:text.index("arch:")]
    assert "#   --fifo  (" in header
    assert yaml.safe_load(text) == yaml.safe_load(write_sidecar(placement))
    # nothing to state for a network that does not stream
    small = chain()
    assert implied_flags(auto_place(small, MAX78000)) == ()
    assert implied_flags(auto_place(small, MAX78000), "nearest")[0][0] == \
        "--avg-pool-rounding"
