"""Streaming and FIFO registers per layer: stream start (prefill), the two stream deltas,
the rollover (circular buffer size) and the input frame size (seed 000, "Streaming Mode",
"FIFOs": CNNx16_n_Ly_STREAM1/2, _FMAX, CNNx16_n_IFRM).

MAX78000 and MAX78002 compute these differently (MAX78002 counts padding and read-ahead
in the prefill, and sizes the rollover buffer from it).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Ai8xError
from .hw import HwView

# The vendor tool starts every later MAX78000 streaming layer two elements late
# (its `--increase-start` default); the hardware was validated with that margin.
MAX78000_START_MARGIN = 2


@dataclass(frozen=True)
class StreamValues:
    """The streaming register values of one layer (seed 000, "Streaming Mode")."""

    start: int
    start_hwc: int  # MAX78002: prefill before CHW packing
    delta1: int
    delta2: int
    invol: int
    col_inc: int


def _max78000(hw: HwView, ll: int) -> StreamValues:
    lay = hw.network.layers[ll]
    pl = hw.placement.layers[ll]
    h = hw.layers[ll]
    start = delta1 = delta2 = 0
    if ll == hw.start_layer and hw.choices.fifo:
        if pl.streaming:
            start = (lay.pool[0] - 1) * h.input_dim[1] + lay.pool[1]
        else:
            start = h.input_dim[0] * h.input_dim[1]
            if pl.big_data:
                start = (start + 3) // 4
        start *= lay.pool[0]
        if pl.streaming:
            delta1 = (lay.pool_stride[1] - 1) * lay.operands
            delta2 = (lay.pool[0] - 1) * h.input_dim[1] * lay.operands
    elif ll > hw.start_layer and pl.streaming:
        prev = pl.prev_sequence
        ph = hw.layers[prev]
        row = ph.pooled_dim[1] + 2 * ph.padding[1]
        start = row * (ph.kernel_size[0] - 1 + lay.pool[0] - 1) \
            + ph.kernel_size[1] - 1 + lay.pool[1] + MAX78000_START_MARGIN
        delta1 = lay.pool_stride[1] * lay.operands
        delta2 = (lay.pool_stride[0] - 1) * row + lay.pool[1] * lay.operands
    return StreamValues(start, start, delta1, delta2, _invol(hw, ll), 0)


def _max78002(hw: HwView, ll: int) -> StreamValues:
    lay = hw.network.layers[ll]
    pl = hw.placement.layers[ll]
    h = hw.layers[ll]
    cols = h.input_dim[1]
    pad = h.padding[1]
    row_inc = max(lay.pool[0] * lay.pool_dilation[0], lay.pool_stride[0])
    col_inc = max(lay.pool[1] * lay.pool_dilation[1], lay.pool_stride[1])
    start = start_hwc = delta1 = delta2 = 0
    # Later layers use the revised equations (the vendor's `--debug-new-streaming`,
    # on by default); the first layer keeps the original ones.
    revised = ll > 0
    effective_cols = col_adjust = 0
    last_layer = False
    if pl.streaming:
        nxt = pl.next_sequence
        # The vendor indexes `streaming[next_sequence]` directly (-1: the last layer).
        last_layer = ll == hw.placement.final_layer or not hw.placement.layers[nxt].streaming
        if revised:
            effective_cols = cols // col_inc
            if effective_cols * lay.pool_stride[1] + lay.pool[1] > cols:
                effective_cols -= 1
            col_adjust = 0 if col_inc == 1 else cols - effective_cols * col_inc
        else:
            effective_cols = cols // lay.pool_stride[1]
            if effective_cols * lay.pool_stride[1] + lay.pool[1] - 1 > cols:
                effective_cols -= 1
            col_adjust = cols - effective_cols * col_inc
    if ll == hw.start_layer and hw.choices.fifo:
        if pl.streaming:
            if lay.pool_stride[0] == 1 and lay.pool[0] == 1:
                start = col_inc
            else:
                start = (row_inc * (cols + pad * 2) + pad + 2 * col_inc) * lay.operands
                if pl.read_ahead:
                    start += lay.pool_stride[1]
        else:
            start = h.input_dim[0] * h.input_dim[1]
        start_hwc = start
        if pl.big_data:
            start = (start + 3) // 4
    elif ll > hw.start_layer and pl.streaming:
        row_prim = (pad or lay.pool_stride[0]) if revised else pad
        start = row_prim * (cols + 2 * pad) \
            + (row_inc * (cols + 2 * pad) + pad + 2 * col_inc) * lay.operands
        if pl.read_ahead:
            start += lay.pool_stride[1]
        if last_layer and revised:
            start += col_adjust * lay.pool_stride[1]
        start_hwc = start
        if pl.big_data:
            start = (start + 3) // 4
    if pl.streaming:
        skipped = max(0, cols - effective_cols * lay.pool_stride[1])
        delta1 = lay.pool_stride[1] * lay.operands
        if ll == hw.start_layer:
            if lay.pool_stride[0] == 1 and lay.pool[0] == 1:
                delta1 -= 1
            if pl.big_data:
                delta1 = (delta1 + 3) // 4
            if lay.pool_stride[0] == 1:
                delta2 = delta1 + skipped
            else:
                delta2 = (lay.pool_stride[0] - 1) * cols + skipped + lay.pool[1] - 1
            if pl.big_data:
                delta2 = (delta2 + 3) // 4
            if hw.pipeline and delta2 > 0:
                delta2 += 1
        else:
            if pl.big_data:
                delta1 = (delta1 + 3) // 4
            extra = col_adjust if revised else skipped
            if lay.pool_stride[0] == 1:
                delta2 = delta1 + extra
            else:
                delta2 = (lay.pool_stride[0] - 1) * cols + extra
            if pl.big_data:
                delta2 = (delta2 + 3) // 4
    return StreamValues(start, start_hwc, delta1, delta2, _invol(hw, ll), col_inc)


def _invol(hw: HwView, ll: int) -> int:
    # Each streaming layer's TRAM volume starts after all earlier layers' passes.
    if ll > hw.start_layer and hw.placement.layers[ll].streaming:
        return sum(hw.layers[i].in_expand_invol for i in range(ll))
    return 0


def stream_values(hw: HwView, ll: int) -> StreamValues:
    if hw.dev.require_new_streaming:
        return _max78002(hw, ll)
    return _max78000(hw, ll)


STREAM_FIFO_GO = 1 << 25


def stream1(hw: HwView, ll: int, sv: StreamValues) -> int:
    if sv.start >= 1 << hw.dev.regs.max_isval_bits:
        lay = hw.network.layers[ll]
        raise Ai8xError("emit.limit", lay.name,
                        f"streaming start {sv.start} exceeds the device limit of "
                        f"{(1 << hw.dev.regs.max_isval_bits) - 1}",
                        "use a narrower input or less pooling in the streaming layers")
    if hw.choices.fifo_go and ll == hw.start_layer:
        # --fifo-go (MAX78002): the first layer starts before the first FIFO word arrives
        return sv.start | STREAM_FIFO_GO
    return sv.start


def stream2(hw: HwView, ll: int, sv: StreamValues) -> int:
    lay = hw.network.layers[ll]
    if sv.invol >= 16:
        raise Ai8xError("emit.limit", lay.name,
                        f"streaming volume offset {sv.invol} exceeds the limit of 15",
                        "use fewer streaming layers or fewer input passes")
    if sv.delta2 >= 1 << hw.dev.regs.max_dsval2_bits:
        raise Ai8xError("emit.limit", lay.name,
                        f"streaming delta {sv.delta2} exceeds the device limit of "
                        f"{(1 << hw.dev.regs.max_dsval2_bits) - 1}", "reduce pooling")
    return sv.delta2 << 16 | sv.delta1 << 4 | sv.invol


def rollover(hw: HwView, ll: int, sv: StreamValues) -> int | None:
    """FIFO rollover (circular input buffer size, words); None when not streaming a FIFO."""
    lay = hw.network.layers[ll]
    pl = hw.placement.layers[ll]
    h = hw.layers[ll]
    if not (hw.choices.fifo and pl.streaming):
        return None
    if not hw.dev.require_new_streaming:
        if pl.big_data:
            val = 12
        else:
            val = sv.start + (lay.pool[0] - 1) * h.input_dim[1] \
                + max(lay.stride[1], lay.pool_stride[1], lay.pool[1])
        # The buffer must hold whole multi-pass groups.
        rem = val % h.in_expand
        return val + h.in_expand - rem if rem else val
    cols, pad = h.input_dim[1], h.padding[1]
    if ll == hw.start_layer:
        val = sv.start_hwc + sv.col_inc + (lay.pool_stride[1] - 1) * (cols + pad * 2)
        if pl.big_data:
            val *= lay.pool_stride[1] * 4
        return val
    row_inc = max(lay.pool[0] * lay.pool_dilation[0], lay.pool_stride[0])
    val = sv.start_hwc + (h.in_expand - 1) * (row_inc * cols + pad + sv.col_inc) + sv.col_inc
    val += (h.in_expand - val % h.in_expand) % h.in_expand
    if pl.big_data:
        val = (val + 3) // 4
    return val


def input_frame(hw: HwView, ll: int) -> int | None:
    """Input frame size for the FIFO-fed first layer (None otherwise)."""
    if not (ll == hw.start_layer and hw.choices.fifo):
        return None
    h = hw.layers[ll]
    val = h.input_dim[0] * h.input_dim[1]
    return (val + 3) // 4 if hw.placement.layers[ll].big_data else val


def rollovers(hw: HwView) -> tuple[int | None, ...]:
    """Per layer, the size in words of a streaming layer's circular input buffer: the
    rollover the project programs (None for a layer that does not stream, or without
    FIFO input). The mapper reserves exactly this memory (map/memory_check.buffers), so
    the memory it keeps free is the memory the hardware uses. It depends on the stream
    start, the column step and the layer's geometry, and on the choices only through
    `fifo` (a streaming first layer implies it: options.decide_hardware)."""
    return tuple(rollover(hw, ll, stream_values(hw, ll)) if pl.streaming else None
                 for ll, pl in enumerate(hw.placement.layers))
