"""Per-layer geometry registers: sequencing, row/column/pooling counters, stride, and the
data-memory and TRAM pointers (seed 000, "Layer registers": CNNx16_n_Ly_RCNT, _CCNT,
_PRCNT, _PCCNT, _STRIDE, _WPTR_*, _RPTR_BASE, _TPTR, _NXTLYR).
"""
from __future__ import annotations

from ...map.hw import HwView, ffs, popcount
from ...network import Op
from .layer_common import LayerContext


def next_layer(hw: HwView, ll: int) -> int:
    """Next-layer register (MAX78002): jump bit 7 | target, or stop bit 8."""
    lt = hw.placement.layers[ll].next_sequence
    if lt == -1:
        # The last configured layer stops on its own; only an early end needs the bit.
        return 1 << 8 if ll != hw.count - 1 else 0
    if lt != ll + 1:
        return 1 << 7 | hw.hw_index(lt)
    snoop = hw.layers[ll].snoop_sequence
    if snoop is not None:
        return 1 << 7 | hw.hw_index(snoop)
    return 0


def _in_rows_cols(hw: HwView, ll: int) -> tuple[int, int]:
    lay = hw.network.layers[ll]
    h = hw.layers[ll]
    if lay.flatten:
        return lay.pool[0], lay.pool[1]
    if h.operator.transposed:
        # Zero insertion makes the transposed convolution read `stride` times the input.
        return lay.stride[0] * h.input_dim[0], lay.stride[1] * h.input_dim[1]
    if h.operator.passthrough and h.emulate_eltwise:
        return h.input_dim[0] * h.in_expand, h.input_dim[1]
    return h.input_dim[0], h.input_dim[1]


