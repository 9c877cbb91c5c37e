"""Data sections of the generated C: kernel stream, bias loads and input loads.

Pure functions returning plain values that the project writer lays out:

- `kernel_stream(hw)` -> `[(address, [words])]`: the `KERNELS` macro (kernel memory
  writes, address of each run and its 32-bit words);
- `bias_loads(hw)` -> `[(address, [bytes])]`: one `memcpy_8to32` per bias-memory run;
- `input_loads(hw, sample)` -> `[(address, [words])]`: one `memcpy32` per data-memory
  run of the sample input (not used when the input comes from FIFOs).

Each takes the lowered network (`onnx2ai8x.map.lowered.HwNetwork`) and reads its kernel
and bias allocation (the register computation reads the same allocation through
`onnx2ai8x.emit.registers.WeightMemoryMap.of`). Addresses come from
the Device (`onnx2ai8x.devices`), passes from `onnx2ai8x.map.hw.multipass`.
"""
from __future__ import annotations

import numpy as np

from ..devices import Device
from ..errors import Ai8xError
from ..map.hw import multipass, popcount, streams_1x1_as_3x3
from ..map.kernels import FREE as FREE_COLUMN
from ..map.kernels import (
    KERNEL_BYTES,
    hardware_kernel,
)
from ..map.lowered import HwNetwork
from .registers.layer_common import calcx4_index

START_LAYER = 0  # the vendor tool loads the input for layer 0 (its --start-layer default)


def input_loads(hw: HwNetwork, sample: np.ndarray,
                *, fifo: bool = False) -> list[tuple[int, list[int]]]:
    """`(address, words)` per `memcpy32` of the sample input into data memory.

    HWC input (seed 000, "Data memory"): each quad of input processors gets one buffer;
    per pixel one word per operand holding up to four channels (byte `p % 4` for
    processor `p`), passes of a multi-pass input interleaved pixel by pixel.
    CHW input ("big data"): one buffer per input processor, four consecutive pixels of
    its channel per word. With FIFOs (`fifo=True`) nothing is loaded into memory.
    """
    if fifo:
        return []
    network, placement = hw.network, hw.placement
    mem = placement.device
    lay = network.layers[START_LAYER]
    pl = placement.layers[START_LAYER]
    chans = lay.input_channels
    rows, cols = int(lay.input_dim[0]), int(lay.input_dim[1])
    operands = lay.operands
    arr = np.asarray(sample, dtype=np.int64)
    if arr.size != operands * chans * rows * cols:
        raise Ai8xError("emit.input", lay.name,
                        f"sample has {arr.size} values, the first layer reads "
                        f"{operands}x{chans}x{rows}x{cols}",
                        "pass a sample shaped as the network input")
    data = (arr.reshape(operands * chans, rows * cols) & 0xFF).astype(np.uint32)
    passes, per_pass = multipass(chans)
    pmap = pl.processor_map
    if pl.big_data:
        return _chw_loads(mem, pmap, pl.in_offset, data, chans, passes, per_pass)
    loads: list[tuple[int, list[int]]] = []
    pixels = rows * cols
    # Per quad (processor of its first channel): (address, words) of every pass.
    pending: dict[int, list[tuple[int, np.ndarray]]] = {}
    c = 0
    shared = mem.processors_per_memory
    for ch in range(0, passes * mem.processors, shared):
        proc = ch % mem.processors
        quad_map = (pmap >> proc) & ((1 << shared) - 1)
        if not quad_map:
            continue
        expand = c // per_pass
        addr = mem.sram_base + mem.quad_word(proc) * 4 + expand * 4 * operands
        if expand == 0:
            addr += pl.in_offset
        words = np.zeros((pixels, operands), dtype=np.uint32)
        this_c = c
        for slot in range(shared):
            if quad_map >> slot & 1:
                if this_c < chans:
                    for op in range(operands):
                        words[:, op] |= data[this_c + op * chans] << np.uint32(8 * slot)
                this_c += 1
        pending.setdefault(proc, []).append((addr, words))
        if expand == passes - 1:
            # One buffer per quad: pass k of pixel i at word (i * passes + k) * operands.
            parts = pending[proc]
            merged = np.zeros((pixels, passes, operands), dtype=np.uint32)
            for k, (_, w) in enumerate(parts):
                merged[:, k, :] = w
            loads.append((parts[0][0], [int(x) for x in merged.reshape(-1)]))
        c += popcount(quad_map)
        if c >= per_pass * passes:
            break
    return loads


