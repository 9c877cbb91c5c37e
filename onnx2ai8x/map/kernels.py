"""Kernel memory: where each layer's weights live and what every kernel word holds.

Kernel memory (seed 000, "Kernel memory") has one column of 9-byte kernels per
processor; a layer occupies the same columns `offset .. offset + length - 1` in every
processor it reads from. 1/2/4-bit weights pack 8/4/2 output channels into one byte
(quantization, seed 000, "Weight quantization"); 1-D kernels share 9-byte columns.
The placement follows the vendor tool's allocator exactly (izer/kernels.py: layers with
all 64 input processors first, then the others in layer order; first free column that is
a multiple of 4 and free for every processor of the layer; on MAX78002 layers that only
use the processors with extended memory are packed from the end; identical weights of
two layers are stored once, izer/kdedup.py), so the register values and the
`KERNELS` stream match the vendor's.

`allocate_kernels(placement) -> KernelAllocation`, per layer (index as in
`placement.layers`):

- `offset[ll]`: first kernel column (9-byte units) of the layer (the vendor's
  `kern_offs`; 0 for layers without weights);
- `length[ll]`: columns per processor (`kern_len`);
- `count[ll]`: kernels the mask counter steps over per processor (`kern_count`);
- `out_channels[ll]`: output channels the mask counter walks (`kern_ochan`);
- `source[ll]`: the layer whose stored weights this layer uses (itself, or an earlier
  layer with identical weights), or None for layers without weights;
- `calcx4[ll]`: MAX78002 calcx4 layout (kernels interleaved over four instances);
- `image` (read-only uint8 array, processor x column x 9 bytes) and `owners` (read-only
  int32 array, processor x column: the layer stored there, -1 if free): everything
  stored, for bulk use (the KERNELS stream);
- `columns`: per processor, `(column, 9 kernel bytes)` of everything stored, and
  `owner`: the layer of each stored column (`((processor, column), layer)`), the same
  contents per column (computed from the arrays on access).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..devices import Device
from ..errors import Ai8xError, Diagnostic
from ..network import (
    Layer,
    Op,
)
from ..placement import Placement
from .hw import ffs, first_equal, fls, multipass, popcount, streams_1x1_as_3x3

SHARED = 4  # kernel columns are allocated in multiples of four (and quads of processors)
KERNEL_BYTES = 9
FREE = -1


@dataclass(frozen=True, eq=False)
class KernelAllocation:
    """Kernel memory placement of a network (fields: see the module docstring).

    The stored kernels are kept as two read-only arrays (`image`: per processor and
    column the 9 kernel bytes; `owners`: the layer of each column, -1 when free) so the
    stream writer can lay them out in bulk; `columns` and `owner` present the same
    contents per column.
    """

    device: Device
    offset: tuple[int, ...]
    length: tuple[int, ...]
    count: tuple[int, ...]
    out_channels: tuple[int, ...]
    source: tuple[int | None, ...]
    calcx4: tuple[bool, ...]
    image: np.ndarray = field(repr=False)  # uint8 (processors, columns, 9)
    owners: np.ndarray = field(repr=False)  # int32 (processors, columns), FREE if unused

    @property
    def columns(self) -> tuple[tuple[tuple[int, bytes], ...], ...]:
        """Per processor: `(column, 9 kernel bytes)` of every stored column, in order."""
        return tuple(tuple((int(c), self.image[p, c].tobytes())
                           for c in np.flatnonzero(self.owners[p] != FREE))
                     for p in range(len(self.owners)))

    @property
    def owner(self) -> tuple[tuple[tuple[int, int], int], ...]:
        """`((processor, column), layer)` of every stored column, processor-major."""
        procs, cols = np.nonzero(self.owners != FREE)
        return tuple(((int(p), int(c)), int(self.owners[p, c]))
                     for p, c in zip(procs.tolist(), cols.tolist(), strict=True))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KernelAllocation):
            return NotImplemented
        return (self.device, self.offset, self.length, self.count, self.out_channels,
                self.source, self.calcx4) == (other.device, other.offset, other.length,
                                              other.count, other.out_channels, other.source,
                                              other.calcx4) \
            and np.array_equal(self.image, other.image) \
            and np.array_equal(self.owners, other.owners)

    __hash__ = None  # type: ignore[assignment]  # holds arrays


def _extra(placement: Placement, ll: int, key: str, default=None):
    for k, v in placement.layers[ll].extra:
        if k == key:
            return v
    return default


def hardware_kernel(layer: Layer, mem: Device, *, as_3x3: bool = False
                    ) -> tuple[np.ndarray, tuple[int, int]] | None:
    """The layer's kernels as the hardware stores them, and the hardware kernel size.

    Rows are (output channel, input channel) pairs, output-major, as the vendor holds
    them: transposed convolutions use the flipped kernel with in/out swapped; dilated 1-D
    kernels are stretched with zeros when they fit 9 taps, else run as 3x3 2-D kernels
    with the taps in the centre column (seed 000, "Conv1d dilation"). `as_3x3` (see
    streams_1x1_as_3x3): a 1x1 kernel becomes a 3x3 one with the weight in the centre.
    """
    if layer.weights is None or layer.operator.passthrough:
        return None
    w = np.asarray(layer.weights, dtype=np.int64)
    ks = (int(layer.kernel_size[0]), int(layer.kernel_size[1]))
    if as_3x3 and ks == (1, 1) and layer.operator in (Op.CONV2D, Op.CONVTRANSPOSE2D):
        rows = w.swapaxes(0, 1) if layer.operator.transposed else w
        k = np.zeros((rows.shape[0] * rows.shape[1], 3, 3), dtype=np.int64)
        k[:, 1, 1] = rows.reshape(-1)
        return k, (3, 3)
    if layer.operator == Op.LINEAR:
        return w.reshape(-1, 1, 1), (1, 1)
    if layer.operator.transposed:
        w = np.flip(w, axis=(2, 3)).swapaxes(0, 1)
        return w.reshape(-1, ks[0], ks[1]), ks
    if layer.operator.one_d:
        k = w.reshape(-1, ks[0])
        dil = int(layer.dilation[0])
        if dil > 1:
            if (ks[0] - 1) * dil < KERNEL_BYTES:
                taps = [s for s in range(1, ks[0]) for _ in range(dil - 1)]
                k = np.insert(k, taps, 0, axis=1)
                return k, (k.shape[1], 1)
            if ks[0] <= mem.conv1d_dilated_kernel_max:
                k4 = np.insert(w.reshape(layer.output_channels, -1, ks[0], 1), [0, 1], 0, axis=3)
                if ks[0] == 2:
                    k4 = np.insert(k4, 0, 0, axis=2)
                elif ks[0] == 1:
                    k4 = np.insert(k4, [0, 1], 0, axis=2)
                return k4.reshape(-1, 3, 3), (3, 3)
            raise Ai8xError("map.kernels", layer.name,
                            f"dilated 1-D kernel of length {ks[0]} does not fit the hardware",
                            f"use a kernel of at most {mem.conv1d_dilated_kernel_max} taps")
        return k, (ks[0], 1)
    return w.reshape(-1, ks[0], ks[1]), ks


class _Memory:
    """Kernel memory being filled (local to one allocation run)."""

    def __init__(self, mem: Device) -> None:
        self.mem = mem
        # Arrays, written a run of columns at a time: the collection at the end and the
        # stream writer then need no Python step per column.
        shape = (mem.processors, mem.kernel_words_large)
        self.owner = np.full(shape, FREE, dtype=np.int32)
        self.used = np.zeros(shape, dtype=np.int32)
        self.data = np.zeros((shape[0], shape[1] * KERNEL_BYTES), dtype=np.uint8)

    def fits(self, p: int, offs: int, length: int, reverse: bool = False) -> bool:
        if reverse:
            return offs >= 0
        return offs + length <= self.mem.kernel_words(p)


class _Batch:
    """Kernel bytes bound for consecutive positions of one processor's kernel memory,
    written in one vectorized step: the same bytes, columns and owners as writing them
    one at a time (a column fills from its last byte; a full column moves on to the
    next), but without a Python step per byte, which dominated conversion time."""

    def __init__(self, memory: _Memory, p: int, koffs: int, layer: Layer, ll: int) -> None:
        self.memory, self.p, self.koffs, self.layer, self.ll = memory, p, koffs, layer, ll
        self.pending: list[list[int] | np.ndarray] = []
        self.count = 0  # bytes queued
        self.start = 0  # column (relative to koffs) of the first pending byte
        self.filled = 0  # bytes already in that column when the run began

    def put(self, col_target: int, values: list[int] | np.ndarray) -> int:
        """Queue `values` from `col_target`; return the column the next byte goes to."""
        if len(values) == 0:
            return col_target
        if not self.pending:
            self.start = col_target
            col = self.koffs + col_target
            used = self.memory.used
            self.filled = int(used[self.p, col]) if 0 <= col < used.shape[1] else 0
            self.count = 0
        self.pending.append(values)
        self.count += len(values)
        return self.start + (self.filled + self.count) // KERNEL_BYTES

    def flush(self, col_target: int) -> int:
        """Write the queued bytes; `col_target` is returned unchanged."""
        if not self.pending:
            return col_target
        values = np.concatenate([np.asarray(v, dtype=np.int64) for v in self.pending])
        self.pending = []
        p, memory = self.p, self.memory
        used, owner = memory.used[p], memory.owner[p]
        width = memory.mem.kernel_words(p)
        first = self.koffs + self.start
        total = self.filled + len(values)
        columns = (total - 1) // KERNEL_BYTES + 1
        # Column i of the run fails when it is past the processor's memory, when it is
        # empty but owned, or (after the first) when another layer left it partly filled;
        # the first failing column is the one reported.
        cols = np.arange(first, first + columns)
        inside = np.minimum(cols, len(used) - 1)
        n = used[inside]
        n[0] = self.filled
        fail = (cols + 1 > width) | ((n == 0) & (owner[inside] != FREE))
        fail[1:] |= n[1:] != 0
        if fail.any():
            raise _exhausted(self.layer, p, int(cols[int(np.argmax(fail))]), 1)
        owner[cols[n == 0]] = self.ll
        used[cols] = np.minimum(KERNEL_BYTES, total - np.arange(columns) * KERNEL_BYTES)
        # byte k goes to column first + t // 9, slot 8 - t % 9, where t = filled + k
        t = np.arange(self.filled, total)
        pos = (first + t // KERNEL_BYTES) * KERNEL_BYTES + (KERNEL_BYTES - 1) - t % KERNEL_BYTES
        memory.data[p, pos] = values & 0xFF
        return col_target


def _fill_8bit(batch: _Batch, col_target: int, reversed_rows: np.ndarray, ch: int,
               map_init: int, out_expand: int, out_thresh: int, in_exp: int, in_thresh: int,
               in_chan: int, out_chan: int, rows: int) -> int:
    """One input processor's 8-bit kernels (groups 1, no flattening): for each output
    channel slot m and input pass ie, the kernel row ch + m*in_chan + ie*in_thresh,
    last tap first, or zeros where that channel does not exist; unused output processors
    skip a column. Same bytes as the general per-kernel loop of `_place_layer`."""
    ksize = reversed_rows.shape[1]
    ie = np.arange(in_exp)[None, :]

    def segment(m0: int, m1: int) -> np.ndarray:
        m = np.arange(m0, m1)[:, None]
        src = ch + m * in_chan
        kidx = src + ie * in_thresh
        ok = (ie * in_thresh + ch < in_chan) & (src < rows) & (m < out_chan) & (kidx < rows)
        out = np.zeros((m1 - m0, in_exp, ksize), dtype=np.int64)
        out[ok] = reversed_rows[kidx[ok]]
        return out.reshape(-1)

    for expand in range(out_expand):
        this_map = map_init
        m0 = m = expand * out_thresh
        for _ in range(out_thresh):
            if this_map != 0 and this_map & 1 == 0:
                col_target = batch.put(col_target, segment(m0, m))
                col_target = batch.flush(col_target)
                while this_map & 1 == 0:
                    col_target += 1
                    this_map >>= 1
                m0 = m
            this_map >>= 1
            m += 1
        col_target = batch.put(col_target, segment(m0, m))
    return col_target


def _bulk_8bit(memory: _Memory, procs: list[int], koffs: int, ll: int, fast: np.ndarray,
               col_target: int, col_bytes: int, map_init: int, out_expand: int,
               out_thresh: int, in_exp: int, in_thresh: int, in_chan: int, out_chan: int,
               rows: int) -> int | None:
    """All input processors of an 8-bit ordinary convolution at once.

    Every processor runs the same sequence of runs as `_fill_8bit` (only the kernel
    rows differ: processor number `ch` reads rows `ch + m*in_chan + ie*in_thresh`), so
    when every column the layer touches is free in every processor the bytes, owners
    and fill counts are those of the per-processor fill, written in one step per run.
    Returns the column after the fill, or None (nothing written) when some column is
    not free or past a processor's memory: the per-processor fill then reports it.
    """
    ksize = fast.shape[1]
    # The control flow of _fill_8bit with the batch bookkeeping inlined: runs of
    # (start column, bytes already in it, [(m0, m1) output channel ranges]).
    runs: list[tuple[int, int, list[tuple[int, int]]]] = []
    start0 = col_target
    current: list = []

    def put(ct: int, m0: int, m1: int) -> int:
        nonlocal current
        size = (m1 - m0) * in_exp * ksize
        if size == 0:
            return ct
        if not current:
            current = [ct, col_bytes if ct == start0 else 0, [], 0]
        current[2].append((m0, m1))
        current[3] += size
        return current[0] + (current[1] + current[3]) // KERNEL_BYTES

    def flush() -> None:
        nonlocal current
        if current:
            runs.append((current[0], current[1], current[2]))
            current = []

    for expand in range(out_expand):
        this_map = map_init
        m0 = m = expand * out_thresh
        for _ in range(out_thresh):
            if this_map != 0 and this_map & 1 == 0:
                col_target = put(col_target, m0, m)
                flush()
                while this_map & 1 == 0:
                    col_target += 1
                    this_map >>= 1
                m0 = m
            this_map >>= 1
            m += 1
        col_target = put(col_target, m0, m)
    flush()

    rows_of = _rows(procs)
    width = min(memory.mem.kernel_words(p) for p in procs)
    spans = []
    for start, filled, segs in runs:
        total = filled + sum((m1 - m0) * in_exp * ksize for m0, m1 in segs)
        spans.append((koffs + start, filled, total, (total - 1) // KERNEL_BYTES + 1))
    touched = [np.arange(first, first + count) for first, _, _, count in spans]
    if col_bytes:
        touched.append(np.array([koffs + start0]))
    if touched:
        cols = np.concatenate(touched)
        if cols.max() + 1 > width or cols.min() < 0:
            return None
        if (memory.used[_grid(rows_of), cols] != 0).any() \
                or (memory.owner[_grid(rows_of), cols] != FREE).any():
            return None

    if col_bytes:  # the zero bytes that align the first kernel (`add` in _place_layer)
        memory.owner[rows_of, koffs + start0] = ll
        memory.used[rows_of, koffs + start0] = col_bytes
    chs = np.arange(len(procs))[:, None, None]
    ie = np.arange(in_exp)[None, None, :]
    # A zero row after the kernels stands for channels that do not exist: one gather.
    # Bytes (the rows are masked to 8 bits) keep the gathers and writes small.
    padded = np.concatenate([fast, np.zeros((1, ksize), dtype=fast.dtype)]).astype(np.uint8)
    for (first, filled, total, count), (_, _, segs) in zip(spans, runs, strict=True):
        parts = []
        for m0, m1 in segs:
            m = np.arange(m0, m1)[None, :, None]
            src = chs + m * in_chan
            kidx = src + ie * in_thresh
            ok = (ie * in_thresh + chs < in_chan) & (src < rows) & (m < out_chan) \
                & (kidx < rows)
            parts.append(padded[np.where(ok, kidx, rows)].reshape(len(procs), -1))
        cols = slice(first, first + count)
        memory.owner[rows_of, cols] = ll
        memory.used[rows_of, cols] = np.minimum(
            KERNEL_BYTES, total - np.arange(count) * KERNEL_BYTES)
        # Byte t of the run (counting the `filled` bytes already in its first column)
        # goes to column t // 9, slot 8 - t % 9: the run's bytes, zeros before and after
        # (the columns hold nothing else), with each 9-byte column reversed.
        block = np.zeros((len(procs), count * KERNEL_BYTES), dtype=np.uint8)
        block[:, filled:total] = np.concatenate(parts, axis=1)
        memory.data[rows_of, first * KERNEL_BYTES:(first + count) * KERNEL_BYTES] = \
            block.reshape(len(procs), count, KERNEL_BYTES)[:, :, ::-1].reshape(len(procs), -1)
    return col_target


def _finish_bulk(memory: _Memory, procs: list[int], koffs: int, col_target: int,
                 end: int, ll: int) -> bool:
    """The end of `_place_layer`'s per-processor loop after a bulk fill, for all
    processors at once: step past a partly filled column, then zero-fill free columns
    up to `end`. False (nothing written) unless every processor takes the same steps
    on free columns."""
    rows_of = _rows(procs)
    width = min(memory.mem.kernel_words(p) for p in procs)
    col = koffs + col_target
    if col < width:
        partial = memory.used[rows_of, col] > 0
        if partial.all():
            col_target += 1
        elif partial.any():
            return False
    elif any(col < memory.mem.kernel_words(p) for p in procs):
        return False
    count = end - col_target
    if count <= 0:
        return True
    cols = slice(koffs + col_target, koffs + col_target + count)
    if koffs + col_target + count > width or (memory.used[rows_of, cols] != 0).any() \
            or (memory.owner[rows_of, cols] != FREE).any():
        return False
    memory.owner[rows_of, cols] = ll
    memory.used[rows_of, cols] = KERNEL_BYTES
    return True


def _pad_free(memory: _Memory, p: int, col: int, count: int, ll: int) -> int:
    """Zero-fill `count` columns from `col` at once when all are free and inside the
    processor's memory (the same as nine zero bytes each); return the next column.
    Otherwise nothing is written and the caller pads byte by byte, which reports the
    first column that does not fit."""
    if count <= 0 or col + count > memory.mem.kernel_words(p):
        return col
    cols = slice(col, col + count)
    if (memory.used[p, cols] != 0).any() or (memory.owner[p, cols] != FREE).any():
        return col
    memory.owner[p, cols] = ll
    memory.used[p, cols] = KERNEL_BYTES
    memory.data[p, col * KERNEL_BYTES:(col + count) * KERNEL_BYTES] = 0
    return col + count


def _exhausted(layer: Layer, p: int, offs: int, length: int) -> Ai8xError:
    return Ai8xError("map.kernels", layer.name,
                     f"kernel memory exhausted at processor {p}: {length} kernel columns "
                     f"needed from column {offs}",
                     "use fewer or lower-bit weights, spread the layer over more processors, "
                     "or reuse weights")


def _rows(procs: list[int]) -> slice | np.ndarray:
    """Index of the processors' rows: a slice when they are consecutive (no copy)."""
    if procs[-1] - procs[0] + 1 == len(procs):
        return slice(procs[0], procs[-1] + 1)
    return np.asarray(procs)


