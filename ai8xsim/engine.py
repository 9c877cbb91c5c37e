"""Run the configured layers on the simulated memories.

Each layer is decoded from its registers alone (`decode`), then executed: the input is
gathered from the data memories of the enabled processors at the read pointer, pooled,
convolved with the kernels the mask counters select in each processor's kernel memory,
biased from the bias memory, scaled and clamped as the post-processing register says,
and written where the write pointers, the mask/time-slot/channel offsets and the write
pointer increment send each output channel. Nothing else passes between layers.

Field meanings are the accelerator's (register field table of the user guide,
CNNx16_n_Ly_*; value formulas as the vendor tool computes them, izer/backend/max7800x.py):

- ENA: processor enables (bits 0-15) and mask enables (16-31) per quadrant;
- RCNT/CCNT: rows/columns - 1 including both pads, pad in bits 16-17 (MAX78000);
- LCTRL0: pooling enable (7), max pooling (8), ReLU (9), parallel/CHW input (6),
  32-bit output (16), read-ahead (17, MAX78002) with its pass shift count (26-29);
  LCTRL1: input passes - 1 (0-3), write pointer increment (4-7),
  output processors x mask bits per pass (8-16);
- MCNT: start (16-31) and last (0-15) mask address, in units of one bit of every tap of a
  kernel (8 per 72-bit word for 3x3 kernels, 72 per word for 1x1);
- ONED: time slots (0-3), 1-D start (4-7), kernel width (8-11), 1-D (12), element-wise
  enable (13), function (14-15: sub, add, or, xor), pool first (16), conv after (17),
  operands - 1 (18-21);
- POST: bias address (0-11), bias enable (12), shift (13-16), right shift (17), flatten
  passes (18-21), weight bits (22-23: 8, 1, 2, 4), time slots (24), abs (26),
  flatten (27), transposed (28), four channels per step (29, calcx4), depthwise (30),
  time-multiplexed passes (31, tcalc); MAX78002 also counts output channels in OCHAN;
- WPTR_BASE/TOFF/MOFF/CHOFF: output address and its offsets per time slot, per four mask
  counts and per output pass; RPTR_BASE: input word offset in every enabled processor's
  memory;
- STRIDE: stride - 1 (0-3); MAX78002 also the multi-pass stride from bit 4, pool stride x
  operands x passes x (read gap + 1): the words from one input pixel to the next per
  pool stride, so a read gap skips words other layers wrote in between (seed 000
  "read_gap").
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .machine import Machine, NotModelled, SimError
from .overlap import honour_order

MASK_BITS = {0: 8, 1: 1, 2: 2, 3: 4}
CTL_POOLRND = 1 << 13
CTL_FIFO = 1 << 15
CTL_STREAM = 1 << 14


@dataclass(frozen=True)
class LayerRegs:
    """One layer's configuration, decoded from its registers."""

    index: int
    processors: int
    masks: int
    rows: int
    cols: int
    pad: tuple[int, int]
    passes: int
    parallel: bool
    pool: tuple[int, int]
    pool_dilation: tuple[int, int]
    stride: int
    pool_average: bool
    relu: bool
    absolute: bool
    wide: bool
    kernel: tuple[int, int]  # (rows, cols); (1, k) for 1-D
    one_d: bool
    weight_bits: int
    mask_start: int
    mask_last: int
    oned_start: int
    timeslots: int
    operands: int
    eltwise: int | None
    pool_first: bool
    conv_after_eltwise: bool
    shift: int
    flatten: bool
    transposed: bool
    write_base: tuple[int, ...]  # per quadrant
    timeslot_offset: int
    mask_offset: int
    channel_offset: int
    write_increment: int
    read_base: int
    per_pass: int
    bias: tuple[int, int] | None  # (quadrant, address)
    depthwise: bool = False  # POST bit 30: one output channel per processor (MAX78002)
    broadcast: bool = False  # LCTRL0 bit 29 with depthwise
    bias_groups: tuple[int | None, ...] = ()  # per quadrant bias address, depthwise
    calcx4: bool = False  # POST bit 29: four output channels per mask step
    tcalc: bool = False  # POST bit 31: input passes time-multiplexed four at a time
    read_ahead: bool = False  # LCTRL0 bit 17 (MAX78002)
    shift_count: int = 0  # LCTRL0 bits 26-29 (with read-ahead)
    out_count: int | None = None  # OCHAN + 1 (MAX78002)
    read_gap: int = 0  # words skipped after each pixel's words (MAX78002 STRIDE field)
    # Quad fan-out (CTRL bits 22 and 31, the FIFO-fed layer 0): each quadrant reads the
    # same input and computes output channel 4s + q at mask step s (see `_quad_kernels`)
    quad: bool = False

    @property
    def is_conv(self) -> bool:
        return self.masks != 0


def _groups(mask: int) -> list[int]:
    return [g for g in range(4) if (mask >> 16 * g) & 0xFFFF]


