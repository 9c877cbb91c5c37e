"""Automatic streaming: chosen only when the data does not fit, as few layers as needed,
with circular buffers of the rollover the project programs, within the device limits."""
from __future__ import annotations

import dataclasses

import pytest

from onnx2ai8x.devices import MAX78000, get_device
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.map.auto import auto_map, auto_place
from onnx2ai8x.map.hw import streams_1x1_as_3x3
from onnx2ai8x.map.memory_check import (
    buffers,
    check_placement,
    kernel_columns,
    output_bytes,
)
from onnx2ai8x.network import Network
from onnx2ai8x.placement import Placement
from tests.lowering import lowered
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
    hw = auto_map(net, MAX78000)
    placement = hw.placement
    streaming = [pl.streaming for pl in placement.layers]
    k = streaming.index(False)
    assert k >= 1 and not any(streaming[k:]), streaming  # a leading run of layers
    assert check_placement(placement) == []
    # HWC through the FIFO: processors 0-2 (a FIFO writes processors 0-3 of a quadrant)
    assert placement.layers[0].processor_map == 0b111
    assert not placement.layers[0].big_data
    # The circular buffers (the input, every streaming output but the last) and the
    # last streaming output never meet in a common memory instance, ends included (the
    # vendor's test), and every buffer ends inside its instance.
    roll = hw.rollover
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
    roll = auto_map(net, MAX78000).rollover
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
    hw = auto_map(net, MAX78000)
    assert not any(pl.streaming for pl in hw.placement.layers)
    assert hw.rollover == (None,) * 4


def test_more_than_four_channels_use_the_other_fifos():
    net = big_input(channels=7)
    placement = auto_place(net, MAX78000)
    assert placement.layers[0].streaming
    # channels 0-3 on processors 0-3, channels 4-6 on 16-18
    assert placement.layers[0].processor_map == 0xF | 0x7 << 16
    assert check_placement(placement) == []


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
    mapped = auto_map(net, MAX78000)
    good, roll = mapped.placement, mapped.rollover
    # the input on processors 4-6, which no FIFO writes
    diags = check_placement(_with(good, 0, processor_map=0x70))
    assert any(d.code == "map.streaming" and "FIFO" in d.message for d in diags), diags
    # a circular buffer reaching the end of the instance
    end = INSTANCE - 4 * roll[1]
    bad = _with(_with(good, 0, out_offset=end), 1, in_offset=end)
    msgs = [d.message for d in check_placement(bad) if d.code == "map.streaming"]
    assert any("reaches the end" in m for m in msgs), msgs
    # the last streaming output on its input's processors, starting where the input's
    # circular buffer ends: the vendor's ranges include both ends, so they touch
    last = good.layers[1]
    touching = _with(good, 1, out_offset=last.in_offset + 4 * roll[1],
                     output_processor_map=last.processor_map << 0)
    msgs = [d.message for d in check_placement(touching) if d.code == "map.streaming"]
    assert any("overlap" in m for m in msgs), msgs
    # one word further is clear of it
    clear = _with(touching, 1, out_offset=last.in_offset + 4 * roll[1] + 4)
    assert [d for d in check_placement(clear) if d.code == "map.streaming"] == []


def test_buffers_of_the_streaming_part():
    net = big_input()
    hw = auto_map(net, MAX78000)
    roll = hw.rollover
    bufs = {b.producer: b for b in buffers(hw)}
    # the input and c0's output are circular buffers of their reader's rollover, live
    # until the streaming part (c0, c1) ends; c1's output is whole
    assert bufs[-1].end - bufs[-1].start == 4 * roll[0] and bufs[-1].dies == 1
    assert bufs[0].end - bufs[0].start == 4 * roll[1] and bufs[0].dies == 1
    assert bufs[1].end - bufs[1].start == output_bytes(net.layers[1])
    assert bufs[1].streaming and not bufs[2].streaming and bufs[1].dies == 2


def _stored_columns(net: Network, placement: Placement, ll: int) -> int:
    """Kernel-memory columns layer ll's allocated kernels take per input processor
    (a column holds one 3x3 kernel, or nine 1x1 ones)."""

    owners = lowered(placement).weights.kernels.owners
    return max(int((owners[p] == ll).sum()) for p in range(owners.shape[0]))


def _columns(lay, as_3x3: bool) -> int:
    return kernel_columns(lay, (1 << lay.output_channels) - 1, as_3x3=as_3x3)