def _grid(rows: slice | np.ndarray) -> slice | np.ndarray:
    """The rows index to pair with an array of columns (rows x columns)."""
    return rows if isinstance(rows, slice) else rows[:, None]


def _proc_of(rows: slice | np.ndarray, k: int) -> int:
    return rows.start + k if isinstance(rows, slice) else int(rows[k])


def _search(memory: _Memory, layer: Layer, groups: int, length: int, offs: int,
            first: int, last: int, pmap: int, reverse: bool, must_fit: bool) -> int:
    """First column (searching up, or down from `offs`) free for `length` columns in every
    processor of `pmap`, stepping by four; -1 when the reverse search finds nothing."""
    mem = memory.mem
    if length > mem.kernel_words_large:
        # Longer than any processor's kernel memory: no start fits, and a reverse search
        # would index columns beyond the one wrap the vendor's indexing allows (issue 24:
        # an IndexError for a large linear layer on the MAX78002).
        if must_fit:
            raise _exhausted(layer, first, offs, length)
        return -1

    def instance_mask(o: int) -> int:
        if o + 1 >= mem.kernel_words_small:
            return mem.kernel_instance_words_small - 1
        return mem.kernel_instance_words_large - 1

    def give_up(p: int, o: int, rev: bool) -> bool:
        if memory.fits(p, o, length, rev):
            return False
        if must_fit:
            raise _exhausted(layer, p, o, length)
        return True

    p = first
    while memory.owner[p, offs] != FREE:
        offs += -SHARED if reverse else SHARED
        if give_up(p, offs, reverse):
            return -1
    if not (mem.kernel_weight_mask and groups > 1):
        # All processors at once (no per-processor adjustment of the start): the first
        # processor with a taken column and its first taken column are the ones the
        # processor-by-processor scan below meets first, so the result is the same.
        procs = _rows([q for q in range(first, last + 1) if pmap >> q & 1])
        while True:
            if not reverse and offs + length > mem.kernel_words_large:
                if must_fit:
                    raise _exhausted(layer, first, offs, length)
                return -1
            cols = np.arange(offs, offs + length) if not reverse \
                else np.arange(offs, offs - length, -1)
            taken = memory.owner[_grid(procs), cols] != FREE  # negative columns wrap, as below
            busy = taken.any(axis=1)
            if not busy.any():
                return offs
            row = int(np.argmax(busy))
            i = int(cols[int(np.argmax(taken[row]))])
            offs = (i + SHARED) & ~(SHARED - 1) if not reverse else (i - 1) & ~(SHARED - 1)
            if give_up(_proc_of(procs, row), offs, False):
                return -1
    while p < last + 1:
        if not pmap >> p & 1:
            p += 1
            continue
        if not reverse:
            if mem.kernel_weight_mask and groups > 1:
                # Depthwise kernels of one layer must sit in one memory instance.
                mm = instance_mask(offs + 1)
                if (offs + 1) & ~mm != (offs + length) & ~mm:
                    offs = ((offs + mm) & ~mm) - 1
                mm = instance_mask(offs + 1)
                if (offs + 1) & ~mm != (offs + length) & ~mm:
                    return -1
            if offs + length > mem.kernel_words_large:
                # Past the end of every processor's memory (the vendor would crash here).
                if must_fit:
                    raise _exhausted(layer, p, offs, length)
                return -1
            cols = np.arange(offs, offs + length)
        else:
            if mem.kernel_weight_mask and groups > 1:
                mm = instance_mask(offs - 1)
                if (offs - 1) & ~mm != (offs - length) & ~mm:
                    offs &= ~mm
            cols = np.arange(offs, offs - length, -1)
        # Negative columns wrap to the end of memory, as the vendor's array indexing does.
        taken = np.flatnonzero(memory.owner[p, cols] != FREE)
        if taken.size:
            i = int(cols[taken[0]])
            offs = (i + SHARED) & ~(SHARED - 1) if not reverse else (i - 1) & ~(SHARED - 1)
            # The vendor checks the new start with the forward rule in both directions.
            if give_up(p, offs, False):
                return -1
            p = first - 1
        p += 1
    return offs