def decode(m: Machine, layer: int) -> LayerRegs:
    dev = m.dev
    procs = masks = 0
    for g in range(4):
        ena = m.lreg(g, dev.ena, layer)
        procs |= (ena & 0xFFFF) << 16 * g
        masks |= (ena >> 16 & 0xFFFF) << 16 * g
    g0 = (_groups(procs) or [0])[0]

    def r(reg):
        return m.lreg(g0, reg, layer)

    lctl, lctl2, oned, post = r(dev.lctl), r(dev.lctl2), r(dev.oned), r(dev.post)
    pool_en = bool(lctl >> 7 & 1)
    prc, pcc = r(dev.prcnt), r(dev.pccnt)
    dil = (1, 1)
    if dev.cnt_inc_offs is not None:
        # MAX78002 counts (pool - 1) x dilation, the dilation - 1 above it
        dil = ((prc >> dev.cnt_inc_offs & 0xF) + 1, (pcc >> dev.cnt_inc_offs & 0xF) + 1)
    mask = (1 << (dev.cnt_inc_offs or 4)) - 1
    pool = ((prc & mask) // dil[0] + 1, (pcc & mask) // dil[1] + 1) if pool_en else (1, 1)
    stride_reg = r(dev.stride)
    stride = (stride_reg & 0xF) + 1
    one_d = bool(oned >> 12 & 1)
    width = oned >> 8 & 0xF
    rows, cols, pad = _geometry(m, g0, layer, pool, dil)
    if one_d:
        kernel = (1, width)
    elif width == 1:
        kernel = (1, 1)
    else:
        kernel = (3, 3)
    flatten = bool(post >> 27 & 1)
    passes = (lctl2 & 0xF) + 1
    if flatten:
        passes += (post >> 18 & 0xF) << 4
    bits = MASK_BITS[post >> 22 & 3]
    if dev.mcnt is not None:
        mc = r(dev.mcnt)
        mask_start, mask_last = mc >> 16 & 0xFFFF, mc & 0xFFFF
    else:
        mask_last, mask_start = r(dev.mcnt1), r(dev.mcnt2)
    xpch = lctl2 >> dev.xpch_max_offs & 0x1FF
    shift = post >> 13 & 0xF
    if post >> 17 & 1:
        shift = -shift
    bias = None
    for g in range(4):
        pg = m.lreg(g, dev.post, layer)
        if pg >> 12 & 1:
            bias = (g, pg & 0xFFF)
            break
    ew = bool(oned >> 13 & 1)
    operands = (oned >> 18 & 0xF) + 1 if ew else 1
    return LayerRegs(
        index=layer, processors=procs, masks=masks, rows=rows, cols=cols, pad=pad,
        pool_dilation=dil,
        passes=passes, parallel=bool(lctl >> 6 & 1), pool=pool, stride=stride,
        pool_average=pool_en and not lctl >> 8 & 1, relu=bool(lctl >> 9 & 1),
        absolute=bool(post >> 26 & 1), wide=bool(lctl >> 16 & 1), kernel=kernel,
        one_d=one_d, weight_bits=bits, mask_start=mask_start, mask_last=mask_last,
        oned_start=oned >> 4 & 0xF, timeslots=(oned & 0xF) + 1,
        operands=operands,
        eltwise=(oned >> 14 & 3) if ew else None, pool_first=bool(oned >> 16 & 1),
        conv_after_eltwise=bool(oned >> 17 & 1), shift=shift, flatten=flatten,
        transposed=bool(post >> 28 & 1),
        write_base=tuple(m.lreg(g, dev.wptr_base, layer) for g in range(4)),
        timeslot_offset=r(dev.wptr_toffs), mask_offset=r(dev.wptr_moffs),
        channel_offset=r(dev.wptr_choffs),
        write_increment=lctl2 >> 4 & (1 << dev.wptr_inc_bits) - 1,
        read_base=r(dev.rptr_base), per_pass=xpch // bits + 1 if bits else 1, bias=bias,
        depthwise=bool(post >> 30 & 1), broadcast=bool(lctl >> 29 & 1),
        calcx4=bool(post >> 29 & 1), tcalc=bool(post >> 31 & 1),
        read_ahead=dev.data_instance_words is not None and bool(lctl >> 17 & 1),
        shift_count=lctl >> 26 & 0xF,
        out_count=r(dev.ochan) + 1 if dev.ochan is not None else None,
        read_gap=_read_gap(dev, stride_reg, stride, operands * passes)
        if not flatten and not lctl >> 6 & 1 else 0,
        quad=layer == 0 and _quad_fan_out(m),
        bias_groups=tuple((m.lreg(g, dev.post, layer) & 0xFFF)
                          if m.lreg(g, dev.post, layer) >> 12 & 1 else None
                          for g in range(4)))


def _quad_fan_out(m: Machine) -> bool:
    """CTRL selects the fast FIFO (bit 22) in quad fan-out (bit 31)."""
    ctl = m.ctl(0, m.dev.reg_ctl)
    return bool(ctl >> m.dev.ctl_fast_fifo_bit & 1 and ctl >> m.dev.ctl_fast_fifo_quad_bit & 1)


def _read_gap(dev, stride_reg: int, stride: int, words: int) -> int:
    """Words skipped after each input pixel's `words` (operands x passes) words, from the
    MAX78002 multi-pass stride field (pool stride x words x (gap + 1)). The stride field
    below it holds the pool stride, or the convolution stride without pooling, so the
    pool stride is tried first; a field that fits neither reads without a gap."""
    if dev.mp_stride_offs is None:
        return 0
    field = stride_reg >> dev.mp_stride_offs
    for pool_stride in dict.fromkeys((stride, 1)):
        unit = pool_stride * words
        if field and field % unit == 0:
            return field // unit - 1
    return 0


def _geometry(m: Machine, g: int, layer: int, pool, dil):
    dev = m.dev
    rc, cc = m.lreg(g, dev.rcnt, layer), m.lreg(g, dev.ccnt, layer)
    lim = (1 << dev.cnt_bits) - 1
    if dev.cnt_diff_offs is None:
        pr, pc = rc >> dev.pad_cnt_offs & 3, cc >> dev.pad_cnt_offs & 3
        rows = (rc & lim) + 1 - 2 * pr
        cols = (cc & lim) + 1 - 2 * pc
        return rows, cols, (pr, pc)

    def pad_of(v):
        return (v >> dev.pad_cnt_offs & 3) + 1 if v >> dev.pad_ena_offs & 1 else 0

    # MAX78002 rows count to the start of the last pooling window; the window adds its
    # extent. Columns store the remainder explicitly.
    cols = (cc & lim) + (cc >> dev.cnt_diff_offs & 0xFFFF)
    rows = (rc & lim) + (pool[0] - 1) * dil[0] + 1
    return rows, cols, (pad_of(rc), pad_of(cc))


def _signed(values: np.ndarray, bits: int) -> np.ndarray:
    v = values.astype(np.int64) & ((1 << bits) - 1)
    return np.where(v >= 1 << (bits - 1), v - (1 << bits), v)


def input_processors(lr: LayerRegs) -> list[int]:
    """The processors whose memories the layer reads (a convolution: those with a mask)."""
    procs = [p for p in range(64) if lr.processors >> p & 1]
    if lr.quad:
        # the other quadrants read copies of the same words (their sums: _quad_kernels)
        procs = [p for p in procs if p < 16]
    return [p for p in procs if lr.masks >> p & 1] if lr.is_conv else procs


def read_input(m: Machine, lr: LayerRegs, procs: list[int],
               sram: np.ndarray | None = None) -> np.ndarray:
    """(processors, passes, operands, rows, cols) int8 values as the layer reads them
    (from `sram` instead of the machine's data memories when given)."""
    pixels = lr.rows * lr.cols
    n = len(procs)
    out = np.zeros((n, lr.passes, lr.operands, pixels), dtype=np.int64)
    words = m.dev.sram_spacing
    sram = m.sram if sram is None else sram
    for i, p in enumerate(procs):
        mem = sram[p // 4]
        if lr.parallel:
            # One channel per processor, four pixels per word, byte 0 first.
            idx = lr.read_base + (np.arange(pixels) // 4)[None, :] * lr.passes \
                + np.arange(lr.passes)[:, None]
            lane = np.broadcast_to(np.arange(pixels) % 4, idx.shape)
            if idx.max(initial=0) >= words:
                raise SimError(f"layer {lr.index}: input runs past the end of data memory")
            out[i, :, 0, :] = mem[idx, lane].view(np.int8)
        else:
            base = (np.arange(pixels)[None, :, None] * lr.passes * (lr.read_gap + 1)
                    + np.arange(lr.passes)[:, None, None]) * lr.operands \
                + np.arange(lr.operands)[None, None, :] + lr.read_base
            if base.max(initial=0) >= words:
                raise SimError(f"layer {lr.index}: input runs past the end of data memory")
            vals = mem[base, p % 4].view(np.int8)  # (passes, pixels, operands)
            out[i] = vals.transpose(0, 2, 1)
    return out.reshape(n, lr.passes, lr.operands, lr.rows, lr.cols)


def pool_input(x: np.ndarray, lr: LayerRegs, rounding: bool) -> np.ndarray:
    ph, pw = lr.pool
    s = lr.stride
    if (ph, pw) == (1, 1):
        # The stride belongs to the pooling stage: without pooling it subsamples (the
        # convolution itself always steps by one).
        return x[..., ::s, ::s] if s > 1 else x
    rows, cols = x.shape[-2:]
    dh, dw = lr.pool_dilation
    oh = (rows - (ph - 1) * dh - 1) // s + 1
    ow = (cols - (pw - 1) * dw - 1) // s + 1
    wins = np.stack([x[..., i * dh:i * dh + s * (oh - 1) + 1:s,
                       j * dw:j * dw + s * (ow - 1) + 1:s]
                     for i in range(ph) for j in range(pw)], axis=0)
    if not lr.pool_average:
        return wins.max(axis=0)
    total = wins.sum(axis=0)
    count = ph * pw
    mag = np.abs(total)
    q = (2 * mag + count) // (2 * count) if rounding else mag // count
    return np.clip(np.sign(total) * q, -128, 127)


def layer_kernels(m: Machine, lr: LayerRegs, procs: list[int], slots: int) -> np.ndarray:
    """(slots, processors, passes, taps) signed weights from the kernel memories.

    The mask counter steps once per (output channel, pass), `weight_bits` units at a time;
    a unit is one bit of each of a kernel's `taps` bytes. The kernel bytes form one stream
    per processor that fills each 72-bit word from its last byte to its first, a kernel's
    last tap first (so a 3x3 kernel has tap t in byte t); 1-D kernels start
    `oned_start` bytes into the stream position of their mask address.
    """
    if lr.quad:
        return _quad_kernels(m, lr, procs, slots)
    q = lr.weight_bits
    taps = lr.kernel[0] * lr.kernel[1]
    slot = np.arange(slots)[:, None]
    step = slot // 4 if lr.calcx4 else slot
    count = step * lr.passes + np.arange(lr.passes)[None, :]
    unit = lr.mask_start + count * q
    first = (unit // 8) * taps + (lr.oned_start if lr.one_d else 0)
    stream = first[..., None] + np.arange(taps)  # byte j holds tap taps-1-j
    stream = stream[..., ::-1]
    col, pos = stream // 9, 8 - stream % 9
    if lr.calcx4:
        # Four output channels per mask step, one from each of the four instances of
        # the processor's kernel memory: channel 4a + b reads instance b at the word the
        # counter points to in instance 0 (the vendor tool writes the kernels of channels
        # b, b + 4, ... to instance b, from the mask start divided by 4).
        col = col + (slot % 4)[..., None] * _instance_words(m, lr)
    if col.max(initial=0) >= m.dev.mask_offs:
        raise SimError(f"layer {lr.index}: mask address past the kernel memory")
    bit = (unit % 8)[..., None]
    out = np.empty((slots, len(procs), lr.passes, taps), dtype=np.int64)
    binary = q == 1 and m.dev.ctl_binary_bit is not None and \
        m.ctl(0, m.dev.reg_ctl) >> m.dev.ctl_binary_bit & 1
    for i, p in enumerate(procs):
        raw = m.mram[p][col, pos].astype(np.int64) >> bit
        out[:, i] = 1 - 2 * (raw & 1) if binary else _signed(raw, q)
    return out


def _quad_kernels(m: Machine, lr: LayerRegs, procs: list[int], slots: int) -> np.ndarray:
    """Quad fan-out: at mask step s, quadrant q convolves its copy of the input with the
    kernels of its own processors (quadrant 0's plus 16 q) into output channel 4 s + q.
    The model rests on the vendor tool's layout for --fast-fifo-quad (izer/kernels.py
    puts output channel k's kernel in quadrant k % 4 at step k // 4, izer/kbias.py its
    bias in quadrant k % 4, and the mask count covers the steps only); no measurement
    of the hardware is behind it."""
    one = dataclasses.replace(lr, quad=False)
    steps = slots // 4
    out = np.empty((slots, len(procs), lr.passes, lr.kernel[0] * lr.kernel[1]), np.int64)
    for q in range(4):
        out[q::4] = layer_kernels(m, one, [p + 16 * q for p in procs], steps)
    return out


def _instance_words(m: Machine, lr: LayerRegs) -> int:
    """Words per kernel-memory instance in the region holding the layer's mask start
    (a mask unit is one bit of each of a kernel's taps: 8 units a byte per tap, 9
    bytes a word)."""
    start = lr.mask_start // 8 * lr.kernel[0] * lr.kernel[1] // 9
    size = 0
    for first, words in m.dev.mask_regions:
        if start >= first:
            size = words
    return size


def slot_count(lr: LayerRegs) -> int:
    """Output channels (incl. unused leading ones) the layer computes per pixel.

    The mask counter runs over (channel, pass) from the mask start to the last mask
    address. In calcx4 mode four channels share a step and OCHAN (the output count
    register) holds steps x passes - 1: the vendor tool does not shrink the mask range
    for calcx4 layers except the first, so OCHAN is what bounds those layers.
    """
    if lr.calcx4:
        return 4 * lr.out_count // lr.passes
    if lr.quad:
        return 4 * (((lr.mask_last - lr.mask_start) // lr.weight_bits + 1) // lr.passes)
    return ((lr.mask_last - lr.mask_start) // lr.weight_bits + 1) // lr.passes


def _output_stage(acc: np.ndarray, lr: LayerRegs) -> np.ndarray:
    if not lr.wide:
        s = lr.shift
        if s >= 0:
            acc = (acc * (1 << s) + 64) // 128
        else:
            acc = (acc + 64 * (1 << -s)) // (128 << -s)
        acc = np.clip(acc, -128, 127)
    if lr.absolute:
        acc = np.clip(np.abs(acc), 0, 127)
    elif lr.relu:
        acc = np.clip(acc, 0, 127)
    return acc


@dataclass(frozen=True)
class LayerResult:
    """What a layer wrote: (memory, word, lane or -1 for a full word, value) arrays."""

    regs: LayerRegs
    memory: np.ndarray
    word: np.ndarray
    lane: np.ndarray
    value: np.ndarray
    shape: tuple[int, ...]  # (channels/slots, rows, cols) of `value` before flattening
    source: np.ndarray | None = None  # (processors, passes, operands, rows, cols) read
    # the layer wrote over its own input before reading all of it (overlap.honour_order)
    clobber: str | None = None


def _store(m: Machine, lr: LayerRegs, linear: np.ndarray, lane: np.ndarray,
           values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    shift = m.dev.write_ptr_shift
    mem = linear >> shift
    word = linear & ((1 << shift) - 1)
    if (mem >= 16).any() or (word >= m.dev.sram_words).any():
        raise SimError(f"layer {lr.index}: output address past the end of data memory")
    if lr.wide:
        data = (values.astype(np.int64) & 0xFFFFFFFF).astype("<u4").view(np.uint8)
        m.sram[mem, word] = data.reshape(-1, 4)
    else:
        m.sram[mem, word, lane] = (values.astype(np.int64) & 0xFF).astype(np.uint8)
    return mem, word


# Register fields the functional model does not execute yet: a project that sets one gets
# a clear "not modelled" verdict instead of an answer the model cannot vouch for.
_UNMODELLED_LCTL = ((30, "kernel bypass (LCTRL0 bit 30)"),)


def snoop_use(m: Machine) -> str | None:
    """How the project programs the snoop units (registers written, CTRL bit), or None.

    The snoop units watch the accelerator's memory traffic and can stop the inference or
    branch to the next-layer field's target. Which accesses they match and when they fire
    is described neither in the seeds nor in the vendor tool (it writes the 32 values a
    test gives and states the intended layer order by hand), so the layers such a project
    runs are unknown: any register of theirs written non-zero, or their CTRL enable, is
    refused, whichever of the two a project sets.
    """
    dev = m.dev
    names = [name for index, name in dev.snoop_registers
             if any(m.ctl(g, index) for g in range(4))]
    bit = dev.ctl_snoop_bit
    enabled = bit is not None and any(m.ctl(g, dev.reg_ctl) >> bit & 1 for g in range(4))
    if not names and not enabled:
        return None
    parts = []
    if names:
        parts.append(f"register{'s' if len(names) > 1 else ''} {', '.join(names)} written")
    if enabled:
        parts.append(f"CTRL bit {bit} set")
    return "; ".join(parts)


def unmodelled(m: Machine, layer: int) -> str | None:
    """The first register feature of `layer` the model does not execute, or None."""
    dev = m.dev
    ctl = m.ctl(0, dev.reg_ctl)
    for bit, what in dev.ctl_unmodelled:
        if ctl >> bit & 1:
            return what
    for g in range(4):
        lctl = m.lreg(g, dev.lctl, layer)
        for bit, what in _UNMODELLED_LCTL:
            if lctl >> bit & 1:
                return what
    lr = decode(m, layer)
    if lr.transposed and lr.pool != (1, 1):
        # The vendor tool writes the same registers for pool strides 1 and 2 here (the
        # stride register 0, the counters on the unpooled frame) and states different
        # known answers, so the registers do not say what such a layer computes; no
        # golden case pools in a transposed layer (legalize rule convtranspose2d-pool).
        return "pooling in a transposed layer (POST bit 28 with LCTRL0 bit 7)"
    if lr.calcx4 and (not dev.mask_regions or lr.out_count is None):
        return "processing four output channels per step (POST bit 29) on this device"
    if lr.calcx4 and (not lr.is_conv or lr.depthwise or lr.kernel != (3, 3)):
        # 3x3 kernels of every width (8, 4, 2 and 1 bits) run as the vendor's projects
        # state them (its multipass5 suite configurations with 2-bit weights, with and
        # without read-ahead). For 1x1 kernels the vendor tool leaves the kernels
        # unsplit (every output channel's kernel in instance 0, some not loaded at
        # all), so no project shows which instance words the hardware reads.
        return "calcx4 (POST bit 29) other than on a 3x3 full convolution"
    if lr.depthwise and not lr.broadcast and _depthwise_gaps(lr.processors):
        return _depthwise_gaps(lr.processors)
    if lr.read_ahead:
        return _read_ahead_problem(m, lr)
    if lr.tcalc:
        return "time-multiplexed passes (POST bit 31) without read-ahead"
    return None


def _depthwise_gaps(processors: int) -> str | None:
    """A depthwise layer without broadcast whose processors leave gaps in a quadrant
    (or start a later quadrant past its processor 0): its output takes turns (time
    slots, one per enabled processor), but which bias byte each processor reads then
    is known from no case. The vendor tool counts one time slot per enabled processor
    yet lays the bias bytes out by processor distance (input on processors 0, 4, 8,
    12: bias bytes 0, 4, 8, 12 of 13, time slot count 4); the golden corpus holds
    such layers only with contiguous processors, where both readings agree."""
    first = True
    for g in range(4):
        q = processors >> 16 * g & 0xFFFF
        if not q:
            continue
        low = q & -q
        if (q + low) & q or (not first and low != 1):
            return ("a depthwise layer without broadcast on processors with gaps "
                    f"(quadrant {g}: 0x{q:04x})")
        first = False
    return None


def _read_ahead_problem(m: Machine, lr: LayerRegs) -> str | None:
    """Read-ahead (LCTRL0 bit 17) fetches the next input words while the current ones
    are being processed; the arithmetic is that of the same layer without it. It holds
    only under the conditions the vendor tool enforces: the pass shift count (LCTRL0
    bits 26-29) is passes - 1, or (passes - 1) / 4 when the passes are time-multiplexed
    four at a time (POST bit 31), and input and output lie in different data-memory
    instances (checked on what the layer writes, `check_read_ahead`). Otherwise the
    model cannot say what the hardware computes."""
    want = (lr.passes - 1) // 4 if lr.tcalc else lr.passes - 1
    if lr.shift_count != want:
        return (f"read-ahead with pass shift count {lr.shift_count} (LCTRL0 bits 26-29) "
                f"for {lr.passes} passes{' (time-multiplexed)' if lr.tcalc else ''}, "
                f"not {want}")
    return None


def input_words(lr: LayerRegs) -> int:
    """Words of each enabled processor's memory a (non-streaming) layer reads."""
    if lr.parallel:
        return (lr.rows * lr.cols + 3) // 4 * lr.passes
    return lr.rows * lr.cols * lr.passes * lr.operands * (lr.read_gap + 1)


def check_read_ahead(m: Machine, lr: LayerRegs, res: LayerResult, procs: list[int],
                     words: int) -> None:
    """Stop when a read-ahead layer wrote into a data-memory instance it reads from
    (`words` words from the read pointer in the memories of `procs`)."""
    size = m.dev.data_instance_words
    if not lr.read_ahead or size is None or not len(res.memory):
        return
    read = set(range(lr.read_base // size, (lr.read_base + max(words, 1) - 1) // size + 1))
    memories = np.array(sorted({p // 4 for p in procs}))
    hit = np.isin(res.memory, memories) & np.isin(res.word // size, sorted(read))
    if hit.any():
        k = int(np.argmax(hit))
        raise NotModelled(
            f"layer {lr.index}: read-ahead with output (data memory {int(res.memory[k])} "
            f"word {int(res.word[k])}) in a data-memory instance ({size} words) its input "
            f"is read from (word {lr.read_base} on) is not modelled yet")


def run_layer(m: Machine, lr: LayerRegs, sram: np.ndarray | None = None) -> LayerResult:
    """Run one layer on the machine's memories (its input from `sram` when given: a
    FIFO-fed layer 0's frame laid out as data memory holds one)."""
    if not lr.processors:
        # No processor enabled: the layer reads nothing and writes nothing.
        empty = np.zeros(0, dtype=np.int64)
        return LayerResult(lr, empty, empty, empty, empty, (0, 0, 0))
    before = m.sram.copy() if sram is None else None  # for honour_order
    rounding = bool(m.ctl(0, m.dev.reg_ctl) & CTL_POOLRND)
    procs = input_processors(lr)
    if lr.transposed:
        # The counters span the zero-expanded frame; memory holds every other row and
        # column of it (POST.deconv_en inserts a zero after each byte and each row).
        if lr.rows % 2 or lr.cols % 2:
            raise SimError(f"layer {lr.index}: a transposed layer's row and column counts "
                           f"span the zero-expanded frame and are even ({lr.rows}x"
                           f"{lr.cols} here)")
        frame = dataclasses.replace(lr, rows=lr.rows // 2, cols=lr.cols // 2)
        small = read_input(m, frame, procs, sram)
        x = np.zeros((*small.shape[:3], lr.rows, lr.cols), dtype=np.int64)
        x[..., ::2, ::2] = small
    else:
        x = read_input(m, lr, procs, sram)  # (P, passes, operands, rows, cols)
    source = x
    if lr.eltwise is not None:
        if lr.pool_first:
            x = pool_input(x, lr, rounding)
        acc = x[:, :, 0]
        for o in range(1, lr.operands):
            y = x[:, :, o]
            acc = {0: acc - y, 1: acc + y, 2: acc | y, 3: acc ^ y}[lr.eltwise]
        x = np.clip(acc, -128, 127)
        if not lr.pool_first:
            x = pool_input(x, lr, rounding)
    else:
        x = pool_input(x[:, :, 0], lr, rounding)
    if lr.depthwise:
        res = depthwise_convolve(m, lr, procs, x)
    else:
        res = convolve(m, lr, procs, x) if lr.is_conv else pass_through(m, lr, procs, x)
    if sram is None:  # (an input from the FIFOs is not in data memory to overwrite)
        check_read_ahead(m, lr, res, procs, input_words(lr))
        # an output over input still to be read: the order the accelerator runs
        res, note = honour_order(m, lr, res, procs, before,
                                 lambda state: run_layer(m, lr, state))
        res = dataclasses.replace(res, clobber=note)
    return dataclasses.replace(res, source=source)


def _exact_dot(w: np.ndarray, x: np.ndarray, axes) -> np.ndarray:
    """Integer tensordot through float64 BLAS: 8-bit products summed over at most
    1024 channels x 81 taps stay far below 2**53, so the result is exact."""
    return np.rint(np.tensordot(w.astype(np.float64), x.astype(np.float64),
                                axes=axes)).astype(np.int64)


def convolve(m: Machine, lr: LayerRegs, procs: list[int], x: np.ndarray, *,
          row_pad: tuple[int, int] | None = None, first_pixel: int = 0,
          wrap: int | None = None, weights: np.ndarray | None = None) -> LayerResult:
    """Convolve `x`, post-process, write. Streaming passes a slice of rows (`row_pad`
    replaces the frame's top/bottom padding, `first_pixel` is the slice's first output
    pixel) and the circular buffer size `wrap` of the consumer (in words)."""
    slots = slot_count(lr)
    if slots <= 0:
        raise SimError(f"layer {lr.index}: mask count below the mask start")
    w = weights if weights is not None else layer_kernels(m, lr, procs, slots)
    kh, kw = lr.kernel
    cs = 1  # the stride register drives the pooling stage (see pool_input)
    pr, pc = lr.pad
    if lr.one_d:
        # 1-D: the frame is one long row of `rows` values (the row counter indexes it)
        seq = x.reshape(x.shape[0], x.shape[1], -1)
        seq = np.pad(seq, ((0, 0), (0, 0), (pr, pr)))
        n = (seq.shape[-1] - kw) // cs + 1
        patches = np.stack([seq[..., t:t + cs * (n - 1) + 1:cs] for t in range(kw)], axis=-1)
        acc = _exact_dot(w, patches, ([1, 2, 3], [0, 1, 3]))  # (slots, n)
        acc = acc.reshape(slots, n, 1)
    else:
        xp = np.pad(x, ((0, 0), (0, 0), row_pad or (pr, pr), (pc, pc)))
        oh = (xp.shape[2] - kh) // cs + 1
        ow = (xp.shape[3] - kw) // cs + 1
        patches = np.stack([xp[:, :, i:i + cs * (oh - 1) + 1:cs, j:j + cs * (ow - 1) + 1:cs]
                            for i in range(kh) for j in range(kw)], axis=-1)
        acc = _exact_dot(w, patches, ([1, 2, 3], [0, 1, 4]))  # (slots, oh, ow)
    if lr.quad and lr.bias is not None:
        acc = acc + _quad_bias(m, lr, slots)[:, None, None]
    elif lr.bias is not None:
        g, addr = lr.bias
        # calcx4 reads the four channels' bias bytes as one word: the address counts words
        idx = (addr * 4 if lr.calcx4 else addr) + np.arange(slots)
        if idx.max() >= m.dev.bias_bytes:
            raise SimError(f"layer {lr.index}: bias address past the bias memory")
        b = m.bram[g, idx].view(np.int8).astype(np.int64) * 128
        acc = acc + b[:, None, None]
    out = _output_stage(acc, lr)
    pixels = out.shape[1] * out.shape[2]
    slot = np.arange(slots)[:, None]
    pix = first_pixel + np.arange(pixels)[None, :]
    e, r = slot // lr.per_pass, slot % lr.per_pass
    base = lr.write_base[_groups(lr.processors)[0]]
    if lr.wide:
        step = e * lr.channel_offset + pix * (lr.write_increment + 1) * 4
        linear = base + (r // 4) * lr.mask_offset + (r % 4) * max(lr.timeslot_offset, 1) \
            + (step % wrap if wrap else step)
        lane = np.zeros_like(linear)
    else:
        step = e * lr.channel_offset + pix * (lr.write_increment + 1)
        linear = base + (r // 4) * lr.mask_offset + (step % wrap if wrap else step)
        lane = np.broadcast_to(r % 4, linear.shape)
    vals = out.reshape(slots, pixels)
    mem, word = _store(m, lr, linear.reshape(-1), np.asarray(lane).reshape(-1),
                       vals.reshape(-1))
    return LayerResult(lr, mem, word, np.asarray(lane).reshape(-1) if not lr.wide
                       else np.full(mem.shape, -1), vals.reshape(-1), out.shape)


def _quad_bias(m: Machine, lr: LayerRegs, slots: int) -> np.ndarray:
    """Quad fan-out: output channel 4 s + q's bias is byte s of quadrant q's part (each
    quadrant's POST register gives its own bias address), scaled as usual."""
    b = np.zeros(slots, dtype=np.int64)
    for q in range(4):
        addr = lr.bias_groups[q] if q < len(lr.bias_groups) else None
        if addr is None:
            continue
        idx = addr + np.arange(len(b[q::4]))
        if idx.max(initial=0) >= m.dev.bias_bytes:
            raise SimError(f"layer {lr.index}: bias address past the bias memory")
        b[q::4] = m.bram[q, idx].view(np.int8).astype(np.int64) * 128
    return b


def depthwise_convolve(m: Machine, lr: LayerRegs, procs: list[int], x: np.ndarray, *,
               row_pad: tuple[int, int] | None = None, first_pixel: int = 0,
               wrap: int | None = None) -> LayerResult:
    """Depthwise convolution (MAX78002, POST bit 30): each processor convolves its own
    channel with its own kernels (one per pass, from the mask start) into one output
    channel per pass. Where that channel goes depends on LCTRL0 bit 29 (broadcast):

    - broadcast: the output lands on the processor's own byte lane; the write pointer of
      the first quadrant addresses the whole layer and the mask offset steps one data
      memory per four processors (the vendor tool leaves the time-slot offset at 0). The
      bias sits per quadrant at 4 x its address register, the channels of each
      four-processor memory interleaved (channel 4a + b at byte 4b + a), 16 per pass.
    - without broadcast: the processors take turns (ONED.tscnt + 1 time slots per pass,
      one per processor of a quadrant): processor slot r of quadrant q writes byte lane
      r % 4 at quadrant q's own write pointer plus (r // 4) time-slot offsets (the
      vendor tool sets WPTR_TOFFS to one data memory exactly for this mode). A
      quadrant's slots count from its processor 0, those of the layer's first quadrant
      from its first enabled processor (the vendor tool points every other quadrant's
      write pointer back by that amount). The bias is one byte per time slot at the
      quadrant's address register: address + pass x time slots + slot. Processors with
      gaps are not modelled (`_depthwise_gaps`).
    """
    w = layer_kernels(m, lr, procs, 1)[0]  # (P, passes, taps)
    kh, kw = lr.kernel
    pr, pc = lr.pad
    if lr.one_d:
        # 1-D: the frame is one long row of `rows` values (the row counter indexes it)
        seq = np.pad(x.reshape(x.shape[0], x.shape[1], -1), ((0, 0), (0, 0), (pr, pr)))
        n = seq.shape[-1] - kw + 1
        patches = np.stack([seq[..., t:t + n] for t in range(kw)], axis=-1)
        acc = np.einsum("pkt,pknt->pkn", w, patches)[..., None]  # (P, passes, n, 1)
    else:
        xp = np.pad(x, ((0, 0), (0, 0), row_pad or (pr, pr), (pc, pc)))
        oh = xp.shape[2] - kh + 1
        ow = xp.shape[3] - kw + 1
        patches = np.stack([xp[:, :, i:i + oh, j:j + ow]
                            for i in range(kh) for j in range(kw)], axis=-1)
        acc = np.einsum("pkt,pkhwt->pkhw", w, patches)  # (P, passes, oh, ow)
    oh, ow = acc.shape[2:]
    first = procs[0]
    if lr.broadcast:
        slots = [p - (first & ~3) for p in procs]
    else:
        slots = [p % 16 - (first % 16 if p // 16 == first // 16 else 0) for p in procs]
    for i, p in enumerate(procs):
        g = p // 16
        addr = lr.bias_groups[g] if lr.bias_groups else None
        if addr is None:
            continue
        for k in range(lr.passes):
            if lr.broadcast:
                c16 = p % 16
                idx = addr * 4 + ((c16 % 4) * 4 + c16 // 4) + k * 16
            else:
                idx = addr + k * lr.timeslots + slots[i]
            if idx >= m.dev.bias_bytes:
                raise SimError(f"layer {lr.index}: bias address past the bias memory")
            acc[i, k] += int(m.bram[g, idx].view(np.int8)) * 128
    out = _output_stage(acc, lr)
    pixels = oh * ow
    pix = first_pixel + np.arange(pixels)
    mems, words, lanes, values = [], [], [], []
    # Results in channel order: pass by pass, the processors in ascending order.
    for k in range(lr.passes):
        for i, p in enumerate(procs):
            r = slots[i]
            if lr.broadcast:
                origin = lr.write_base[first // 16] + (r // 4) * lr.mask_offset
            else:
                origin = lr.write_base[p // 16] + (r // 4) * lr.timeslot_offset
            step = k * lr.channel_offset + pix * (lr.write_increment + 1)
            linear = origin + (step % wrap if wrap else step)
            v = out[i, k].reshape(-1)
            mem, word = _store(m, lr, linear, np.full(pixels, r % 4), v)
            mems.append(mem)
            words.append(word)
            lanes.append(np.full(pixels, r % 4))
            values.append(v)
    return LayerResult(lr, np.concatenate(mems), np.concatenate(words),
                       np.concatenate(lanes), np.concatenate(values),
                       (len(procs) * lr.passes, oh, ow))


def _turn(procs: list[int], p: int) -> int:
    """Processor p's turn among its quadrant's enabled processors `procs`.

    Layers without a convolution (pass-through, pooling-only, element-wise) and
    depthwise layers without broadcast write in time slots: the quadrant's enabled
    processors take turns, gaps skipped, the k-th filling byte lane k % 4 of time slot
    k // 4. The vendor tool counts the time slots (ONED bits 0-3) from the number of
    enabled processors ((n - 1) // 4 + 1 for pass-through), requires a pass-through's
    output processors to be its input's packed per quadrant, and its known answers
    hold input on processors 0, 4, 8, 12 as four bytes of one word (its suite's
    passthrough-2 configurations). The first enabled processor writing lane 0
    wherever it is agrees with the depthwise layers of the golden corpus whose first
    processor is not four-aligned. For processors without gaps from a four-aligned
    start this is their distance from that start."""
    return sum(1 for q in procs if q // 16 == p // 16 and q < p)


def pass_through(m: Machine, lr: LayerRegs, procs: list[int], x: np.ndarray, *,
                 first_pixel: int = 0, wrap: int | None = None) -> LayerResult:
    vals = np.clip(x, -128, 127)
    if lr.absolute:
        vals = np.clip(np.abs(vals), 0, 127)
    elif lr.relu:
        vals = np.clip(vals, 0, 127)
    n, passes, rows, cols = vals.shape
    pixels = rows * cols
    mems, words, lanes, values = [], [], [], []
    for i, p in enumerate(procs):
        g = p // 16
        slot = _turn(procs, p)
        t, lane = slot // 4, slot % 4
        pix = first_pixel + np.arange(pixels)
        for k in range(passes):
            # Each pass of a pixel is written before the next pixel: the pointer steps
            # over all passes (the channel offset places pass k among them).
            step = k * lr.channel_offset + pix * (lr.write_increment + 1) * passes
            linear = lr.write_base[g] + t * lr.timeslot_offset \
                + (step % wrap if wrap else step)
            v = vals[i, k].reshape(-1)
            mem, word = _store(m, lr, linear, np.full(pixels, lane), v)
            mems.append(mem)
            words.append(word)
            lanes.append(np.full(pixels, lane))
            values.append(v)
    return LayerResult(lr, np.concatenate(mems), np.concatenate(words),
                       np.concatenate(lanes), np.concatenate(values), (n * passes, rows, cols))


class LayerOrderError(ValueError):
    """A stated layer order (`sequencer.run(order=...)`) the project's registers cannot produce."""


def _link(m: Machine, layer: int) -> tuple[bool, int | None]:
    """The next-layer field of `layer`: (stop bit, jump target or None)."""
    dev = m.dev
    if dev.nxtlyr is None:
        return False, None
    v = m.lreg(0, dev.nxtlyr, layer)
    return bool(v >> 8 & 1), (v & 0x7F) if v >> 7 & 1 else None


def layer_count(m: Machine) -> tuple[int, int]:
    """(start layer, last layer) of the layer count register of quadrant 0: a run
    executes layers start..last (bits 8-15 and 0-7). A start the part does not take
    (the MAX78000 has no start field: its runs begin at layer 0) is refused as not
    modelled, since what the hardware does with those bits is not described."""
    value = m.ctl(0, m.dev.reg_lcnt_max)
    start, last = value >> 8 & 0xFF, value & 0xFF
    if start > m.dev.max_start_layer:
        raise NotModelled(
            f"the layer count register starts the run at layer {start}, but the "
            f"{m.dev.name} starts at layer {m.dev.max_start_layer} at most (its vendor "
            "tool refuses --start-layer there; write the start field as 0)")
    return start, last


def register_order(m: Machine, start: int | None = None,
                   budget: int | None = None) -> list[int]:
    """The layers the sequencer runs without snoop units: from layer `start` (by default
    the layer count register's start field) to the register's last layer, each followed
    by its next-layer target or by the next layer, up to a stop bit (or `budget` layers,
    by default the device's layer count)."""
    first, last = layer_count(m)
    budget = m.dev.max_layers if budget is None else budget
    order: list[int] = []
    layer = first if start is None else start
    while layer <= last and len(order) < budget:
        order.append(layer)
        stop, target = _link(m, layer)
        if stop:
            break
        layer = target if target is not None else layer + 1
    return order


def check_order(m: Machine, order: tuple[int, ...], snoop: str | None) -> None:
    """Refuse a stated layer order the registers cannot give (LayerOrderError).

    With snoop units programmed the order is the units' choice, which the model does not
    execute; what the registers still fix is checked: the order starts at layer 0, stays
    within the layer count register, and each step goes to the next layer or to the
    next-layer field's target (the field a branching unit jumps to: the vendor writes a
    layer's `snoop_sequence` there), never past a stop bit. Without snoop units the order
    is the registers' own, and a stated one must equal it.
    """
    first, last = layer_count(m)
    if len(order) > 4 * m.dev.max_layers:
        # a loop through the next-layer fields could run on; a statement this long is
        # a mistake, not a known answer
        raise LayerOrderError(f"{len(order)} layers stated; at most {4 * m.dev.max_layers} "
                              "are run")
    if snoop is None:
        own = register_order(m)
        if list(order) != own:
            raise LayerOrderError(
                f"the project programs no snoop unit, so its layer order is the "
                f"registers' ({', '.join(map(str, own))}); the stated order differs")
        return
    if not order or order[0] != first:
        raise LayerOrderError(f"the sequencer starts at layer {first} (the layer count "
                              f"register's start field): the order must begin with {first}")
    for prev, layer in zip(order, order[1:], strict=False):
        stop, target = _link(m, prev)
        if stop:
            raise LayerOrderError(f"layer {prev} has its stop bit set: no layer follows it")
        if layer != prev + 1 and layer != target:
            where = f"or {target}, its next-layer target" if target is not None else \
                "(it has no next-layer target)"
            raise LayerOrderError(f"layer {layer} cannot follow layer {prev}: the next "
                                  f"layer is {prev + 1} {where}")
    beyond = [ll for ll in order if ll > last]
    if beyond:
        raise LayerOrderError(f"layer {beyond[0]} is past the layer count register "
                              f"(last layer {last})")
