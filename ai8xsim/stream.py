"""Streaming: layers that run concurrently on rolling buffers, the first fed by FIFOs.

With CTRL.stream_en, the first layers of a network (those with stream registers: start
count, deltas, rollover) process their input while it arrives. Each reads its input rows
from a circular buffer in data memory: read pointer base, `rollover` (Sz_FBUF) words long
(the read pointer returns to the base when its distance from it reaches the rollover
value). Its producer writes its output rows into that buffer with the same wrap. The
first layer takes its input from the FIFO data registers (CTRL.fifo_en): FIFO k feeds
quadrant k, one word per pixel and pass (four channels, HWC) or four pixels of one
channel per word (CHW, parallel mode).

The model runs the streaming layers row by row, each output row as soon as the rows it
needs have been written: the deepest layer that can produce a row produces it first.
A consumer takes each input row from the circular buffer into its line buffer as soon as
the row is written (the hardware reads pixel by pixel as its start and delta counters
allow), so a rollover shorter than a row, or a write that lands on rows still unread,
gives a wrong answer as on the chip. The line buffer's own size (TRAM) is not checked.
The non-streaming layers then run as usual.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .engine import (
    LayerRegs,
    LayerResult,
    check_read_ahead,
    convolve,
    decode,
    depthwise_convolve,
    input_processors,
    input_words,
    layer_kernels,
    pass_through,
    pool_input,
    slot_count,
    unmodelled,
)
from .machine import FAST_FIFO, Machine, NotModelled, SimError

FIFO_DATA = 0x50000008  # FIFO k's data register at FIFO_DATA + 4 k (CNN_FIFO_WRn)


def streaming_layers(m: Machine, last: int) -> list[int]:
    """Layers 0.. that have stream registers (start count or rollover) programmed."""
    dev = m.dev
    layers = []
    for ll in range(last + 1):
        g = next((g for g in range(4) if m.lreg(g, dev.ena, ll) & 0xFFFF), 0)
        regs = [m.regs.get(dev.lreg(g, r, ll), 0) for r in _stream_regs(dev)]
        if ll > 0 and not any(regs):
            break
        layers.append(ll)
    return layers


def _stream_regs(dev) -> tuple[int, int, int]:
    return dev.stream_regs


def _rollover(m: Machine, lr: LayerRegs) -> int:
    dev = m.dev
    g = next(g for g in range(4) if lr.processors >> 16 * g & 0xFFFF)
    return m.regs.get(dev.lreg(g, _stream_regs(dev)[2], lr.index), 0)


class _Layer:
    """One streaming layer's progress: rows read into its line buffer, rows produced."""

    def __init__(self, m: Machine, lr: LayerRegs):
        if lr.operands != 1 or lr.one_d or lr.transposed:
            raise NotModelled(f"layer {lr.index}: streaming element-wise, 1-D or "
                              "transposed layers are not modelled yet")
        self.lr = lr
        self.procs = input_processors(lr)
        if not self.procs:
            raise SimError(f"layer {lr.index}: a streaming layer with no processor enabled")
        self.buffer = np.zeros((len(self.procs), lr.passes, lr.rows, lr.cols), np.int64)
        self.read = 0
        self.done = 0
        ph, pw = lr.pool
        self.pooled = (ph, pw) != (1, 1)
        self.ps = lr.stride  # the pooling stage strides (subsamples without pooling)
        dh, dw = lr.pool_dilation
        self.prow = (lr.rows - (ph - 1) * dh - 1) // self.ps + 1
        pcol = (lr.cols - (pw - 1) * dw - 1) // self.ps + 1
        if lr.is_conv:
            kh, kw = lr.kernel
            self.cs = 1
            self.out_rows = (self.prow + 2 * lr.pad[0] - kh) // self.cs + 1
            self.out_cols = (pcol + 2 * lr.pad[1] - kw) // self.cs + 1
            slots = slot_count(lr)
            if slots <= 0:
                raise SimError(f"layer {lr.index}: mask count below the mask start")
            self.weights = None if lr.depthwise else layer_kernels(m, lr, self.procs, slots)
        else:
            self.out_rows, self.out_cols = self.prow, pcol
        if min(self.prow, pcol, self.out_rows, self.out_cols) < 1:
            # counters that leave no pooling window or no output pixel in the frame
            raise SimError(f"layer {lr.index}: the row/column counts, pooling and padding "
                           f"leave no output ({lr.rows}x{lr.cols} in)")
        self.results: list[LayerResult] = []

    def window(self, r: int) -> tuple[int, int, int, int, int, int]:
        """For output row r: pooled rows [a, b), zero rows above/below, input rows."""
        lr = self.lr
        if lr.is_conv:
            lo = r * self.cs - lr.pad[0]
            hi = lo + lr.kernel[0]
        else:
            lo, hi = r, r + 1
        a, b = max(lo, 0), min(hi, self.prow)
        ph = lr.pool[0]
        i0 = a * self.ps
        i1 = (b - 1) * self.ps + (ph - 1) * lr.pool_dilation[0] + 1
        return a, b, a - lo, hi - b, i0, min(i1, lr.rows)