def allocate_kernels(placement: Placement) -> KernelAllocation:
    """Place every layer's kernels in kernel memory (see the module docstring)."""
    network = placement.network
    mem = placement.device
    count_layers = len(placement.layers)
    hw = []
    for ll in range(count_layers):
        lay = network.layers[ll]
        pl = placement.layers[ll]
        hw.append(None if pl.bypass else hardware_kernel(
            lay, mem, as_3x3=streams_1x1_as_3x3(placement, ll)))
    kernels = [None if h is None else h[0] for h in hw]
    # Identical kernels are stored once: equal shape, values, weight bits and input
    # processors (vendor: izer/kdedup.py).
    source = first_equal(kernels, key=lambda ll: (network.layers[ll].quantization,
                                                 placement.layers[ll].processor_map))
    calcx4 = [bool(_extra(placement, ll, "calcx4", False)) for ll in range(count_layers)]

    offset = [0] * count_layers
    length = [0] * count_layers
    kcount = [0] * count_layers
    kochan = [0] * count_layers
    memory = _Memory(mem)
    first_used = placement.first_layer_used
    everything = (1 << mem.processors) - 1
    order = [ll for ll in range(first_used, count_layers)
             if placement.layers[ll].processor_map == everything]
    order += [ll for ll in range(first_used, count_layers)
              if placement.layers[ll].processor_map != everything]
    for ll in order:
        if source[ll] != ll or hw[ll] is None:
            continue
        _place_layer(memory, placement, ll, hw[ll], calcx4, offset, length,
                     kcount, kochan)

    for ll in range(count_layers):
        src = source[ll]
        if src is not None and src != ll:
            offset[ll], length[ll] = offset[src], length[src]
            kcount[ll], kochan[ll] = kcount[src], kochan[src]

    image = memory.data.reshape(mem.processors, mem.kernel_words_large, KERNEL_BYTES)
    owners = memory.owner
    image.flags.writeable = False
    owners.flags.writeable = False
    return KernelAllocation(device=placement.device, offset=tuple(offset), length=tuple(length),
                            count=tuple(kcount), out_channels=tuple(kochan),
                            source=tuple(source), calcx4=tuple(calcx4),
                            image=image, owners=owners)


