"""Bias memory allocation on small networks (seed 000, "Bias": one bias memory of 8-bit
values per quadrant; a regular layer keeps its bias in one quadrant)."""
from __future__ import annotations

import numpy as np
import pytest

from onnx2ai8x.devices import MAX78000
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.map.bias import ALL_GROUPS, allocate_bias
from onnx2ai8x.network import OP_CONV2D, Layer, Network
from onnx2ai8x.placement import LayerPlacement, Placement


def layer(name, cin, cout, bias, groups=1) -> Layer:
    return Layer(name=name, operator=OP_CONV2D, input_channels=cin, output_channels=cout,
                 input_dim=(4, 4), pooled_dim=(4, 4), output_dim=(4, 4), kernel_size=(3, 3),
                 padding=(1, 1), conv_groups=groups,
                 weights=np.ones((cout, cin // groups, 3, 3), dtype=np.int64),
                 bias_hw=None if bias is None else np.asarray(bias, dtype=np.int64))


def place(layers, maps, device="MAX78000", bias_groups=None) -> Placement:
    net = Network(layers=tuple(layers), input_shape=(layers[0].input_channels, 4, 4),
                  device=device)
    bias_groups = bias_groups or [None] * len(layers)
    pls = tuple(LayerPlacement(processor_map=i, output_processor_map=o, in_offset=0,
                               out_offset=0, bias_group_map=g)
                for (i, o), g in zip(maps, bias_groups, strict=True))
    return Placement(network=net, device=device, layers=pls, final_layer=len(layers) - 1)


def test_one_layer_in_quadrant_zero():
    b = [1, -2, 3, -4]
    pl = place([layer("a", 4, 4, b)], [(0xF, 0xF)])
    alloc = allocate_bias(pl)
    assert alloc.group == (0,) and alloc.offsets == ((0, 0, 0, 0),)
    assert alloc.memory[0] == tuple(v & 0xFF for v in b)
    assert alloc.memory[1:] == ((), (), ())
    assert alloc.address(0) == 0x50108000 and alloc.address(1) == 0x50508000


def test_larger_bias_first_then_least_used_quadrant():
    small = layer("small", 4, 4, [1] * 4)
    big = layer("big", 4, 20, list(range(1, 21)))
    # Both layers may use quadrants 0 and 1 (processors 0-3 and 16-19 are in use).
    maps = [(0xF | 0xF << 16, 0xF), (0xF, 0xFFFFF)]
    pl = place([small, big], maps)
    alloc = allocate_bias(pl)
    assert alloc.group == (1, 0)
    assert alloc.offsets[1][0] == 0 and alloc.offsets[0][1] == 0
    assert alloc.memory[0] == tuple(range(1, 21)) and alloc.memory[1] == (1, 1, 1, 1)


def test_bias_quadrant_from_the_sidecar_is_honoured():
    pl = place([layer("a", 4, 4, [5] * 4), layer("b", 4, 4, [6] * 4)],
               [(0xF | 0xF << 16, 0xF), (0xF, 0xF)], bias_groups=[None, (1,)])
    alloc = allocate_bias(pl)
    assert alloc.group == (0, 1)


def test_all_zero_bias_takes_no_memory():
    pl = place([layer("a", 4, 4, [0, 0, 0, 0])], [(0xF, 0xF)])
    alloc = allocate_bias(pl)
    assert alloc.group == (None,) and alloc.memory == ((), (), (), ())


def test_output_not_starting_a_quad_leaves_leading_bytes():
    # Output processors 2..5: the bias counter starts at byte 2 of the layer's slot.
    pl = place([layer("a", 4, 4, [7, 8, 9, 10])], [(0xF, 0x3C)])
    alloc = allocate_bias(pl)
    assert alloc.memory[0] == (0, 0, 7, 8, 9, 10)


def test_identical_bias_is_shared():
    pl = place([layer("a", 4, 4, [1, 2, 3, 4]), layer("b", 4, 4, [1, 2, 3, 4])],
               [(0xF, 0xF), (0xF, 0xF)])
    alloc = allocate_bias(pl)
    assert alloc.group == (0, 0) and alloc.offsets[0] == alloc.offsets[1]
    assert len(alloc.memory[0]) == 4


def test_depthwise_bias_lives_in_every_quadrant_it_reads():
    b = list(range(1, 9))
    pmap = 0xF | 0xF << 16
    pl = place([layer("dw", 8, 8, b, groups=8)], [(pmap, pmap)], device="MAX78002")
    alloc = allocate_bias(pl)
    assert alloc.group == (ALL_GROUPS,)
    assert alloc.offsets[0][0] == 0 and alloc.offsets[0][1] == 0
    assert alloc.offsets[0][2] is None and alloc.offsets[0][3] is None
    # Same input and output processors (broadcast): the four bias memories of a quadrant
    # are read in parallel, so byte k holds the value of processor (k % 4) * 4 + k // 4.
    def expected(values):
        return [values[(k % 4) * 4 + k // 4] if (k % 4) * 4 + k // 4 < 4 else 0
                for k in range(16)]
    assert list(alloc.memory[0]) == expected(b[:4])
    # Trailing unused bytes of the last quadrant written are not loaded.
    assert list(alloc.memory[1]) == expected(b[4:])[:13]


def test_depthwise_bias_moving_data_keeps_processor_order():
    b = [9, 8, 7, 6]
    pl = place([layer("dw", 4, 4, b, groups=4)], [(0xF, 0xF0)], device="MAX78002")
    alloc = allocate_bias(pl)
    assert alloc.memory[0] == (9, 8, 7, 6)


def test_bias_memory_exhausted_names_the_layer():
    size = MAX78000.bias_bytes_per_instance
    pl = place([layer("wide", 4, size + 4, [1] * (size + 4))], [(0xF, (1 << 64) - 1)])
    with pytest.raises(Ai8xError) as err:
        allocate_bias(pl)
    assert "wide" in str(err.value) and "bias memory" in str(err.value)
