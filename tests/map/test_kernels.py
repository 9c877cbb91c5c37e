"""Kernel memory allocation: placement, packing and deduplication on small networks.

Expected contents are written out from the kernel-memory rules (seed 000, "Kernel
memory": one 9-byte kernel per column and processor, low-bit weights of neighbouring
output channels packed into one byte, 1-D kernels sharing columns)."""
from __future__ import annotations

import numpy as np
import pytest

from onnx2ai8x.devices import MAX78002
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.map.kernels import allocate_kernels
from onnx2ai8x.network import OP_CONV1D, OP_CONV2D, Layer, Network
from onnx2ai8x.placement import LayerPlacement, Placement


def conv(name, cin, cout, k=(3, 3), q=8, seed=0, op=OP_CONV2D, weights=None, **kw) -> Layer:
    rng = np.random.default_rng(seed)
    lo, hi = (-(2 ** (abs(q) - 1)), 2 ** (abs(q) - 1)) if q > 0 else (0, 2)
    shape = (cout, cin, k[0], k[1]) if op == OP_CONV2D else (cout, cin, k[0])
    if weights is None:
        weights = rng.integers(lo, hi, size=shape)
        if q == -1:
            weights = weights * 2 - 1
    dims = kw.pop("dims", (4, 4))
    return Layer(name=name, operator=op, input_channels=cin, output_channels=cout,
                 input_dim=dims, pooled_dim=dims, output_dim=dims, kernel_size=k,
                 padding=(1, 1) if op == OP_CONV2D else (1, 0), quantization=q,
                 weights=np.asarray(weights), **kw)


def place(layers, maps, device="MAX78000") -> Placement:
    net = Network(layers=tuple(layers), input_shape=(layers[0].input_channels, 4, 4),
                  device=device)
    pls = tuple(LayerPlacement(processor_map=i, output_processor_map=o, in_offset=0,
                               out_offset=0, next_sequence=n + 1 if n + 1 < len(maps) else -1)
                for n, (i, o) in enumerate(maps))
    return Placement(network=net, device=device, layers=pls, final_layer=len(layers) - 1)


def column(alloc, p: int, col: int) -> bytes:
    return dict(alloc.columns[p])[col]


def test_8bit_3x3_one_column_per_output_channel():
    lay = conv("c", 4, 8)
    alloc = allocate_kernels(place([lay], [(0xF, 0xFF)]))
    assert alloc.offset == (0,) and alloc.length == (8,) and alloc.count == (8,)
    w = lay.weights
    for p in range(4):
        assert len(alloc.columns[p]) == 8
        for m in range(8):
            want = bytes(int(v) & 0xFF for v in w[m, p].reshape(-1))
            assert column(alloc, p, m) == want
    assert all(not alloc.columns[p] for p in range(4, 64))


def test_second_layer_starts_at_next_multiple_of_four():
    a = conv("a", 4, 5, seed=1)
    b = conv("b", 5, 4, seed=2)
    alloc = allocate_kernels(place([a, b], [(0xF, 0x1F), (0x1F, 0xF)]))
    assert alloc.offset == (0, 8)
    # Processor 4 is only used by the second layer: it still starts at column 8 there.
    assert [c for c, _ in alloc.columns[4]] == [8, 9, 10, 11]
    assert [c for c, _ in alloc.columns[0]] == [0, 1, 2, 3, 4, 8, 9, 10, 11]


def test_output_processor_gap_skips_a_column():
    lay = conv("c", 1, 2, seed=3)
    # Outputs on processors 0 and 2: the column for (unused) processor 1 is skipped,
    # not loaded, but the mask counter still steps over it.
    alloc = allocate_kernels(place([lay], [(0x1, 0x5)]))
    assert alloc.count == (3,)
    assert [c for c, _ in alloc.columns[0]] == [0, 2]
    assert column(alloc, 0, 2) == bytes(int(v) & 0xFF for v in lay.weights[1, 0].reshape(-1))


def test_identical_weights_are_stored_once():
    w = np.arange(4 * 4 * 9).reshape(4, 4, 3, 3) % 100 - 50
    a = conv("a", 4, 4, weights=w)
    b = conv("b", 4, 4, weights=w.copy())
    alloc = allocate_kernels(place([a, b], [(0xF, 0xF), (0xF, 0xF)]))
    assert alloc.offset == (0, 0) and alloc.source == (0, 0)
    assert len(alloc.columns[0]) == 4


def test_4bit_weights_pack_two_output_channels_per_byte():
    lay = conv("c", 2, 4, q=4, seed=4)
    alloc = allocate_kernels(place([lay], [(0x3, 0xF)]))
    w = lay.weights & 0xF
    assert alloc.length == (2,)
    for p in range(2):
        for col in range(2):
            want = bytes(int(lo | hi << 4) for lo, hi in
                         zip(w[2 * col, p].reshape(-1), w[2 * col + 1, p].reshape(-1),
                             strict=True))
            assert column(alloc, p, col) == want


def test_binary_weights_store_minus_one_as_one():
    lay = conv("c", 1, 8, q=-1, seed=5)
    alloc = allocate_kernels(place([lay], [(0x1, 0xFF)], device="MAX78002"))
    bits = (lay.weights[:, 0].reshape(8, 9) == -1).astype(int)
    want = bytes(int(sum(bits[m, i] << m for m in range(8))) for i in range(9))
    [(col, data)] = alloc.columns[0]
    assert data == want


def test_1d_kernels_share_a_column():
    lay = conv("c", 1, 3, k=(3, 1), op=OP_CONV1D, seed=6, dims=(8, 1))
    alloc = allocate_kernels(place([lay], [(0x1, 0x7)]))
    w = lay.weights[:, 0] & 0xFF
    # Three 3-tap kernels fill one 9-byte column from its end: the first kernel last.
    assert alloc.length == (1,)
    assert column(alloc, 0, 0) == bytes(int(v) for v in np.concatenate([w[2], w[1], w[0]]))


def test_max78002_extended_processor_layers_fill_from_the_end():
    lay = conv("c", 1, 6, seed=7)
    alloc = allocate_kernels(place([lay], [(0x1, 0x3F)], device="MAX78002"))
    width = MAX78002.kernel_words_large
    assert alloc.offset == ((width - 6) & ~3,)


def test_kernel_memory_exhausted_names_the_layer():
    lay = conv("too_big", 1, 64 * 13, k=(3, 3), seed=8, dims=(2, 2))
    with pytest.raises(Ai8xError) as err:
        allocate_kernels(place([lay], [(0x1, (1 << 64) - 1)]))
    assert "too_big" in str(err.value) and "kernel memory" in str(err.value)