def _chw_loads(mem: Device, pmap: int, in_offset: int, data: np.ndarray, chans: int,
               passes: int, per_pass: int) -> list[tuple[int, list[int]]]:
    """CHW input: each enabled processor's channel, four pixels per word (byte 0 first)."""
    loads = []
    c = 0
    for ch in range(passes * mem.processors):
        proc = ch % mem.processors
        if not pmap >> proc & 1:
            continue
        expand = c // per_pass
        addr = mem.sram_base + mem.quad_word(proc) * 4 + expand * 4
        if expand == 0:
            addr += in_offset
        values = data[c] if c < chans else np.zeros(data.shape[1], dtype=np.uint32)
        padded = np.zeros(-(-values.size // 4) * 4, dtype=np.uint32)
        padded[:values.size] = values
        quads = padded.reshape(-1, 4)
        words = quads[:, 0] | quads[:, 1] << 8 | quads[:, 2] << 16 | quads[:, 3] << 24
        loads.append((addr, [int(x) for x in words]))
        c += 1
        if c >= per_pass * passes:
            break
    return loads


def _kernel_index(hw: HwNetwork, ll: int, column: np.ndarray) -> np.ndarray:
    """Columns as addressed in memory: calcx4 layers spread their kernels over the four
    memory instances (quarter `column // count`, row `column % count`)."""
    kernels = hw.weights.kernels
    if not kernels.calcx4[ll]:
        return column
    mem = kernels.device
    lay = hw.network.layers[ll]
    ks = hardware_kernel(lay, mem, as_3x3=streams_1x1_as_3x3(hw.placement, ll))
    size = 1 if ks is None else ks[1][0] * ks[1][1]
    passes = multipass(lay.input_channels)[0]
    count = passes * lay.output_channels * 9 * abs(lay.quantization) // (size * 8)
    start = kernels.offset[ll]
    quarter, rest = np.divmod(column - start, (count + 3) // 4)
    narrow, wide = mem.kernel_words_small, mem.kernel_words_large
    if start >= narrow:
        # Kernels in the extended memory (processors 0, 16, 32, 48: four more instances
        # of (wide - narrow) / 4 words above word `narrow`; izer/tornadocnn.py
        # MASK_WIDTH_LARGE): each quarter from the word the mask start register names
        # (calcx4_index, as the register is programmed), narrow + (start - narrow) / 4.
        # The vendor's writer adds start / 4 there instead, past the memory's end (it
        # stops with an IndexError on such a layer: random 67 of the MAX78002).
        return quarter * ((wide - narrow) // 4) + rest + calcx4_index(start, mem)
    start //= 4
    small = quarter * (narrow // 4) + rest + start
    large = quarter * ((wide - narrow) // 4) + rest + narrow + start
    return np.where(column < narrow, small, large)


def kernel_stream(hw: HwNetwork, *, mexpress: bool = True, skip_zero: bool = False
                  ) -> list[tuple[int, list[int]]]:
    """The `KERNELS` stream: `(address, words)` per run of consecutive kernel columns.

    With the express loader (`mexpress`, the vendor default; seed 000, "Kernel memory")
    the address of a run is the column's address with the in-processor part divided by
    4, and the 9-byte kernels follow each other byte by byte in big-endian words, the
    last word padded with zero bytes. Without it, each kernel is four words at its own
    16-byte slot: byte 0, bytes 1-4, bytes 5-8, and a zero word that commits the write.
    The kernels are the lowered network's allocation (map/weights.py). `skip_zero`
    (--zero-sram): kernels of nine zero bytes are left out, since the mask-memory
    self-test has zeroed them already (the vendor does the same; a run breaks there).
    """
    kernels = hw.weights.kernels
    mem = kernels.device
    window = mem.kernel_stride_words * 16
    # Every stored column at once, processor-major (numpy arrays: a Python step per
    # kernel was a large part of a conversion).
    procs, cols = np.nonzero(kernels.owners != FREE_COLUMN)
    layers = kernels.owners[procs, cols]
    index = cols.astype(np.int64)
    # (a set, not np.unique: numpy 2's unique imports numpy.ma, ~20 ms of start-up)
    for ll in sorted(set(layers.tolist())):
        if kernels.calcx4[ll]:
            chosen = layers == ll
            index[chosen] = _kernel_index(hw, ll, index[chosen])
    # A stable sort by address within each processor: where calcx4 layers overlap other
    # layers, both writes stay in the stream in column order (the memory keeps the later).
    order = np.lexsort((index, procs))
    procs, index = procs[order].astype(np.int64), index[order]
    data = kernels.image[procs, cols[order]]  # (kernels, 9) bytes in stream order
    if skip_zero:
        keep = data.any(axis=1)
        procs, index, data = procs[keep], index[keep], data[keep]
    quadrant, proc_in_quadrant = np.divmod(procs, mem.processors_per_quadrant)
    addr = (mem.kernel_base + quadrant * mem.quadrant_stride
            + proc_in_quadrant * mem.kernel_stride_words * 16 + index * 16)
    # A run continues while each kernel sits 16 bytes after the one before.
    starts = np.flatnonzero(np.diff(addr, prepend=addr[:1] - 1) != 16).tolist()
    bounds = list(zip(starts, starts[1:] + [len(addr)], strict=False))
    stream = []
    if not mexpress:
        # byte 0 in the low byte of word 0, bytes 1-8 big-endian in words 1-2, word 3 zero
        slots = np.zeros((len(data), 16), dtype=np.uint8)
        slots[:, 3] = data[:, 0]
        slots[:, 4:12] = data[:, 1:]
        words = slots.view(">u4").astype(np.int64)
        for a, b in bounds:
            stream.append((int(addr[a]), words[a:b].reshape(-1).tolist()))
        return stream
    # All runs at once: each run's bytes, zero-padded to whole words, in one buffer.
    first = np.asarray([a for a, _ in bounds], dtype=np.int64)
    kernels_in = np.asarray([b - a for a, b in bounds], dtype=np.int64)
    word_count = (kernels_in * KERNEL_BYTES + 3) // 4
    word_start = np.concatenate([[0], np.cumsum(word_count)])
    run_of = np.repeat(np.arange(len(bounds)), kernels_in)
    dest = (word_start[run_of] * 4 + (np.arange(len(data)) - first[run_of]) * KERNEL_BYTES)
    buffer = np.zeros(int(word_start[-1]) * 4, dtype=np.uint8)
    buffer[dest[:, None] + np.arange(KERNEL_BYTES)] = data
    words = buffer.view(">u4").tolist()
    starts_w = word_start.tolist()
    for r, (a, _) in enumerate(bounds):
        run = int(addr[a])
        stream.append((run & ~(window - 1) | (run & (window - 1)) >> 2,
                       words[starts_w[r]:starts_w[r + 1]]))
    return stream


def bias_loads(hw: HwNetwork) -> list[tuple[int, list[int]]]:
    """`(address, bytes)` per `memcpy_8to32` into a quadrant's bias memory (quadrants
    without bias values are skipped; each byte goes to its own 32-bit word)."""
    bias = hw.weights.bias
    return [(bias.address(q), list(values)) for q, values in enumerate(bias.memory) if values]
