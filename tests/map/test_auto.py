"""Automatic placement and the independent placement checker on small hand-built networks."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from onnx2ai8x.devices import MAX78000, MAX78002, get_device
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.map.auto import auto_place
from onnx2ai8x.map.memory_check import check_placement
from onnx2ai8x.network import ACT_RELU, ELTWISE_ADD, OP_CONV2D, OP_LINEAR, OP_NONE, Layer, Network


def conv(name: str, cin: int, cout: int, dim: int, seqs: tuple[int, ...], k: int = 3,
         pool: int = 1, **kw) -> Layer:
    pooled = dim // pool
    return Layer(name=name, operator=OP_CONV2D, input_channels=cin, output_channels=cout,
                 input_dim=(dim, dim), pooled_dim=(pooled, pooled), output_dim=(pooled, pooled),
                 kernel_size=(k, k), padding=(k // 2, k // 2), pool=(pool, pool),
                 pool_stride=(pool, pool), in_sequences=seqs,
                 weights=np.ones((cout, cin, k, k), dtype=np.int64),
                 **{"activation": ACT_RELU, **kw})


def passthrough(name: str, c: int, dim: int, seqs: tuple[int, ...], **kw) -> Layer:
    return Layer(name=name, operator=OP_NONE, input_channels=c, output_channels=c,
                 input_dim=(dim, dim), pooled_dim=(dim, dim), output_dim=(dim, dim),
                 in_sequences=seqs, **kw)


def popcount(x: int) -> int:
    return bin(x).count("1")


def chain() -> Network:
    return Network(layers=(conv("c0", 3, 16, 32, (-1,)), conv("c1", 16, 32, 32, (0,), pool=2),
                           conv("c2", 32, 100, 16, (1,)), conv("c3", 100, 10, 16, (2,), k=1)),
                   input_shape=(3, 32, 32), device="MAX78000", name="chain")


def test_chain_processors_and_offsets() -> None:
    net = chain()
    p = auto_place(net, MAX78000)
    assert check_placement(p) == []
    # one processor per channel up to 64; 100 channels: 2 passes of ceil(100/2)=50
    # rounded up to a multiple of 4 = 52 processors
    assert [popcount(pl.processor_map) for pl in p.layers] == [3, 16, 32, 52]
    for ll in range(1, 4):
        assert p.layers[ll].in_offset == p.layers[ll - 1].out_offset
        assert p.layers[ll].processor_map == p.layers[ll - 1].output_processor_map
        # an output may share offsets with its input only on other processors
        if p.layers[ll].in_offset == p.layers[ll].out_offset:
            assert p.layers[ll].processor_map & p.layers[ll].output_processor_map == 0
    assert p.layers[-1].output_layer and p.final_layer == 3
    assert not p.layers[0].big_data  # 32x32 HWC fits easily
    # blocks start on memory-instance boundaries
    assert all(((pl.processor_map & -pl.processor_map).bit_length() - 1) % 4 == 0
               for pl in p.layers)


def test_deterministic() -> None:
    assert auto_place(chain(), MAX78000).layers == auto_place(chain(), get_device("AI85")).layers


def test_chw_when_hwc_input_does_not_fit() -> None:
    # 3 x 128 x 128: HWC needs 128*128*4 = 64 KiB per instance (> 32 KiB); CHW 16 KiB.
    net = Network(layers=(conv("c0", 3, 8, 128, (-1,), pool=4),
                          conv("c1", 8, 8, 32, (0,))),
                  input_shape=(3, 128, 128), device="MAX78000")
    p = auto_place(net, MAX78000)
    assert p.layers[0].big_data
    assert p.layers[0].processor_map == 0b1 | 1 << 4 | 1 << 8  # one channel per instance
    assert check_placement(p) == []


def test_residual_operands_interleaved() -> None:
    net = Network(layers=(
        conv("c0", 3, 16, 16, (-1,)),
        passthrough("copy", 16, 16, (0,)),
        conv("c2", 16, 16, 16, (0,)),
        dataclasses.replace(passthrough("add", 16, 16, (1, 2)), eltwise=ELTWISE_ADD,
                            operands=2),
    ), input_shape=(3, 16, 16), device="MAX78000")
    p = auto_place(net, MAX78000)
    assert check_placement(p) == []
    a, b, add = p.layers[1], p.layers[2], p.layers[3]
    assert a.write_gap == b.write_gap == 1
    assert {a.out_offset, b.out_offset} == {add.in_offset, add.in_offset + 4}
    assert a.output_processor_map == b.output_processor_map == add.processor_map
    assert add.in_sequences == (1, 2)


def test_concatenation_side_by_side() -> None:
    net = Network(layers=(
        conv("a", 3, 8, 16, (-1,)),
        conv("b", 3, 8, 16, (-1,)),
        conv("cat", 16, 4, 16, (0, 1)),
    ), input_shape=(3, 16, 16), device="MAX78000")
    p = auto_place(net, MAX78000)
    assert check_placement(p) == []
    a, b, cat = p.layers
    assert a.out_offset == b.out_offset == cat.in_offset
    assert a.output_processor_map & b.output_processor_map == 0
    assert a.output_processor_map | b.output_processor_map == cat.processor_map
    # the first input's channels come first
    assert a.output_processor_map < b.output_processor_map
    assert popcount(cat.processor_map) == 16


def test_flatten_linear() -> None:
    lin = Layer(name="fc", operator=OP_LINEAR, input_channels=16, output_channels=10,
                input_dim=(4, 4), pooled_dim=(4, 4), output_dim=(1, 1), kernel_size=(1, 1),
                flatten=True, in_sequences=(0,), output_width=32,
                weights=np.ones((10, 256), dtype=np.int64))
    net = Network(layers=(conv("c0", 3, 16, 4, (-1,)), lin), input_shape=(3, 4, 4))
    p = auto_place(net, MAX78002)
    assert p.device.name == "MAX78002"
    assert popcount(p.layers[1].processor_map) == 16
    assert popcount(p.layers[1].output_processor_map) == 10
    assert check_placement(p) == []


def test_data_that_does_not_fit_names_the_layer() -> None:
    # 64 channels of 128x128 output: 64 KiB per instance (MAX78000 has 32 KiB)
    net = Network(layers=(conv("big", 3, 64, 128, (-1,)),), input_shape=(3, 128, 128))
    with pytest.raises(Ai8xError) as err:
        auto_place(net, MAX78000)
    assert err.value.code == "map.data-memory"
    assert "`big`" in err.value.render()
    assert "streaming" in err.value.render()


def test_kernel_memory_exhausted() -> None:
    # 64 -> 64 channels of 3x3 kernels: 64 columns per processor per layer; 13 layers on
    # all 64 processors need 832 > 768 columns (distinct weights: identical ones would be
    # stored once)
    layers = tuple(dataclasses.replace(conv(f"c{i}", 64, 64, 4, (i - 1,)),
                                       weights=np.full((64, 64, 3, 3), i % 100))
                   for i in range(13))
    net = Network(layers=layers, input_shape=(64, 4, 4))
    with pytest.raises(Ai8xError) as err:
        auto_place(net, MAX78000)
    assert err.value.code == "map.kernel-memory"
    assert auto_place(net, MAX78002)  # 4096 columns per processor


def test_too_many_layers() -> None:
    layers = tuple(conv(f"c{i}", 4, 4, 4, (i - 1,)) for i in range(33))
    with pytest.raises(Ai8xError) as err:
        auto_place(Network(layers=layers, input_shape=(4, 4, 4)), MAX78000)
    assert err.value.code == "map.layers"


def test_partial_hints_are_kept() -> None:
    p = auto_place(chain(), MAX78000, {"c1": {"processors": 0xFFFF << 16},
                                          "c2": {"out_offset": 0x4000}})
    assert p.layers[1].processor_map == 0xFFFF << 16
    assert p.layers[0].output_processor_map == 0xFFFF << 16
    assert p.layers[2].out_offset == 0x4000 and p.layers[3].in_offset == 0x4000


# --- the checker finds what is wrong ---------------------------------------------------

def _broken(**changes) -> list:
    net = chain()
    p = auto_place(net, MAX78000)
    ll = changes.pop("layer")
    layers = list(p.layers)
    layers[ll] = dataclasses.replace(layers[ll], **changes)
    return check_placement(dataclasses.replace(p, layers=tuple(layers)))


def test_checker_processor_count() -> None:
    diags = _broken(layer=1, processor_map=0xFF)
    assert [d.code for d in diags] == ["map.processors"]
    assert "c1" in diags[0].where and "16" in diags[0].message


def test_checker_offset_outside_memory() -> None:
    codes = {d.code for d in _broken(layer=2, out_offset=0x7F00)}
    assert "map.data-memory" in codes


def wide_chain() -> Network:
    """Every tensor on all 64 processors: offsets alone separate the data."""
    return Network(layers=tuple(conv(f"w{i}", 64, 64, 8, (i - 1,)) for i in range(4)),
                   input_shape=(64, 8, 8))


def _moved(net: Network, ll: int, offset: int) -> list:
    p = auto_place(net, MAX78000)
    layers = list(p.layers)
    layers[ll] = dataclasses.replace(layers[ll], out_offset=offset)
    if ll + 1 < len(layers):
        layers[ll + 1] = dataclasses.replace(layers[ll + 1], in_offset=offset)
    return check_placement(dataclasses.replace(p, layers=tuple(layers)))


def test_wide_chain_alternates_two_buffers() -> None:
    net = wide_chain()
    p = auto_place(net, MAX78000)
    size = 8 * 8 * 4  # one word per pixel
    offs = [p.layers[0].in_offset] + [pl.out_offset for pl in p.layers]
    for a, b in zip(offs, offs[1:], strict=False):
        assert abs(a - b) >= size  # never on top of the layer's own input
    assert len(set(offs)) == 2  # dead data is reused


def test_checker_overwrite_of_live_data() -> None:
    # w2 writes where its own input (w1's output) lives
    net = wide_chain()
    p = auto_place(net, MAX78000)
    diags = _moved(net, 2, p.layers[1].out_offset)
    assert "map.overwrite" in {d.code for d in diags}
    assert any("`w2`" in d.where for d in diags)


def test_checker_allows_reuse_of_dead_data() -> None:
    # w2 may write where w0's output was: only w1 read it, and w1 has run
    net = wide_chain()
    p = auto_place(net, MAX78000)
    assert _moved(net, 2, p.layers[0].out_offset) == []


def test_checker_chw_needs_one_channel_per_instance() -> None:
    net = Network(layers=(conv("c0", 3, 8, 8, (-1,)),), input_shape=(3, 8, 8))
    p = auto_place(net, MAX78000)
    bad = dataclasses.replace(p, layers=(dataclasses.replace(p.layers[0], big_data=True,
                                                             processor_map=0b111),))
    assert [d.code for d in check_placement(bad)] == ["map.chw"]
