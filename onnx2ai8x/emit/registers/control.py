"""Quadrant (global) control: clocks, SRAM control, layer count, FIFO control, the
start/stop sequence and the interrupt acknowledge (seed 000, "CNN global registers":
CNNx16_n_CTRL, _SRAM, _LCNT_MAX, _TEST, FIFO_CTRL, AON control).
"""
from __future__ import annotations

from ...map.hw import HwView
from ...map.kernels import fifo_input_map
from .writes import Write, WriteList

SRAM_CONTROL = 0x40E  # the value the vendor tool programs; the reset value is not used
CTL_CLOCK_ENABLE = 1 << 3
CTL_FIFO_ENABLE = 1 << 15
CTL_MEXPRESS = 1 << 20
CTL_EXT_SYNC = 1 << 11
CTL_ENABLE = 1
CTL_DONE = 1 << 12
CTL_STREAM_DONE = 1 << 14
# --one-shot (MAX78002): the accelerator stops after every layer until cnn_continue()
CTL_ONE_SHOT = 1 << 8
CTL_QUAD_PACK = 1 << 31  # the fast FIFO in quad fan-out (the vendor's Qupac bit)


def _any_bias(hw: HwView) -> bool:
    return any(lay.bias_hw is not None or lay.bias is not None for lay in hw.network.layers)


def cnn_init(hw: HwView) -> tuple[Write, ...]:
    dev = hw.dev
    opts = hw.choices
    w = WriteList()
    if dev.require_reg_clear:
        # MAX78002 registers must be cleared by the BIST engine before they are written.
        val = 0 if hw.pipeline else 1 << 5
        for g in hw.groups_used:
            w.put(dev.ctl_addr(g, dev.regs.reg_ctl), val | CTL_CLOCK_ENABLE, "Enable clocks")
    w.put(dev.fifo_addr(dev.regs.aon_ctl), 0, "AON control", force=True)
    if dev.require_reg_clear:
        for g in hw.groups_used:
            w.put(dev.ctl_addr(g, dev.regs.reg_sram), SRAM_CONTROL, "SRAM control")
        clear = dev.regs.bist_zero_both if _any_bias(hw) else dev.regs.bist_zero
        for g in hw.groups_used:
            w.put(dev.ctl_addr(g, dev.regs.reg_sram_test), clear, "Clear registers")
        for g in hw.groups_used:
            w.wait(dev.ctl_addr(g, dev.regs.reg_sram_test), dev.regs.bist_zero_wait,
                   dev.regs.bist_zero_wait, "Wait for clear")
        for g in hw.groups_used:
            w.put(dev.ctl_addr(g, dev.regs.reg_sram_test), 0, "Reset BIST", force=True)
    for g in hw.groups_used:
        val = CTL_CLOCK_ENABLE
        if opts.fifo:
            val |= CTL_FIFO_ENABLE
        if opts.mexpress:
            val |= CTL_MEXPRESS
        if dev.support_pipeline and not hw.pipeline:
            val |= 1 << 5
        w.put(dev.ctl_addr(g, dev.regs.reg_ctl), val, "Stop state machine")
        if not dev.require_reg_clear:
            w.put(dev.ctl_addr(g, dev.regs.reg_sram), SRAM_CONTROL, "SRAM control")
        final = hw.placement.final_layer
        val = (final + hw.sum_hw_layers) \
            | (hw.start_layer + hw.hw_add_layers[hw.start_layer]) << 8
        w.put(dev.ctl_addr(g, dev.regs.reg_lcnt_max), val, "Layer count")
    if opts.zero_sram:
        zero_memories(hw, w)
    return w.done()


def zero_memories(hw: HwView, w: WriteList) -> None:
    """--zero-sram: run the memories' built-in self-tests, which leave data, kernel,
    TRAM and bias memory zeroed, in every quadrant (used or not, as the vendor does:
    a data buffer must read zeros in its first inference; seed 000, Rolling Buffers).
    cnn_init returns CNN_FAIL when a test reports an error."""
    dev = hw.dev
    for what, start, done, error in dev.regs.bist_sram:
        addrs = [dev.ctl_addr(g, dev.regs.reg_sram_test) for g in range(dev.quadrants)]
        for a in addrs:
            w.put(a, start, f"{what} BIST")
        for a in addrs:
            w.wait(a, done, done, "Wait for BIST")
        for a in addrs:
            w.check(a, error, 0, "Return on BIST error")
        for a in addrs:
            w.put(a, 0, "Reset BIST", force=True)


def fifo_control(hw: HwView, w: WriteList) -> None:
    """FIFO control, programmed at the end of cnn_configure when a FIFO feeds the input."""
    dev = hw.dev
    opts = hw.choices
    if not opts.fifo:
        return
    start = hw.start_layer
    pmap0 = fifo_input_map(hw.placement)
    if not opts.fast_fifo:
        val = 0x02 << 2 | 0x02 << 7
        if dev.require_fifo_cpl:
            val |= 1 << 11
        for i in range(hw.network.layers[start].input_channels):
            fifo = i % dev.quadrants
            if pmap0 & 1 << fifo * dev.processors_per_quadrant:
                val |= 1 << fifo + 12
        w.put(dev.fifo_addr(dev.regs.fifo_ctl), val, "FIFO control")
    else:
        w.put(dev.fast_fifo_addr(dev.regs.fast_fifo_ie), 0, "Fast FIFO interrupt enable")
        w.put(dev.fast_fifo_addr(dev.regs.fast_fifo_cr), 10 << 4, "Fast FIFO control")