@dataclass(frozen=True)
class _Packing:
    """How one layer's kernels are laid out in its processors' kernel memory (the values
    `_place_layer` works out before it writes any byte)."""

    layer: Layer
    ll: int
    koffs: int  # first column
    ksize: int  # taps per kernel as the hardware runs it
    quant: int  # weight bits
    qfactor: int  # kernels packed per byte
    in_exp: int  # input passes the kernels walk (1 for a flattened layer)
    in_thresh: int
    in_chan: int
    out_chan: int
    out_expand: int
    out_thresh: int
    map_init: int  # output processor map from its first processor
    start_col: int  # columns skipped inside the first output memory instance
    rows: int  # kernel rows (output x input channel pairs)


def _calcx4_whole_columns(lay: Layer, passes: int) -> None:
    """calcx4 computes output channels 4a + b from kernel memory instance b (MAX78002,
    POST bit 29): the kernels are stored channel b's first, a quarter of the layer's
    columns per instance, so each quarter must hold whole 72-bit columns of its own
    channels, i.e. passes x (output channels / 4) x weight bits a multiple of 8. Below
    that, the channels of several instances share a column in the first one, and the
    other instances hold nothing for them (random 67 of the MAX78002: four output
    channels of 2-bit weights; the vendor tool lays them out the same way)."""
    bits = abs(lay.quantization) if lay.quantization else 8
    per_instance = passes * lay.output_channels // 4 * bits
    if per_instance % 8:
        raise Ai8xError.many([Diagnostic(
            "map.kernels", lay.name,
            f"calcx4 with {bits}-bit weights, {lay.output_channels} output channels and "
            f"{passes} input pass(es) leaves {per_instance} bits of kernels per tap to each "
            "of the four kernel memory instances; each must hold whole bytes (a multiple "
            "of 8 bits), or the channels read kernels that are not theirs",
            f"turn calcx4 off for this layer, or give it {8 // math.gcd(8, bits * passes) * 4}"
            " output channels or a multiple of them, or wider weights", key="calcx4")])


