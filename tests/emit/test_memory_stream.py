"""The KERNELS stream against the stored kernels, written out kernel by kernel.

Seed 000, "Kernel memory": each stored 9-byte kernel has a 16-byte slot; the express
loader packs a run of consecutive kernels byte by byte into big-endian words (the last
zero-padded) at the run's address with the in-processor part divided by 4; without it
every kernel is four words (byte 0, bytes 1-4, bytes 5-8, zero)."""
from __future__ import annotations

from onnx2ai8x.emit.memory import kernel_stream
from onnx2ai8x.map.kernels import allocate_kernels
from tests.lowering import lowered
from tests.map.test_kernels import conv, place


def _runs(alloc):
    """(address, [kernel bytes]) per run of kernels at consecutive 16-byte slots."""
    mem = alloc.device
    runs = []
    for p, cols in enumerate(alloc.columns):
        for col, data in cols:
            addr = mem.kernel_address(p, col)
            if runs and runs[-1][0] + 16 * len(runs[-1][1]) == addr:
                runs[-1][1].append(data)
            else:
                runs.append((addr, [data]))
    return runs


def _placed():
    layers = [conv("a", 8, 8, seed=1), conv("b", 8, 5, k=(1, 1), seed=2),
              conv("c", 5, 3, seed=3)]
    maps = [(0xFF, 0xFF), (0xFF << 8, 0x1F), (0x1F << 20, 0x7)]
    return place(layers, maps)


def test_express_stream_packs_each_run():
    placement = _placed()
    alloc = allocate_kernels(placement)
    window = alloc.device.kernel_stride_words * 16
    want = []
    for addr, kernels in _runs(alloc):
        raw = b"".join(kernels)
        raw += bytes(-len(raw) % 4)
        words = [int.from_bytes(raw[i:i + 4], "big") for i in range(0, len(raw), 4)]
        want.append((addr & ~(window - 1) | (addr & (window - 1)) >> 2, words))
    got = kernel_stream(lowered(placement))
    assert len(got) > 3
    assert got == want


def test_plain_stream_writes_four_words_per_kernel():
    placement = _placed()
    alloc = allocate_kernels(placement)
    want = [(addr, [w for k in kernels for w in (k[0], int.from_bytes(k[1:5], "big"),
                                                 int.from_bytes(k[5:9], "big"), 0)])
            for addr, kernels in _runs(alloc)]
    assert kernel_stream(lowered(placement), mexpress=False) == want