def _last_fetch_diff(extent: int, pool: int, pool_dil: int, pool_stride: int) -> int:
    """Elements after the last pooling window start (MAX78002 counters stop early)."""
    return extent - ((extent - pool - pool_dil + 1) // pool_stride) * pool_stride


def row_count(hw: HwView, ll: int) -> int:
    dev = hw.dev
    lay = hw.network.layers[ll]
    pl = hw.placement.layers[ll]
    h = hw.layers[ll]
    in_row, in_col = _in_rows_cols(hw, ll)
    if dev.regs.cnt_diff_offs is None:
        val = in_row - 1
        val |= h.padding[0] << dev.regs.pad_cnt_offs
        return val + 2 * h.padding[0]
    diff = _last_fetch_diff(in_row, lay.pool[0], lay.pool_dilation[0], lay.pool_stride[0])
    val = in_row - diff
    if h.operator.one_d:
        diff = 1
    else:
        diff = _last_fetch_diff(in_col, lay.pool[1], lay.pool_dilation[1], lay.pool_stride[1])
    diff = (diff + (lay.pool_stride[0] - 1) * in_col) * (pl.input_skip + 1) * lay.operands \
        * h.in_expand
    val |= diff << dev.regs.cnt_diff_offs
    if h.padding[0] > 0:
        val |= 1 << dev.regs.pad_ena_offs | (h.padding[0] - 1) << dev.regs.pad_cnt_offs
    return val


def column_count(hw: HwView, ll: int) -> int:
    dev = hw.dev
    lay = hw.network.layers[ll]
    h = hw.layers[ll]
    _, in_col = _in_rows_cols(hw, ll)
    if dev.regs.cnt_diff_offs is None:
        val = in_col - 1
        val |= h.padding[1] << dev.regs.pad_cnt_offs
        return val + 2 * h.padding[1]
    diff = _last_fetch_diff(in_col, lay.pool[1], lay.pool_dilation[1], lay.pool_stride[1])
    val = in_col - diff | diff << dev.regs.cnt_diff_offs
    if h.padding[1] > 0:
        val |= 1 << dev.regs.pad_ena_offs | (h.padding[1] - 1) << dev.regs.pad_cnt_offs
    return val


def pool_count(hw: HwView, ll: int, axis: int) -> int:
    lay = hw.network.layers[ll]
    val = (lay.pool[axis] - 1) * lay.pool_dilation[axis]
    if hw.dev.regs.cnt_inc_offs is not None:
        val |= (lay.pool_dilation[axis] - 1) << hw.dev.regs.cnt_inc_offs
    return val


def stride(hw: HwView, ll: int) -> int:
    lay = hw.network.layers[ll]
    h = hw.layers[ll]
    if h.operator.transposed:
        val = 0
    elif lay.pool_stride[0] > 1:
        val = lay.pool_stride[0] - 1
    else:
        val = lay.stride[0] - 1
    if hw.dev.regs.mp_stride_offs is not None:
        val |= lay.pool_stride[0] * lay.operands * h.in_expand \
            * (hw.placement.layers[ll].input_skip + 1) << hw.dev.regs.mp_stride_offs
    return val


def write_pointer(hw: HwView, ctx: LayerContext, group: int) -> int:
    dev = hw.dev
    ll = ctx.ll
    lay = hw.network.layers[ll]
    pl = hw.placement.layers[ll]
    h = hw.layers[ll]
    omap = pl.output_processor_map
    val = (pl.out_offset - h.out_ignore) // 4
    if ctx.local_source:
        instance = ffs(omap >> group * dev.processors_per_memory) & ~(dev.processors_per_memory - 1)
        return val | (instance + group * dev.processors_per_memory) * dev.data_instance_stride_words
    if h.operator.has_weights and lay.conv_groups > 1 and not h.broadcast:
        first_group = ffs(pl.processor_map) // dev.processors_per_quadrant
        if group - first_group < 0:
            return 0
        wptr = (group - first_group) * dev.processors_per_quadrant + ffs(omap)
        if group != first_group:
            wptr -= ffs(pl.processor_map) % dev.processors_per_quadrant
        return val | (wptr // dev.processors_per_memory) << dev.regs.write_ptr_shift
    group_bits = omap & dev.quadrant_bits(group)
    if h.operator.has_weights:
        instance = ffs(omap) & ~(dev.processors_per_memory - 1)
    elif group_bits > 0:
        instance = ffs(group_bits) & ~(dev.processors_per_memory - 1)
    else:
        instance = 0
    return val | (instance % dev.processors_per_memory) * dev.data_instance_stride_words \
        | (instance // dev.processors_per_memory) << dev.regs.write_ptr_shift


def write_pointer_timeslot(hw: HwView, ll: int) -> int:
    lay = hw.network.layers[ll]
    h = hw.layers[ll]
    if h.operator is Op.CONV1D and lay.conv_groups > 1 and not h.broadcast:
        # A depthwise layer without broadcast writes in time slots, four processors a
        # data memory apart, as pass-through layers do (their known answers step by this
        # offset). The vendor sets it for Conv2d and Linear only and leaves 0 for Conv1d
        # (izer/backend/max7800x.py), so every fifth channel overwrote the first four
        # (random 1379 on the MAX78002: its C fails; values right, placement wrong).
        return hw.dev.data_instance_stride_words * 4
    if h.operator in (Op.CONV2D, Op.LINEAR):
        if h.kernel_size == (1, 1) and lay.conv_groups == 1:
            return 1
        if lay.conv_groups > 1 and not h.broadcast:
            return hw.dev.data_instance_stride_words * 4
        return 0
    if h.operator.passthrough:
        pmap = hw.placement.layers[ll].processor_map
        if popcount(pmap) > 4 or (lay.operands > 1 and h.in_expand > 1):
            return hw.dev.data_instance_stride_words * 4
        return hw.dev.data_instance_stride_words
    return 0


def write_pointer_mask(hw: HwView, ll: int) -> int | None:
    """Mask offset register (None: not written for passthrough layers)."""
    if hw.layers[ll].operator.passthrough:
        return None
    return 1 << hw.dev.regs.write_ptr_shift


def write_pointer_channel(hw: HwView, ll: int) -> int:
    lay = hw.network.layers[ll]
    if hw.layers[ll].out_expand > 1:
        return (lay.output_width // 8) * (hw.placement.layers[ll].write_gap + 1)
    return 0


def read_pointer(hw: HwView, ll: int) -> int:
    return hw.placement.layers[ll].in_offset // 4


def tram_pointer_max(hw: HwView, ctx: LayerContext) -> int:
    ll = ctx.ll
    h = hw.layers[ll]
    streaming = hw.placement.layers[ll].streaming
    if h.operator.one_d or (h.operator in (Op.CONV2D, Op.LINEAR)
                                   and h.kernel_size == (1, 1)
                                   and (ll == 0 or not streaming)):
        if ctx.flatten_prod >= 16:
            return ctx.flatten_prod << 16 | (2 * ctx.flatten_prod + 1)
        return 0
    val = h.tram_max - 1
    if ll > 0 and streaming:
        # Streaming layers share the TRAM: each starts after the previous ones' rows.
        prev_max = sum(hw.layers[i].tram_max * hw.layers[i].in_expand for i in range(ll))
        val += prev_max
        val |= prev_max << 16
    return val
