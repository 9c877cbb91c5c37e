"""Automatic streaming: chosen only when the data does not fit, as few layers as needed."""
from __future__ import annotations

import pytest

from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.map.auto import auto_place
from onnx2ai8x.map.memory_check import (
    buffers,
    check_placement,
    output_bytes,
    stream_buffer_bytes,
)
from onnx2ai8x.network import Network
from tests.map.test_auto import conv


def big_input(channels: int = 3, dim: int = 128) -> Network:
    """A cats-dogs-like start: a 128x128 image whose frames do not fit data memory."""
    return Network(layers=(conv("c0", channels, 16, dim, (-1,)),
                           conv("c1", 16, 32, dim, (0,), pool=2),
                           conv("c2", 32, 64, dim // 2, (1,), pool=2),
                           conv("c3", 64, 10, dim // 4, (2,), pool=2)),
                   input_shape=(channels, dim, dim), device="MAX78000", name="big")


def test_big_frames_stream_the_first_layers():
    net = big_input()
    placement = auto_place(net, "MAX78000")
    streaming = [pl.streaming for pl in placement.layers]
    k = streaming.index(False)
    assert k >= 1 and not any(streaming[k:]), streaming  # a leading run of layers
    assert check_placement(net, placement, "MAX78000") == []
    # The FIFO feeds processors 0-2 (HWC, at most 4 channels on 0-3).
    assert placement.layers[0].processor_map == 0b111
    assert not placement.layers[0].big_data
    # Streaming buffers and the last streaming layer's output are live together: no two
    # of them that share a memory instance (byte lanes) may overlap.
    live = [b for b in buffers(net, placement) if b.producer < k]
    for i, a in enumerate(live):
        for b in live[i + 1:]:
            if a.lanes & b.lanes:
                assert a.end <= b.start or b.end <= a.start, (a, b)
    # A circular buffer holds a few rows, not the frame.
    assert stream_buffer_bytes(net, 1) < 128 * 128 * 4 // 8


def test_fewest_streaming_layers_are_chosen():
    net = big_input()
    placement = auto_place(net, "MAX78000")
    k = sum(pl.streaming for pl in placement.layers)
    # Layer c0's whole output (one word per pixel per instance) exceeds an instance, so
    # its reader c1 must stream; c1's output fits, so nothing after c1 streams.
    assert output_bytes(net.layers[0]) > 0x8000
    assert output_bytes(net.layers[1]) <= 0x8000
    assert k == 2


def test_data_that_fits_does_not_stream():
    net = big_input(dim=32)
    placement = auto_place(net, "MAX78000")
    assert not any(pl.streaming for pl in placement.layers)


def test_streaming_needs_a_fifo_sized_input():
    net = big_input(channels=8)
    with pytest.raises(Ai8xError) as err:
        auto_place(net, "MAX78000")
    d = err.value.diagnostics[0]
    assert d.code == "map.data-memory"
    assert "FIFO" in d.message and "4 input channels" in d.message
    assert "streaming" in d.hint
