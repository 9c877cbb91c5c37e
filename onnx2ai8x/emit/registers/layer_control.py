"""Per-layer control registers: layer control 1 and 2, mask (kernel memory) pointers,
output channel count, 1-D/element-wise control, post-processing (shift, bias,
activation, flatten) and the processor/mask enables (seed 000, "Layer registers":
CNNx16_n_Ly_LCTRL0/1, _MCNT, _OCHAN, _ONED, _POST, _EN).
"""
from __future__ import annotations

from ...errors import Ai8xError
from ...map.hw import HwView, ffs, fls
from ...map.kernels import quad_fan_out
from ...network import (
    ACT_ABS,
    ACT_RELU,
    ELTWISE_ADD,
    ELTWISE_OR,
    ELTWISE_SUB,
    ELTWISE_XOR,
    Op,
)
from .layer_common import LayerContext
from .writes import WeightMemoryMap

# Element-wise function codes of the ONED register (seed 000, "Element-wise operations").
# Multiplication has no code: the accelerator cannot multiply operands element-wise.
ELTWISE_CODE = {ELTWISE_ADD: 0b01, ELTWISE_SUB: 0b00, ELTWISE_XOR: 0b11, ELTWISE_OR: 0b10}


def layer_control(hw: HwView, mem: WeightMemoryMap, ctx: LayerContext, group: int) -> int:
    dev = hw.dev
    ll = ctx.ll
    lay = hw.network.layers[ll]
    pl = hw.placement.layers[ll]
    h = hw.layers[ll]
    pooling = lay.pool[0] > 1 or lay.pool[1] > 1
    val = (0x200 if lay.activation == ACT_RELU else 0) \
        | (0x100 if not lay.pool_average else 0) \
        | (0x80 if pooling else 0) \
        | (0x40 if pl.big_data else 0) \
        | 0x20
    if not ctx.local_source:
        val |= 1 << 11
    if lay.conv_groups > 1 and h.broadcast:
        val |= 1 << 29
    if lay.output_width != 8:
        val |= 1 << 16
    if h.operator.has_weights and group == hw.groups_used[0] and lay.conv_groups == 1 \
            and not quad_fan_out(hw.placement, ll):
        # (Quad fan-out: every quadrant computes its own channels, nothing to collect.)
        # The first quadrant collects partial sums from every other quadrant taking part,
        # and from the quadrant that holds the bias.
        sources = 0
        for t in range(hw.groups_used[0] + 1, dev.quadrants):
            if dev.in_quadrant(pl.processor_map, t):
                sources |= 1 << t
        bias_group = mem.bias_group[ll]
        if bias_group is not None and bias_group >= 0 and bias_group != group:
            sources |= 1 << bias_group
        val |= sources << 12
    if pl.read_ahead and dev.regs.rd_ahead_offs is not None:
        val |= 1 << dev.regs.rd_ahead_offs
    if dev.regs.cprime_max_offs is not None and h.operator.has_weights:
        val |= (h.kernel_size[0] - 1) << dev.regs.rprime_max_offs
        val |= (h.kernel_size[1] - 1) << dev.regs.cprime_max_offs
    if pl.read_ahead and dev.regs.shift_cnt_offs is not None:
        val |= ((h.in_expand - 1) // 4 if h.tcalc else h.in_expand - 1) << dev.regs.shift_cnt_offs
    if pl.bypass:
        val |= 1 << 30
    return val


def layer_control2(hw: HwView, ctx: LayerContext) -> int:
    dev = hw.dev
    ll = ctx.ll
    pl = hw.placement.layers[ll]
    h = hw.layers[ll]
    lay = hw.network.layers[ll]
    if ctx.in_exp >= dev.max_passes:
        raise Ai8xError("emit.limit", lay.name,
                        f"input expansion of {ctx.in_exp + 1} passes exceeds the device "
                        f"limit of {dev.max_passes}",
                        "use fewer input channels or a smaller flattened input")
    omap = pl.output_processor_map
    first = ffs(omap) & ~(dev.processors_per_memory - 1)
    val = (fls(omap) - first) * ctx.quant << dev.regs.xpch_max_offs | ctx.in_exp
    if h.operator.has_weights:
        skip = h.out_expand * (pl.write_gap + 1) - 1
    else:
        skip = pl.write_gap
    return val | skip << 4


def mask_registers(hw: HwView, ctx: LayerContext) -> list[tuple[int, int]]:
    """(register index, value) of the kernel-memory pointer register(s)."""
    dev = hw.dev
    h = hw.layers[ctx.ll]
    kl, koffs = ctx.mask_count, ctx.mask_offset
    if dev.regs.mcnt1 is not None:
        if h.operator.has_weights:
            return [(dev.regs.mcnt1, kl + koffs), (dev.regs.mcnt2, koffs)]
        return [(dev.regs.mcnt2, (h.out_expand - 1) * 8)]
    if h.operator.has_weights:
        val = koffs << dev.regs.mcnt_sad_offs | (kl + koffs) << dev.regs.mcnt_max_offs
    elif h.emulate_eltwise:
        val = 0
    else:
        val = (h.out_expand - 1) * 8
    return [(dev.regs.mcnt, val)]


def output_channels(hw: HwView, mem: WeightMemoryMap, ctx: LayerContext) -> int:
    """Output channel count register (MAX78002)."""
    ll = ctx.ll
    lay = hw.network.layers[ll]
    h = hw.layers[ll]
    if hw.placement.layers[ll].bypass:
        return lay.output_channels - 1
    if h.operator.has_weights and lay.conv_groups == 1:
        val = mem.kernel_out_channels[ll] - 1
        return val // 4 if h.calcx4 else val
    if lay.conv_groups > 1:
        return (ctx.tscnt_max + 1) * h.in_expand - 1
    return ctx.tscnt_max


def one_d(hw: HwView, ctx: LayerContext) -> int:
    """1-D, 1x1 and element-wise control (ONED)."""
    ll = ctx.ll
    lay = hw.network.layers[ll]
    h = hw.layers[ll]
    val = ctx.tscnt_max
    if h.operator.one_d:
        val |= h.kernel_size[0] << 8 | 1 << 12
    elif (h.operator in (Op.CONV2D, Op.LINEAR) and h.kernel_size == (1, 1)) \
            or (h.operator.passthrough and lay.operands == 1):
        val |= 1 << 8
    if lay.operands > 1:
        if lay.eltwise not in ELTWISE_CODE:
            raise Ai8xError("emit.eltwise", lay.name,
                            "element-wise multiplication has no hardware encoding",
                            "use add, sub, or, or xor")
        val |= 1 << 13 | ELTWISE_CODE[lay.eltwise] << 14 | (lay.operands - 1) << 18
        if (lay.pool[0] > 1 or lay.pool[1] > 1) and lay.pool_first:
            val |= 1 << 16
        if h.operator.has_weights:
            val |= 1 << 17
    return val | ctx.oned_sad << 4


def post_processing(hw: HwView, mem: WeightMemoryMap, ctx: LayerContext,
                    group: int) -> int:
    ll = ctx.ll
    lay = hw.network.layers[ll]
    h = hw.layers[ll]
    q = lay.quantization
    # Narrow weights are scaled up by the hardware; these bits undo it (seed 004,
    # `quantization` and `output_shift`).
    val = {1: 1 << 22, -1: 1 << 22, 2: 2 << 22, 4: 3 << 22}.get(q, 0)
    shift = lay.output_shift
    val |= ((-shift | 16) if shift < 0 else shift) << 13
    bias_group = mem.bias_group[ll]
    offs = mem.bias_offsets[ll][group] if mem.bias_offsets[ll] else None
    if lay.conv_groups == 1 and group == bias_group:
        if offs is None:
            raise Ai8xError("emit.internal", lay.name,
                            f"the bias is placed in quadrant {group} without an offset",
                            "report this: kernel/bias allocation is inconsistent")
        val |= 1 << 12 | (offs // 4 if h.calcx4 else offs)
    elif offs is not None and (lay.conv_groups > 1 or quad_fan_out(hw.placement, ll)):
        # each quadrant reads its own channels' bias (depthwise, quad fan-out)
        val |= 1 << 12 | (offs // 4 if h.broadcast else offs)
    if h.operator.passthrough:
        val |= (3 if lay.operands == 1 else 1) << 24
    if lay.activation == ACT_ABS:
        val |= 1 << 26
    if ctx.flatten_prod >= 16:
        val |= 1 << 27 | (ctx.flatten_prod >> 4) << 18
    if h.operator.transposed:
        val |= 1 << 28
    if lay.conv_groups > 1:
        val |= 1 << 30 | 1 << 24
    if h.calcx4:
        val |= 1 << 29
    if h.tcalc:
        val |= 1 << 31
    return val


def enables(hw: HwView, ctx: LayerContext, group: int) -> int:
    """Processor enables (low half) and, for convolutions, the same mask enables (high)."""
    ll = ctx.ll
    dev = hw.dev
    pl = hw.placement.layers[ll]
    val = dev.in_quadrant(pl.processor_map, group)
    if hw.layers[ll].operator.has_weights and not pl.bypass:
        val = val << 16 | val
    return val
