"""Known-answer check and cnn_unload reads on small networks (seed 000, "Data memory":
HWC output, four 8-bit channels per word, byte p % 4 for processor p, one memory
instance per quad; a 32-bit output uses one word per channel)."""
from __future__ import annotations

import numpy as np
import pytest

from onnx2ai8x.emit.unload import (
    expected_output,
    known_answer_layers,
    plan_unload,
    unload_plan,
)
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.network import OP_CONV2D, Layer, Network
from onnx2ai8x.placement import LayerPlacement, Placement

SRAM = 0x50400000
QUAD = 0x8000


def layer(cout, dims=(2, 2), width=8) -> Layer:
    return Layer(name="out", operator=OP_CONV2D, input_channels=4, output_channels=cout,
                 input_dim=dims, pooled_dim=dims, output_dim=dims, kernel_size=(1, 1),
                 output_width=width)


def place(lay, omap, out_offset=0x1000, write_gap=0) -> Placement:
    net = Network(layers=(lay,), input_shape=(4, *lay.input_dim), device="MAX78000")
    pl = LayerPlacement(processor_map=0xF, output_processor_map=omap, in_offset=0,
                        out_offset=out_offset, write_gap=write_gap, output_layer=True)
    return Placement(network=net, device="MAX78000", layers=(pl,), final_layer=0)


def test_five_channels_full_word_then_masked_word():
    lay = layer(5)
    pl = place(lay, 0x1F)
    out = (np.arange(20).reshape(5, 2, 2) * 13) % 256 - 128
    groups = expected_output(pl, [out])
    u = out.reshape(5, 4) & 0xFF
    full = [int(u[0, i] | u[1, i] << 8 | u[2, i] << 16 | u[3, i] << 24) for i in range(4)]
    # Sorted by mask: the one-byte words (channel 4, second quad) come first.
    assert groups == [
        (SRAM + QUAD + 0x1000, 0xFF, [int(u[4, i]) for i in range(4)]),
        (SRAM + 0x1000, 0xFFFFFFFF, full),
    ]


def test_write_gap_spreads_the_words():
    lay = layer(4, dims=(1, 2))
    pl = place(lay, 0xF, out_offset=0, write_gap=1)
    out = np.ones((4, 1, 2), dtype=np.int64)
    groups = expected_output(pl, [out])
    # Two pixels, one unused word between them: two groups of one word each.
    assert [(a, len(w)) for a, _, w in groups] == [(SRAM, 1), (SRAM + 8, 1)]


def test_wide_output_one_word_per_channel():
    lay = layer(2, dims=(1, 1), width=32)
    pl = place(lay, 0x3, out_offset=0)
    out = np.array([-5, 70000]).reshape(2, 1, 1)
    assert expected_output(pl, [out]) == [
        (SRAM, 0xFFFFFFFF, [(-5) & 0xFFFFFFFF, 70000])]


def test_known_answer_layers_and_count_check():
    lay = layer(4)
    pl = place(lay, 0xF)
    assert known_answer_layers(pl) == [0]
    with pytest.raises(Ai8xError):
        expected_output(pl, [])


def test_unload_reads_each_quad_word_once_per_pixel():
    lay = layer(8)
    pl = place(lay, 0xFF)
    # 8-bit output: one address per quad; the four pixel reads are a loop around one
    # `*addr++` statement (the vendor unrolls 8-bit unloads by one).
    assert unload_plan(pl) == [(SRAM + 0x1000, 1), (SRAM + QUAD + 0x1000, 1)]
    (out,) = plan_unload(pl).layers
    # Channel-major buffer: byte k of a word is channel k of the quad, `pixels` (4)
    # bytes further on in the buffer.
    lanes = ((0, 0), (8, 4), (16, 8), (24, 12))
    assert out.kind == "bytes" and out.indexed
    assert [(r.address, r.reads, r.lanes) for r in out.runs] == [
        (SRAM + 0x1000, 4, lanes), (SRAM + QUAD + 0x1000, 4, lanes)]


def test_unload_wide_output_unrolled_by_eight():
    lay = layer(4, dims=(1, 3), width=32)
    pl = place(lay, 0xF, out_offset=0)
    # Twelve consecutive words: eight statements, then four more (a loop only pays off
    # from two full bodies of eight).
    assert unload_plan(pl) == [(SRAM, 12)]
    lay = layer(4, dims=(2, 3), width=32)
    pl = place(lay, 0xF, out_offset=0)
    # 24 words: a loop running three times around eight statements.
    assert unload_plan(pl) == [(SRAM, 8)]