@pytest.mark.parametrize("device,dim", [("MAX78000", 128), ("MAX78002", 160)])
def test_a_1x1_convolution_reads_the_streaming_layers(device, dim):
    """Streaming has no 1x1 path: the 1x1 convolution reading the last streaming layer's
    output runs on the 3x3 hardware (weight in the centre, padding 1), as the vendor's
    faceid_112 sidecar has it; the mapper places it so and the kernel memory holds
    3x3 kernels for it (the 1x1 after it, not next to streaming, keeps 1-byte ones)."""
    net = big_input(dim=dim)  # c0's output does not fit a data memory instance
    c2 = conv("c2", 32, 64, dim // 2, (1,), k=1, pool=2)
    c3 = conv("c3", 64, 10, dim // 4, (2,), k=1, pool=2)
    net = dataclasses.replace(net, layers=(*net.layers[:2], c2, c3), device=device)
    placement = auto_place(net, get_device(device))
    assert [pl.streaming for pl in placement.layers] == [True, True, False, False]
    assert check_placement(placement) == []
    assert [streams_1x1_as_3x3(placement, ll) for ll in range(4)] \
        == [False, False, True, False]
    # 64 kernels per processor: 64 columns of 3x3, 8 of 1x1 ones (nine to a column)
    assert _stored_columns(net, placement, 2) == _columns(c2, True) == 64
    assert _stored_columns(net, placement, 3) == _columns(c3, False) == 2


def test_a_1x1_convolution_streams_as_3x3():
    """A 1x1 convolution whose frame does not fit streams too (as a 3x3 one with padding
    1, so it also satisfies the MAX78000's padded last streaming layer)."""
    net = big_input()
    c1 = conv("c1", 16, 16, 128, (0,), k=1)  # 16x128x128 out: needs to stream
    c2 = conv("c2", 16, 32, 128, (1,), pool=2)
    c3 = conv("c3", 32, 10, 64, (2,), k=1, pool=2)
    net = dataclasses.replace(net, layers=(net.layers[0], c1, c2, c3))
    assert output_bytes(c1) > INSTANCE
    placement = auto_place(net, MAX78000)
    assert [pl.streaming for pl in placement.layers] == [True, True, True, False]
    assert check_placement(placement) == []
    # c3 reads the last streaming layer: 3x3 hardware too
    assert [streams_1x1_as_3x3(placement, ll) for ll in range(4)] \
        == [False, True, False, True]
    assert _stored_columns(net, placement, 1) == _columns(c1, True) == 16
    assert _stored_columns(net, placement, 3) == _columns(c3, True) == 10


def test_a_given_number_of_layers_streams():
    net = big_input()
    placement = auto_place(net, MAX78000, stream_layers=3)
    assert [pl.streaming for pl in placement.layers] == [True, True, True, False]
    assert check_placement(placement) == []
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
    assert check_placement(placement) == []
    # without the option a 15-channel input is packed from processor 0
    if channels == 15:
        assert auto_place(net, MAX78000).layers[0].processor_map == 0x7FFF


def test_a_1x1_convolution_may_end_the_streaming_part():
    """MAX78000: the last streaming layer must be padded; a 1x1 convolution streams as
    a 3x3 one with padding 1, so it may be last. Here an unpadded 3x3 layer and two 1x1
    layers must all stream (their inputs exceed an instance), the second 1x1 ends the
    streaming part: the legalizer accepts it and the mapper places it."""
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.legalize import diagnose

    c0 = dataclasses.replace(conv("c0", 3, 8, 128, (-1,)), padding=(0, 0),
                             output_dim=(126, 126), pooled_dim=(128, 128))
    c1 = conv("c1", 8, 8, 126, (0,), k=1)
    c2 = conv("c2", 8, 8, 126, (1,), k=1, pool=2)
    net = Network(layers=(c0, c1, c2), input_shape=(3, 128, 128), device="MAX78000",
                  name="unpadded")
    assert output_bytes(c1) > INSTANCE and output_bytes(c2) <= INSTANCE
    assert not [d for d in diagnose(net, get_device("MAX78000"))
                if d.code == "limit.data-memory"]
    placement = auto_place(net, MAX78000)
    assert [pl.streaming for pl in placement.layers] == [True, True, True]
    assert check_placement(placement) == []
    # a 3x3 unpadded layer in its place cannot end it
    c2_3x3 = dataclasses.replace(conv("c2", 8, 8, 126, (1,), pool=2), padding=(0, 0),
                                 output_dim=(61, 61))
    bad = dataclasses.replace(net, layers=(c0, c1, c2_3x3))
    assert [d for d in diagnose(bad, get_device("MAX78000"))
            if d.code == "limit.data-memory" and "padding" in d.message]