def snoop_registers(hw: HwView, w: WriteList) -> None:
    snoop = hw.choices.snoop
    if snoop is None:
        return
    dev = hw.dev
    for g in hw.groups_used:
        for reg, value in zip(dev.regs.reg_snoop, snoop, strict=False):
            w.put(dev.ctl_addr(g, reg), value, "Conditional execution")


def _run_control(hw: HwView) -> int:
    """The control value every quadrant runs with (before per-quadrant bits)."""
    dev = hw.dev
    opts = hw.choices
    places = hw.placement.layers
    streaming = any(p.streaming for p in places)
    val = 1 << 14 if streaming else 0
    if opts.avg_pool_rounding:
        val |= 1 << 13
    if opts.fifo:
        val |= 1 << 11
    if opts.fifo and streaming:
        val |= 1 << 19
    val |= CTL_CLOCK_ENABLE
    if opts.mexpress:
        val |= CTL_MEXPRESS
    if opts.simple1b:
        val |= 1 << 21
    if hw.binary_weights:
        val |= 1 << 30
    if dev.regs.ctl_pipeline_offs is not None:
        if not hw.pipeline:
            val |= 1 << dev.regs.ctl_pipeline_offs
        start = places[hw.start_layer]
        if start.streaming and start.big_data:
            val |= 1 << 6
    if opts.snoop is not None:
        val |= 1 << 7
    if dev.support_pipeline and not hw.pipeline:
        val |= 1 << 5
    if opts.one_shot:
        val |= CTL_ONE_SHOT
    if opts.fast_fifo_quad:
        val |= CTL_QUAD_PACK
    return val


def _fifo_group_bits(hw: HwView, group: int) -> int:
    opts = hw.choices
    pmap0 = fifo_input_map(hw.placement)
    if opts.fifo and pmap0 & 0x0F << group * 16:
        val = CTL_FIFO_ENABLE
        if opts.fast_fifo:
            val |= 1 << 22
            if _fifo_group(hw):
                val |= 1 << 23
        return val
    return CTL_FIFO_ENABLE if opts.fifo else 0


def _fifo_group(hw: HwView) -> bool:
    pmap0 = fifo_input_map(hw.placement)
    return not (pmap0 != 1 and pmap0 & 0x0E == 0)


def cnn_start(hw: HwView) -> tuple[Write, ...]:
    """Enable the other quadrants first, then the master quadrant (order matters)."""
    dev = hw.dev
    w = WriteList()
    val = _run_control(hw)
    master = hw.groups_used[0]
    for g in hw.groups_used:
        fval = _fifo_group_bits(hw, g)
        if g != master:
            fval |= CTL_ENABLE
        fval |= CTL_EXT_SYNC
        w.put(dev.ctl_addr(g, dev.regs.reg_ctl), val | fval | master << 9, f"Enable quadrant {g}")
    if hw.choices.powerdown:
        unused = 0
        for g in range(dev.quadrants):
            if g not in hw.groups_used:
                unused |= 1 << 12 + g
        w.put(dev.fifo_addr(dev.regs.aon_ctl), unused, "AON control")
    pmap0 = fifo_input_map(hw.placement)
    if hw.choices.fifo and pmap0 & 0x0F << master * 16:
        val |= CTL_FIFO_ENABLE
        if hw.choices.fast_fifo:
            val |= 1 << 22
            if _fifo_group(hw):
                val |= 1 << 23
    w.put(dev.ctl_addr(master, dev.regs.reg_ctl), val | CTL_ENABLE,
          f"Master enable quadrant {master}")
    return w.done()


def cnn_stop(hw: HwView) -> tuple[Write, ...]:
    master = hw.groups_used[0]
    return (Write(hw.dev.ctl_addr(master, hw.dev.regs.reg_ctl), ~CTL_ENABLE & 0xFFFFFFFF, "&=",
                  f"Disable quadrant {master}"),)


def cnn_continue(hw: HwView) -> tuple[Write, ...]:
    master = hw.groups_used[0]
    return (Write(hw.dev.ctl_addr(master, hw.dev.regs.reg_ctl), CTL_ENABLE, "|=",
                  f"Re-enable quadrant {master}"),)


def cnn_isr(hw: HwView) -> tuple[Write, ...]:
    """Acknowledge the interrupt in every quadrant (clear done, streaming done, enable)."""
    bits = CTL_DONE | CTL_ENABLE
    if hw.choices.one_shot and not hw.dev.oneshot_clear:
        # one layer per continue: only the done bit is cleared, the run stays enabled
        bits = CTL_DONE
    elif any(p.streaming for p in hw.placement.layers):
        bits |= CTL_STREAM_DONE
    return tuple(Write(hw.dev.ctl_addr(g, hw.dev.regs.reg_ctl), ~bits & 0xFFFFFFFF, "&=",
                       f"Acknowledge quadrant {g}") for g in hw.groups_used)