def _fifo_rows(m: Machine, st: _Layer, upto: int) -> None:
    """Copy input rows [st.read, upto) of the first layer from the FIFO streams."""
    lr = st.lr
    cols, passes = lr.cols, lr.passes
    for i, p in enumerate(st.procs):
        stream = _fifo_stream(m, p)
        for row in range(st.read, upto):
            for c in range(cols):
                pix = row * cols + c
                for t in range(passes):
                    if lr.parallel:
                        if p % 16:
                            raise SimError(f"layer 0: parallel FIFO input on processor {p}")
                        k, lane = divmod(pix, 4)
                    else:
                        if p % 16 >= 4:
                            raise SimError(f"layer 0: FIFO input for processor {p} (only "
                                           "the first four of a quadrant) is not modelled")
                        k, lane = pix * passes + t, p % 16
                    word = stream[k] if k < len(stream) else 0
                    v = word >> 8 * lane & 0xFF
                    st.buffer[i, t, row, c] = v - 256 if v >= 128 else v


def _fifo_stream(m: Machine, p: int) -> list[int]:
    """The words that reach processor `p` from a FIFO: FIFO p // 16, or with the fast
    FIFO selected (CTRL), the words written to the fast FIFO, which feeds processors
    0-3 as FIFO 0 does (seed 000, "Fast FIFO")."""
    dev = m.dev
    ctl = m.ctl(0, dev.reg_ctl)
    if not ctl >> dev.ctl_fast_fifo_bit & 1:
        return m.fifos.get(p // 16, [])
    if ctl >> dev.ctl_fast_fifo_quad_bit & 1:
        # Quad fan-out: every word also reaches the same processors of quadrants 1-3 (the
        # vendor tool repeats the first layer's processors in each quadrant for it).
        p %= 16
    if p >= 16:
        raise SimError(f"layer 0: processor {p} reads the fast FIFO, which feeds "
                       "processors 0-3 only")
    return m.fifos.get(FAST_FIFO, [])


def fifo_frame(m: Machine, lr: LayerRegs) -> np.ndarray:
    """Layer 0's whole frame from the FIFOs, as data memories that hold it where the
    layer's read pointer points: without streaming the layer reads its frame in the
    FIFO's word order, and that order is the data memory's (CHW: four pixels of a
    channel per word, byte 0 first; HWC: a pixel's four channels per word, pass after
    pass; seed 000, "FIFOs"). FIFO k feeds processors 16k to 16k + 3 (the fast FIFO:
    0-3), whose data memory is 4k."""
    if lr.operands != 1 or lr.read_gap:
        raise NotModelled("layer 0: element-wise operands or a read gap fed from the FIFOs "
                          "are not modelled yet")
    sram = np.zeros_like(m.sram)
    for p in input_processors(lr):
        if lr.parallel and p % 16 or not lr.parallel and p % 16 >= 4:
            raise SimError(f"layer 0: processor {p} reads the FIFOs, which feed "
                           f"processors {'16k' if lr.parallel else '16k to 16k + 3'} only")
        words = np.asarray(_fifo_stream(m, p), dtype="<u4")  # byte 0 is the low byte
        end = lr.read_base + words.size
        if end > sram.shape[1]:
            raise SimError("layer 0: more FIFO words than a data memory holds")
        sram[p // 4, lr.read_base:end] = words.view(np.uint8).reshape(-1, 4)
    return sram


def _memory_rows(m: Machine, st: _Layer, upto: int, wrap: int | None) -> None:
    """Copy input rows [st.read, upto) from the circular buffer in data memory (a read
    gap skips that many words after each pixel's passes, as without streaming)."""
    lr = st.lr
    cols, passes = lr.cols, lr.passes
    pix = np.arange(st.read * cols, upto * cols)
    for i, p in enumerate(st.procs):
        mem = m.sram[p // 4]
        rel = (pix[None, :] * passes * (lr.read_gap + 1) + np.arange(passes)[:, None])
        if wrap:
            rel = rel % wrap
        words = lr.read_base + rel
        if words.size and words.max() >= m.dev.sram_words:
            raise SimError(f"layer {lr.index}: input runs past the end of data memory")
        vals = mem[words, p % 4].view(np.int8).astype(np.int64)
        st.buffer[i, :, st.read:upto, :] = vals.reshape(passes, upto - st.read, cols)


def run_streaming(m: Machine, layers: list[int], fifo: bool) -> list[LayerResult]:
    """Run `layers` as one streaming chain (layer 0 fed from the FIFOs with `fifo`)."""
    states = []
    for ll in layers:
        what = unmodelled(m, ll)
        if what is not None:
            raise NotModelled(f"layer {ll}: {what} is not modelled yet")
        lr = decode(m, ll)
        if ll == 0 and lr.bias is not None and m.dev.stream0_bias_skew:
            g, addr = lr.bias
            lr = dataclasses.replace(lr, bias=(g, addr + m.dev.stream0_bias_skew))
        states.append(_Layer(m, lr))
    wraps = [(_rollover(m, states[k + 1].lr) or None) if k + 1 < len(states) else None
             for k in range(len(states))]
    rounding = bool(m.ctl(0, m.dev.reg_ctl) & 1 << 13)
    while True:
        progressed = False
        for k in range(len(states) - 1, -1, -1):
            st = states[k]
            if st.done >= st.out_rows:
                continue
            a, b, top, bottom, i0, i1 = st.window(st.done)
            available = st.lr.rows if k == 0 else states[k - 1].done
            # (MAX78002 counters may stop before rows no pooling window reaches)
            if k > 0 and states[k - 1].out_rows < st.lr.rows:
                raise SimError(f"layer {st.lr.index}: reads {st.lr.rows} rows, layer "
                               f"{states[k - 1].lr.index} writes {states[k - 1].out_rows}")
            if i1 > available:
                continue
            if i1 > st.read:
                if k == 0 and fifo:
                    _fifo_rows(m, st, i1)
                else:
                    _memory_rows(m, st, i1, _rollover(m, st.lr) or None if k > 0 else None)
                st.read = i1
            x = pool_input(st.buffer[:, :, i0:i1], st.lr, rounding)
            first = st.done * st.out_cols
            if st.lr.depthwise:
                res = depthwise_convolve(m, st.lr, st.procs, x, row_pad=(top, bottom),
                                 first_pixel=first, wrap=wraps[k])
            elif st.lr.is_conv:
                res = convolve(m, st.lr, st.procs, x, row_pad=(top, bottom), first_pixel=first,
                            wrap=wraps[k], weights=st.weights)
            else:
                res = pass_through(m, st.lr, st.procs, x, first_pixel=first, wrap=wraps[k])
            st.results.append(res)
            st.done += 1
            if k + 1 < len(states):
                # The consumer takes each row into its line buffer as it is written.
                nxt = states[k + 1]
                upto = min(st.done, nxt.lr.rows)
                if upto > nxt.read:
                    _memory_rows(m, nxt, upto, _rollover(m, nxt.lr) or None)
                    nxt.read = upto
            progressed = True
            break
        if not progressed:
            break
    for st in states:
        if st.done < st.out_rows:
            raise SimError(f"layer {st.lr.index}: streaming stalled after {st.done} of "
                           f"{st.out_rows} rows")
    merged = [_merge(st) for st in states]
    for k, (st, res) in enumerate(zip(states, merged, strict=True)):
        # the first layer reads the FIFOs, the others their circular buffer
        words = 0 if k == 0 and fifo else (_rollover(m, st.lr) or input_words(st.lr))
        if words:
            check_read_ahead(m, st.lr, res, st.procs, words)
    return merged


def _merge(st: _Layer) -> LayerResult:
    parts = st.results
    slots = parts[0].shape[0]
    value = np.concatenate([p.value.reshape(slots, -1) for p in parts], axis=1)
    cat = [np.concatenate([getattr(p, f).reshape(slots, -1) for p in parts], axis=1)
           .reshape(-1) for f in ("memory", "word", "lane")]
    return LayerResult(st.lr, cat[0], cat[1], cat[2], value.reshape(-1),
                       (slots, st.out_rows, st.out_cols), source=st.buffer[:, :, None])