def _kernel_rows(lay: Layer, kernel: np.ndarray, ks: tuple[int, int], calcx4: bool
                 ) -> tuple[np.ndarray, int, int]:
    """The kernel rows in the order the processors consume them, the input passes they
    walk and the input channels per processor row."""
    in_expand, in_thresh = multipass(lay.input_channels)
    out_chan = lay.output_channels
    if lay.flatten:
        reshaped = kernel.reshape(out_chan, in_expand, -1).swapaxes(1, 2).reshape(
            out_chan * in_thresh, -1, ks[0], ks[1])
        in_exp, in_chan = 1, in_thresh
    elif calcx4:
        if out_chan % 4:
            raise Ai8xError("map.kernels", lay.name,
                            "calcx4 needs a multiple of 4 output channels",
                            "turn calcx4 off for this layer")
        _calcx4_whole_columns(lay, in_expand)
        reshaped = kernel.reshape(out_chan // 4, 4, -1).transpose(1, 0, 2).reshape(kernel.shape)
        in_exp, in_chan = in_expand, lay.input_channels
    else:
        reshaped = kernel
        in_exp, in_chan = in_expand, lay.input_channels
    if lay.quantization == -1:
        # Binary weights: -1 is stored as 1, +1 as 0 (seed 000, "Binary weights").
        reshaped = reshaped.clip(-1, 0)
    return reshaped, in_exp, in_chan


def _kernel_counts(lay: Layer, out_map: int, reshaped: np.ndarray, in_exp: int, ksize: int
                   ) -> tuple[int, int, int, int]:
    """(columns per processor, mask count, output channels the counter walks, columns
    skipped in the first output instance) of a layer (izer/kernels.py)."""
    quant = abs(lay.quantization) if lay.quantization else 8
    qfactor = 8 // quant
    out_expand = multipass(lay.output_channels)[0]
    first_out = ffs(out_map)
    start_col = first_out % SHARED
    if out_expand > 1:
        first_out -= start_col
    if lay.conv_groups == 1:
        kc = (1 + fls(out_map) - first_out) * out_expand * in_exp
        count = ochan = kc + start_col * out_expand * in_exp
    else:
        kc = in_exp
        count = kc + start_col * in_exp
        ochan = (1 + fls(out_map) - first_out) * in_exp + start_col * in_exp
    if lay.flatten:
        per = reshaped.shape[1]
        unused = out_expand * popcount(out_map) - lay.output_channels
        kc = kc * per - unused * per
        count = count * per - unused * per
        ochan = count
    # Low-bit kernels pad the last packed byte of each kernel group.
    res = (kc % qfactor) * ksize * (qfactor - 1)
    klen = (kc * ksize * quant + res + 71) // 72
    return klen, count, ochan, start_col


def _first_column(memory: _Memory, lay: Layer, ll: int, calcx4: list[bool], klen: int,
                  pmap: int) -> int:
    """Where the layer's kernels start: the vendor's greedy search (new kernel loader);
    MAX78002 layers on extended-memory processors only are packed from the end first."""
    mem = memory.mem
    first_proc, last_proc = ffs(pmap), fls(pmap)
    groups = lay.conv_groups
    found = -1
    if not (ll > 0 and calcx4[ll] and not calcx4[ll - 1]):
        extended = mem.kernel_words_large > mem.kernel_words_small and all(
            p % mem.processors_per_quadrant == 0
            for p in range(first_proc, last_proc + 1) if pmap >> p & 1)
        if extended and (not mem.kernel_weight_mask or groups == 1
                         or klen <= mem.kernel_instance_words_small):
            found = _search_from_end(memory, lay, groups, klen, first_proc, last_proc, pmap)
    if found == -1:
        found = _search(memory, lay, groups, klen, 0, first_proc, last_proc, pmap,
                        reverse=False, must_fit=True)
        if found == -1:
            raise _exhausted(lay, last_proc, 0, klen)
        koffs = found
        if ll > 0 and calcx4[ll] and not calcx4[ll - 1]:
            koffs *= 4  # vendor workaround for a calcx4 layer after a non-calcx4 layer
        koffs = (koffs + SHARED - 1) & ~(SHARED - 1)
    else:
        koffs = (found - (klen - 1)) & ~(SHARED - 1)
    if koffs + klen > mem.kernel_words(last_proc):
        raise _exhausted(lay, last_proc, koffs, klen)
    return koffs


def _search_from_end(memory: _Memory, lay: Layer, groups: int, klen: int, first: int,
                     last: int, pmap: int) -> int:
    """The vendor's search down from the end of kernel memory, whose start is then
    rounded down to a multiple of four columns; -1 when nothing is found. The rounding
    can reach columns another layer owns: the vendor then adds this layer's bytes to
    that layer's partly filled 1x1 kernel word (its mask start, a whole word, then
    points at the other layer's bytes: random 1401 on the MAX78002, a 4-bit linear
    layer whose first two kernels read layer 0's byte) or stops on a full one
    (`kernels_used[p][col] <= 8` in izer/kernels.py, random 1682). Such a start is
    skipped and the search goes on below it."""
    start = memory.mem.kernel_words_large - 1
    procs = _rows([q for q in range(first, last + 1) if pmap >> q & 1])
    while start >= klen - 1:
        found = _search(memory, lay, groups, klen, start, first, last, pmap,
                        reverse=True, must_fit=False)
        if found == -1:
            return -1
        koffs = (found - (klen - 1)) & ~(SHARED - 1)
        if not (memory.owner[_grid(procs), np.arange(koffs, koffs + klen)] != FREE).any():
            return found
        start = koffs - 1
    return -1


def _add_byte(memory: _Memory, pk: _Packing, p: int, col_target: int, b: int) -> int:
    """One kernel byte into processor `p`'s column `col_target` (relative to the layer's
    first column); the next column once this one is full."""
    col = pk.koffs + col_target
    if col + 1 > memory.mem.kernel_words(p):
        raise _exhausted(pk.layer, p, col, 1)
    n = int(memory.used[p, col])
    if n == 0:
        if memory.owner[p, col] != FREE:
            raise _exhausted(pk.layer, p, col, 1)
        memory.owner[p, col] = pk.ll
    # Bytes fill a 9-byte kernel from its last byte (the first tap ends up last).
    memory.data[p, col * KERNEL_BYTES + 8 - n] = b & 0xFF
    memory.used[p, col] = n + 1
    if n + 1 == KERNEL_BYTES:
        col_target += 1
    return col_target


def _pack_general(batch: _Batch, pk: _Packing, col_target: int, ch: int,
                  row_values: list[list[int]]) -> int:
    """Processor row `ch`'s kernels, one kernel (or packed group of low-bit kernels) at a
    time: any weight width, depthwise and flattened layers."""
    lay = pk.layer
    qfactor, quant, in_exp, in_thresh = pk.qfactor, pk.quant, pk.in_exp, pk.in_thresh
    proc_mask = (1 << qfactor) - 1
    m = 0
    for expand in range(pk.out_expand if lay.conv_groups == 1 else 1):
        this_map = pk.map_init
        if lay.conv_groups == 1:
            col, stop = expand * pk.out_thresh, expand * pk.out_thresh + pk.out_thresh
        else:
            col, stop = expand, expand + 1
        while col < stop:
            # Skip output processors that are not used (one bit per packed channel).
            if this_map != 0 and this_map & proc_mask == 0:
                col_target = batch.flush(col_target)
                while this_map & proc_mask == 0:
                    col_target += 1
                    this_map >>= qfactor
            this_map >>= qfactor
            in_ch = pk.in_chan * qfactor if lay.flatten else pk.in_chan
            src = ch + m * in_ch
            for ie in range(in_exp):
                if ie * in_thresh + ch < in_ch and src < pk.rows:
                    n = 0
                    parts: list[int] = []
                    packed = [0] * len(row_values[src])
                    for i in range(qfactor):
                        if m < pk.out_chan:
                            idx = n + ie * qfactor
                            kidx = src + (idx % in_exp) * in_thresh + (idx // in_exp) * pk.in_chan
                            if kidx < pk.rows:
                                this = row_values[kidx]
                                if lay.flatten:
                                    parts.extend(this)
                                else:
                                    shift = i * quant
                                    packed = [a | b << shift
                                              for a, b in zip(packed, this, strict=True)]
                            n += 1
                    if lay.flatten:
                        parts.extend([0] * (-len(parts) % qfactor))
                        packed_parts = []
                        for i in range(len(parts) // qfactor):
                            e = 0
                            for j in range(qfactor):
                                e |= parts[i * qfactor + j] << (j * quant)
                            packed_parts.append(e)
                        col_target = batch.put(col_target, packed_parts)
                    else:
                        col_target = batch.put(col_target, packed[::-1])
                else:
                    # Channels beyond the input: zero kernels keep the passes aligned.
                    col_target = batch.put(col_target, [0] * (pk.ksize // qfactor))
            if lay.flatten:
                col += 1
                m += 1
            else:
                col += qfactor
                m += qfactor
    return col_target


def _place_layer(memory: _Memory, placement: Placement, ll: int,
                 hw: tuple[np.ndarray, tuple[int, int]], calcx4: list[bool],
                 offset: list[int], length: list[int], kcount: list[int],
                 kochan: list[int]) -> None:
    """Layer `ll`'s kernels into kernel memory: where (`_first_column`), then processor by
    processor in the vendor's order; its offset, length and counts into the lists."""
    mem = memory.mem
    lay = placement.network.layers[ll]
    pl = placement.layers[ll]
    kernel, ks = hw
    reshaped, in_exp, in_chan = _kernel_rows(lay, kernel, ks, calcx4[ll])
    pmap = pl.processor_map
    if pmap == 0:
        raise Ai8xError("map.kernels", lay.name, "layer has weights but no input processors",
                        "set `processors` for this layer")
    quad = quad_fan_out(placement, ll)
    if quad:
        pmap &= mem.quadrant_bits(0)  # the kernels are laid out for quadrant 0 first
    ksize = ks[0] * ks[1]
    out_map = pl.output_processor_map
    klen, count, ochan, start_col = _kernel_counts(lay, out_map, reshaped, in_exp, ksize)
    if quad:
        # Packed as usual into a scratch memory, then spread over the four quadrants.
        quad_offs = _first_column(memory, lay, ll, calcx4, -(-klen // 4), pmap)
        target, koffs = _Memory(mem), 0
    else:
        target, koffs = memory, _first_column(memory, lay, ll, calcx4, klen, pmap)
    klen = _pack_layer(target, lay, reshaped, ll, koffs, ksize, in_exp, in_chan, out_map,
                       start_col, klen, pmap)
    if quad:
        _spread_quad(memory, target, lay, ll, quad_offs, pmap)
        koffs, klen = quad_offs, -(-klen // 4)
        count, ochan = -(-count // 4), -(-ochan // 4)
    offset[ll] = koffs
    length[ll] = klen
    kcount[ll] = count
    kochan[ll] = ochan


def quad_fan_out(placement: Placement, ll: int) -> bool:
    """Whether layer `ll` reads the fast FIFO in quad fan-out (--fast-fifo-quad): its input
    arrives in all four quadrants at once and each quadrant computes every fourth output
    channel (the vendor's `Qupac` mode, izer/kernels.py and kbias.py)."""
    return bool(_extra(placement, ll, "quad", False))


def fifo_input_map(placement: Placement) -> int:
    """The first layer's processors as the FIFOs feed them: with quad fan-out the
    quadrant-0 processors (the fast FIFO repeats each word into the other quadrants)."""
    pl = placement.layers[placement.first_layer_used]
    if quad_fan_out(placement, placement.first_layer_used):
        return pl.processor_map & placement.device.quadrant_bits(0)
    return pl.processor_map


def check_quad_fan_out(placement: Placement) -> None:
    """--fast-fifo-quad spreads the first layer's output channels over the four quadrants
    one 9-byte kernel at a time (the vendor's layout): the layer must be a 3x3 convolution
    with 8-bit weights, one group, no flattening and no calcx4, whose input sits in
    quadrant 0. An Ai8xError naming the layer otherwise."""
    ll = placement.first_layer_used
    lay, pl = placement.network.layers[ll], placement.layers[ll]
    problem = None
    if lay.operator != Op.CONV2D:
        problem = "the first layer is not a 2-D convolution"
    elif tuple(lay.kernel_size) != (3, 3):
        problem = f"the first layer's kernel is {lay.kernel_size[0]}x{lay.kernel_size[1]}"
    elif lay.quantization not in (None, 0, 8):
        problem = f"the first layer has {lay.quantization}-bit weights"
    elif lay.conv_groups != 1 or lay.flatten or _extra(placement, ll, "calcx4", False):
        problem = "the first layer is depthwise, flattened or calcx4"
    elif pl.processor_map & ~placement.device.quadrant_bits(0):
        problem = f"the first layer reads processors {pl.processor_map:#018x}"
    if problem is not None:
        raise Ai8xError("map.fast-fifo-quad", lay.name,
                        f"{problem}; quad fan-out needs a 3x3 2-D convolution with 8-bit "
                        "weights whose input sits in quadrant 0",
                        "use --fast-fifo (single fan-out)")


def with_quad_fan_out(placement: Placement) -> Placement:
    """The placement for --fast-fifo-quad: the first layer's processors repeated in every
    quadrant (the fast FIFO writes each word to all four) and the layer marked for the
    quad-packed layout (kernels, bias and registers read `quad_fan_out`). The vendor tool
    rewrites the first layer's processor map the same way (izer/backend)."""
    ll = placement.first_layer_used
    pl = placement.layers[ll]
    mem = placement.device
    pmap = pl.processor_map & mem.quadrant_bits(0)
    repeated = 0
    for q in range(mem.quadrants):
        repeated |= pmap << q * mem.processors_per_quadrant
    layer = replace(pl, processor_map=repeated, extra=(*pl.extra, ("quad", True)))
    layers = (*placement.layers[:ll], layer, *placement.layers[ll + 1:])
    return replace(placement, layers=layers)


def _spread_quad(memory: _Memory, packed: _Memory, lay: Layer, ll: int, koffs: int,
                 pmap: int) -> None:
    """Quad fan-out: kernel column t of a quadrant-0 processor p (as packed for one
    quadrant) goes to processor p + 16 (t % 4), column koffs + t // 4, so the four
    quadrants compute output channels 4s, 4s + 1, 4s + 2, 4s + 3 at mask step s."""
    mem = memory.mem
    per_quadrant = mem.processors_per_quadrant
    for p in range(ffs(pmap), fls(pmap) + 1):
        if not pmap >> p & 1:
            continue
        for t in np.flatnonzero(packed.owner[p] == ll):
            q, col = p + int(t % 4) * per_quadrant, koffs + int(t // 4)
            if col >= mem.kernel_words(q) or memory.owner[q, col] != FREE:
                raise _exhausted(lay, q, col, 1)
            memory.owner[q, col] = ll
            memory.used[q, col] = packed.used[p, t]
            memory.data[q, col * KERNEL_BYTES:(col + 1) * KERNEL_BYTES] = \
                packed.data[p, t * KERNEL_BYTES:(t + 1) * KERNEL_BYTES]


def _pack_layer(memory: _Memory, lay: Layer, reshaped: np.ndarray, ll: int, koffs: int,
                ksize: int, in_exp: int, in_chan: int, out_map: int, start_col: int,
                klen: int, pmap: int) -> int:
    """Write layer `ll`'s kernels from column `koffs`, processor by processor in the
    vendor's order; the columns per processor (a flattened layer's may grow)."""
    mem = memory.mem
    quant = abs(lay.quantization) if lay.quantization else 8
    out_expand, out_thresh = multipass(lay.output_channels)
    rows = len(reshaped)
    pk = _Packing(layer=lay, ll=ll, koffs=koffs, ksize=ksize, quant=quant,
                  qfactor=8 // quant, in_exp=in_exp, in_thresh=multipass(lay.input_channels)[1],
                  in_chan=in_chan, out_chan=lay.output_channels, out_expand=out_expand,
                  out_thresh=out_thresh, map_init=out_map >> ffs(out_map),
                  start_col=start_col, rows=rows)
    masked = reshaped.reshape(rows, -1) & ((1 << quant) - 1)
    # 8-bit kernels of an ordinary convolution: one whole kernel per step, vectorized
    fast = None
    if pk.qfactor == 1 and lay.conv_groups == 1 and not lay.flatten:
        fast = masked[:, ::-1]

    procs = [p for p in range(ffs(pmap), fls(pmap) + 1) if pmap >> p & 1]
    skipped = divmod(start_col * ksize * in_exp, KERNEL_BYTES)
    bulk = None
    if fast is not None:
        bulk = _bulk_8bit(memory, procs, koffs, ll, fast, *skipped, pk.map_init,
                          out_expand, out_thresh, in_exp, pk.in_thresh, in_chan, pk.out_chan,
                          rows)
    # Python lists for the general per-kernel loop (not needed when the bulk fill ran).
    row_values = masked.tolist() if bulk is None else []
    if bulk is not None and _finish_bulk(memory, procs, koffs, bulk, start_col + klen, ll):
        procs = []  # every processor is complete
    for ch, p in enumerate(procs):
        col_target, col_bytes = skipped if bulk is None else (bulk, 0)
        for _ in range(col_bytes // pk.qfactor):
            col_target = _add_byte(memory, pk, p, col_target, 0)
        batch = _Batch(memory, p, koffs, lay, ll)
        if fast is not None and bulk is None:
            col_target = _fill_8bit(batch, col_target, fast, ch, pk.map_init, out_expand,
                                    out_thresh, in_exp, pk.in_thresh, in_chan, pk.out_chan,
                                    rows)
        elif fast is None:
            col_target = _pack_general(batch, pk, col_target, ch, row_values)
        col_target = batch.flush(col_target)
        if koffs + col_target < mem.kernel_words(p) and memory.used[p, koffs + col_target] > 0:
            col_target += 1  # finish a partly filled column
        col_target = _pad_free(memory, p, koffs + col_target, start_col + klen - col_target,
                               ll) - koffs
        while col_target - start_col < klen:
            col_target = _add_byte(memory, pk, p, col_target, 0)
        if lay.flatten:
            klen = col_target
    return klen
