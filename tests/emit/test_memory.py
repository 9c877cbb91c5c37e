"""Data sections on small networks: input loads, the KERNELS stream and bias loads.

Expected words are written from the memory layout rules (seed 000, "Data memory": HWC
packs four channels per 32-bit word, byte p % 4 for processor p; CHW packs four pixels of
one channel per word; each quad of processors has its own memory instance)."""
from __future__ import annotations

import numpy as np

from onnx2ai8x.emit.memory import bias_loads, input_loads, kernel_stream
from onnx2ai8x.network import OP_CONV2D, Layer, Network
from onnx2ai8x.placement import LayerPlacement, Placement
from tests.lowering import lowered

SRAM = 0x50400000  # MAX78000 data memory, quadrant 0, processors 0-3
QUAD = 0x8000  # bytes between the memory instances of two processor quads
MRAM = 0x50180000  # MAX78000 kernel memory, quadrant 0, processor 0


def one_layer(cin, cout, dims=(2, 2), bias=None, seed=0) -> Layer:
    w = np.random.default_rng(seed).integers(-128, 128, size=(cout, cin, 3, 3))
    return Layer(name="l0", operator=OP_CONV2D, input_channels=cin, output_channels=cout,
                 input_dim=dims, pooled_dim=dims, output_dim=dims, kernel_size=(3, 3),
                 padding=(1, 1), weights=w,
                 bias_hw=None if bias is None else np.asarray(bias, dtype=np.int64))


def place(lay, pmap, omap, in_offset=0, big_data=False) -> Placement:
    net = Network(layers=(lay,), input_shape=(lay.input_channels, *lay.input_dim),
                  device="MAX78000")
    pl = LayerPlacement(processor_map=pmap, output_processor_map=omap, in_offset=in_offset,
                        out_offset=0x4000, big_data=big_data, output_layer=True)
    return Placement(network=net, device="MAX78000", layers=(pl,), final_layer=0)


def test_hwc_input_three_channels_one_word_per_pixel():
    lay = one_layer(3, 4)
    pl = place(lay, 0x7, 0xF, in_offset=0x100)
    sample = np.arange(12).reshape(3, 2, 2) - 6
    [(addr, words)] = input_loads(lowered(pl), sample)
    assert addr == SRAM + 0x100
    u = sample.reshape(3, 4) & 0xFF
    assert words == [int(u[0, i] | u[1, i] << 8 | u[2, i] << 16) for i in range(4)]


def test_hwc_input_second_quad_goes_to_its_own_instance():
    lay = one_layer(6, 4)
    pl = place(lay, 0x3F, 0xF)
    sample = np.arange(24).reshape(6, 2, 2)
    loads = input_loads(lowered(pl), sample)
    assert [a for a, _ in loads] == [SRAM, SRAM + QUAD]
    assert loads[1][1] == [int(sample[4].flat[i] | sample[5].flat[i] << 8) for i in range(4)]


def test_chw_input_packs_four_pixels_per_word():
    lay = one_layer(2, 4, dims=(3, 2))
    pl = place(lay, 0x11, 0xF, big_data=True)
    sample = (np.arange(12).reshape(2, 3, 2) * 11) % 256 - 128
    loads = input_loads(lowered(pl), sample)
    assert [a for a, _ in loads] == [SRAM, SRAM + QUAD]
    flat = sample.reshape(2, 6) & 0xFF
    for c, (_, words) in enumerate(loads):
        px = list(flat[c]) + [0, 0]
        assert words == [int(px[i] | px[i + 1] << 8 | px[i + 2] << 16 | px[i + 3] << 24)
                         for i in range(0, 8, 4)]


def test_fifo_input_loads_nothing():
    lay = one_layer(3, 4)
    pl = place(lay, 0x7, 0xF)
    assert input_loads(lowered(pl), np.zeros((3, 2, 2)), fifo=True) == []


def test_kernel_stream_runs_and_byte_order():
    lay = one_layer(2, 2, seed=3)
    pl = place(lay, 0x3, 0x3)
    stream = kernel_stream(lowered(pl))
    # One run per processor: two 9-byte kernels = 18 bytes -> 5 words (zero padded).
    # Express-loader address: the in-processor part of the address divided by four.
    assert [a for a, _ in stream] == [MRAM, MRAM + 0x4000]
    for p, (_, words) in enumerate(stream):
        raw = bytes(int(v) & 0xFF for m in range(2) for v in lay.weights[m, p].reshape(-1))
        raw += bytes(2)
        assert words == [int.from_bytes(raw[i:i + 4], "big") for i in range(0, 20, 4)]


def test_bias_loads_one_byte_per_value():
    lay = one_layer(3, 4, bias=[-1, 2, -3, 4])
    pl = place(lay, 0x7, 0xF)
    assert bias_loads(lowered(pl)) == [(0x50108000, [0xFF, 2, 0xFD, 4])]


def test_no_bias_no_loads():
    lay = one_layer(3, 4)
    pl = place(lay, 0x7, 0xF)
    assert bias_loads(lowered(pl)) == []


def test_kernel_stream_without_express_loader_writes_four_words_per_kernel():
    lay = one_layer(1, 2, seed=4)
    pl = place(lay, 0x1, 0x3)
    [(addr, words)] = kernel_stream(lowered(pl), mexpress=False)
    assert addr == MRAM
    for m in range(2):
        k = [int(v) & 0xFF for v in lay.weights[m, 0].reshape(-1)]
        assert words[4 * m:4 * m + 4] == [
            k[0], k[1] << 24 | k[2] << 16 | k[3] << 8 | k[4],
            k[5] << 24 | k[6] << 16 | k[7] << 8 | k[8], 0]
