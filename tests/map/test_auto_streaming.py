"""Automatic streaming: chosen only when the data does not fit, as few layers as needed,
with circular buffers of the rollover the project programs, within the device limits."""
from __future__ import annotations

import dataclasses

import pytest

from onnx2ai8x.devices import MAX78000
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.map.auto import auto_place
from onnx2ai8x.map.memory_check import (
    buffers,
    check_placement,
    output_bytes,
    stream_rollovers,
)
from onnx2ai8x.network import Network
from onnx2ai8x.placement import Placement
from tests.map.test_auto import conv

INSTANCE = 0x8000  # MAX78000 data memory per instance (bytes)


def big_input(channels: int = 3, dim: int = 128) -> Network:
    """A cats-dogs-like start: a 128x128 image whose frames do not fit data memory."""
    return Network(layers=(conv("c0", channels, 16, dim, (-1,)),
                           conv("c1", 16, 32, dim, (0,), pool=2),
                           conv("c2", 32, 64, dim // 2, (1,), pool=2),
                           conv("c3", 64, 10, dim // 4, (2,), pool=2)),
                   input_shape=(channels, dim, dim), device="MAX78000", name="big")


def instances(pmap: int) -> set[int]:
    return {p // 4 for p in range(64) if pmap >> p & 1}


def test_big_frames_stream_the_first_layers():
    net = big_input()
    placement = auto_place(net, MAX78000)
    streaming = [pl.streaming for pl in placement.layers]
    k = streaming.index(False)
    assert k >= 1 and not any(streaming[k:]), streaming  # a leading run of layers
    assert check_placement(net, placement) == []
    # HWC through the FIFO: processors 0-2 (a FIFO writes processors 0-3 of a quadrant)
    assert placement.layers[0].processor_map == 0b111
    assert not placement.layers[0].big_data
    # The circular buffers (the input, every streaming output but the last) and the
    # last streaming output never meet in a common memory instance, ends included (the
    # vendor's test), and every buffer ends inside its instance.
    roll = stream_rollovers(placement)
    ranges = [(pl.in_offset, pl.in_offset + 4 * roll[ll], instances(pl.processor_map))
              for ll, pl in enumerate(placement.layers[:k])]
    last = placement.layers[k - 1]
    ranges.append((last.out_offset, last.out_offset + output_bytes(net.layers[k - 1]),
                   instances(last.output_processor_map)))
    for i, (s0, e0, i0) in enumerate(ranges):
        assert e0 < INSTANCE
        for s1, e1, i1 in ranges[i + 1:]:
            if i0 & i1:
                assert e0 < s1 or e1 < s0, ranges


def test_rollover_is_the_vendor_formula():
    """MAX78000, a streaming layer after the first (vendor backend, 'Stream processing
    start' and 'Rollover'): start = (previous padded row) * (previous kernel rows - 1 +
    pool rows - 1) + previous kernel columns - 1 + pool columns + 2 (the vendor's default
    start increase); rollover = start + (pool rows - 1) * columns + max(stride, pool
    stride, pool)."""
    net = big_input()
    placement = auto_place(net, MAX78000)
    roll = stream_rollovers(placement)
    c0, c1 = net.layers[0], net.layers[1]
    row = c0.pooled_dim[1] + 2 * c0.padding[1]  # 130
    start = row * (c0.kernel_size[0] - 1 + c1.pool[0] - 1) + c0.kernel_size[1] - 1 \
        + c1.pool[1] + 2
    assert roll[1] == start + (c1.pool[0] - 1) * c1.input_dim[1] + 2 == 526
    # the first layer, fed by the FIFO: ((pool rows - 1) * columns + pool columns) * pool
    # rows words of prefill plus the stride
    assert roll[0] == 1 + 1
    assert roll[2:] == (None, None)


def test_fewest_streaming_layers_are_chosen():
    net = big_input()
    placement = auto_place(net, MAX78000)
    k = sum(pl.streaming for pl in placement.layers)
    # Layer c0's whole output (one word per pixel per instance) exceeds an instance, so
    # its reader c1 must stream; c1's output fits, so nothing after c1 streams.
    assert output_bytes(net.layers[0]) > INSTANCE
    assert output_bytes(net.layers[1]) <= INSTANCE
    assert k == 2


def test_data_that_fits_does_not_stream():
    net = big_input(dim=32)
    placement = auto_place(net, MAX78000)
    assert not any(pl.streaming for pl in placement.layers)
    assert stream_rollovers(placement) == (None,) * 4


def test_more_than_four_channels_use_the_other_fifos():
    net = big_input(channels=7)
    placement = auto_place(net, MAX78000)
    assert placement.layers[0].streaming
    # channels 0-3 on processors 0-3, channels 4-6 on 16-18
    assert placement.layers[0].processor_map == 0xF | 0x7 << 16
    assert check_placement(net, placement) == []


def test_streaming_needs_a_fifo_sized_input():
    net = big_input(channels=17)
    with pytest.raises(Ai8xError) as err:
        auto_place(net, MAX78000)
    d = err.value.diagnostics[0]
    assert d.code == "map.data-memory"
    assert "FIFO" in d.message and "16 input channels" in d.message
    assert "streaming" in d.hint


def test_stream_register_limits_give_a_clear_error():
    """A 16x1023 image (a legal size): the second layer must stream, and with 16x16
    pooling its stream start, (1023 + 2) padded words per row times (3 - 1 + 16 - 1)
    rows plus 3 - 1 + 16 + 2, exceeds the 14-bit field of MAX78000 (vendor
    MAX_ISVAL_BITS)."""
    w = 1023
    lay0 = conv("wide0", 1, 4, 8, (-1,))
    lay1 = conv("wide1", 4, 4, 8, (0,), pool=16)
    lay0 = dataclasses.replace(lay0, input_dim=(16, w), pooled_dim=(16, w),
                               output_dim=(16, w))
    lay1 = dataclasses.replace(lay1, input_dim=(16, w), pooled_dim=(1, w // 16),
                               output_dim=(1, w // 16))
    net = Network(layers=(lay0, lay1), input_shape=(1, 16, w), device="MAX78000", name="w")
    assert 16 * w * 4 > INSTANCE  # the first layer's output needs streaming
    assert (w + 2) * (2 + 15) + 2 + 16 + 2 > 2 ** 14 - 1
    with pytest.raises(Ai8xError) as err:
        auto_place(net, MAX78000)
    d = err.value.diagnostics[0]
    assert d.code == "map.streaming" and d.where == "layer `wide1`"
    assert "streaming start 17445" in d.message and "16383" in d.message
    assert "2 layer(s) streaming" in d.message


def test_streaming_stops_at_a_layer_that_cannot_stream():
    """A flattening layer cannot stream: data that needs it to stream does not fit."""
    net = big_input()
    c1 = dataclasses.replace(net.layers[1], flatten=True)
    net = dataclasses.replace(net, layers=(net.layers[0], c1, *net.layers[2:]))
    with pytest.raises(Ai8xError) as err:
        auto_place(net, MAX78000)
    d = err.value.diagnostics[0]
    assert d.code == "map.data-memory" and "`c1`" in d.message and "cannot stream" in d.message


def _with(placement: Placement, ll: int, **kw) -> Placement:
    layers = list(placement.layers)
    layers[ll] = dataclasses.replace(layers[ll], **kw)
    return dataclasses.replace(placement, layers=tuple(layers))


def test_checker_applies_the_vendor_streaming_rules():
    net = big_input()
    good = auto_place(net, MAX78000)
    roll = stream_rollovers(good)
    # the input on processors 4-6, which no FIFO writes
    diags = check_placement(net, _with(good, 0, processor_map=0x70))
    assert any(d.code == "map.streaming" and "FIFO" in d.message for d in diags), diags
    # a circular buffer reaching the end of the instance
    end = INSTANCE - 4 * roll[1]
    bad = _with(_with(good, 0, out_offset=end), 1, in_offset=end)
    msgs = [d.message for d in check_placement(net, bad) if d.code == "map.streaming"]
    assert any("reaches the end" in m for m in msgs), msgs
    # the last streaming output on its input's processors, starting where the input's
    # circular buffer ends: the vendor's ranges include both ends, so they touch
    last = good.layers[1]
    touching = _with(good, 1, out_offset=last.in_offset + 4 * roll[1],
                     output_processor_map=last.processor_map << 0)
    msgs = [d.message for d in check_placement(net, touching) if d.code == "map.streaming"]
    assert any("overlap" in m for m in msgs), msgs
    # one word further is clear of it
    clear = _with(touching, 1, out_offset=last.in_offset + 4 * roll[1] + 4)
    assert [d for d in check_placement(net, clear) if d.code == "map.streaming"] == []


def test_buffers_of_the_streaming_part():
    net = big_input()
    placement = auto_place(net, MAX78000)
    roll = stream_rollovers(placement)
    bufs = {b.producer: b for b in buffers(net, placement)}
    # the input and c0's output are circular buffers of their reader's rollover, live
    # until the streaming part (c0, c1) ends; c1's output is whole
    assert bufs[-1].end - bufs[-1].start == 4 * roll[0] and bufs[-1].dies == 1
    assert bufs[0].end - bufs[0].start == 4 * roll[1] and bufs[0].dies == 1
    assert bufs[1].end - bufs[1].start == output_bytes(net.layers[1])
    assert bufs[1].streaming and not bufs[2].streaming and bufs[1].dies == 2


def test_no_streaming_next_to_a_1x1_convolution():
    """Next to a streaming layer a 1x1 convolution runs on the 3x3 kernel hardware; the
    mapper does not choose that, and says why when nothing else fits."""
    net = big_input()
    c2 = conv("c2", 32, 64, 64, (1,), k=1, pool=2)
    net = dataclasses.replace(net, layers=(*net.layers[:2], c2, net.layers[3]))
    with pytest.raises(Ai8xError) as err:
        auto_place(net, MAX78000)
    d = err.value.diagnostics[0]
    assert d.code == "map.streaming" and d.where == "layer `c2`"
    assert "1x1 convolution" in d.message and "more cannot stream" in d.message


def test_a_given_number_of_layers_streams():
    net = big_input()
    placement = auto_place(net, MAX78000, stream_layers=3)
    assert [pl.streaming for pl in placement.layers] == [True, True, True, False]
    assert check_placement(net, placement) == []
    with pytest.raises(Ai8xError) as err:
        auto_place(net, MAX78000, stream_layers=9)
    assert err.value.diagnostics[0].code == "map.streaming"
    assert "at most 4 can" in err.value.diagnostics[0].message


@pytest.mark.parametrize("channels,dim,want", [
    (3, 32, 0x7),                    # fits: HWC on FIFO 0's processors
    (15, 16, 0x0007_000F_000F_000F),  # four channels per FIFO, processors 16q .. 16q + 3
    (3, 128, 0x7),                   # too big for HWC: streams (never CHW on 0, 4, 8)
])
def test_fifo_option_puts_the_input_on_fifo_processors(channels, dim, want):
    net = big_input(channels, dim)
    placement = auto_place(net, MAX78000, fifo=True)
    assert placement.layers[0].processor_map == want
    assert not placement.layers[0].big_data
    assert check_placement(net, placement) == []
    # without the option a 15-channel input is packed from processor 0
    if channels == 15:
        assert auto_place(net, MAX78000).layers[0].processor_map == 0x7FFF
