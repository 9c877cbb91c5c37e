"""The register program: every register write of the generated C, per C function."""
from __future__ import annotations

from dataclasses import dataclass

from ...map import streaming
from ...map.hw import HwView
from ...map.lowered import HwNetwork
from . import control, layer_control, layer_geometry
from .layer_common import layer_context
from .writes import WeightMemoryMap, Write, WriteList

# The inserted MAX78002 average-pool reset layer: a tiny single-quadrant passthrough whose
# register values are fixed (seed 000, "Average pooling after element-wise").
_RESET_LAYER = {"rcnt": 1 << 16, "ccnt": 1 << 16, "stride": 0x10, "lctl": 0x920,
                "oned": 0x100, "post": 0x03000000, "ena": 1}


@dataclass(frozen=True)
class RegisterProgram:
    """Register writes per C function, in program order."""

    cnn_init: tuple[Write, ...]
    cnn_configure: tuple[Write, ...]
    cnn_start: tuple[Write, ...]
    cnn_stop: tuple[Write, ...]
    cnn_continue: tuple[Write, ...]
    cnn_isr: tuple[Write, ...]
    groups_used: tuple[int, ...]

    def functions(self) -> dict[str, tuple[Write, ...]]:
        return {"cnn_init": self.cnn_init, "cnn_configure": self.cnn_configure,
                "cnn_start": self.cnn_start, "cnn_stop": self.cnn_stop,
                "cnn_continue": self.cnn_continue, "CNN_ISR": self.cnn_isr}


def _configure_layer(hw: HwView, mem: WeightMemoryMap, ll: int, w: WriteList) -> None:
    dev = hw.dev
    ctx = layer_context(hw, mem, ll)
    hl = ctx.hw_layer
    reset = hw.layers[ll].avgpool_reset
    sv = streaming.stream_values(hw, ll)

    def lreg(group: int, reg: int | None, value: int, comment: str) -> None:
        if reg is not None:
            w.put(dev.lreg_addr(group, reg, hl), value, comment)

    def reset_reg(group: int, reg: int, value: int) -> None:
        # The reset layer occupies the slot just before this layer, first quadrant only.
        if reset and group == hw.groups_used[0]:
            w.put(dev.lreg_addr(group, reg, hl - 1), value, "Average pool reset layer")

    for group in hw.groups_used:
        if dev.regs.nxtlyr is not None:
            lreg(group, dev.regs.nxtlyr, layer_geometry.next_layer(hw, ll), "Next layer")
        reset_reg(group, dev.regs.rcnt, _RESET_LAYER["rcnt"])
        lreg(group, dev.regs.rcnt, layer_geometry.row_count(hw, ll), "Rows")
        reset_reg(group, dev.regs.ccnt, _RESET_LAYER["ccnt"])
        lreg(group, dev.regs.ccnt, layer_geometry.column_count(hw, ll), "Columns")
        lreg(group, dev.regs.prcnt, layer_geometry.pool_count(hw, ll, 0), "Pooling rows")
        lreg(group, dev.regs.pccnt, layer_geometry.pool_count(hw, ll, 1), "Pooling columns")
        reset_reg(group, dev.regs.stride, _RESET_LAYER["stride"])
        lreg(group, dev.regs.stride, layer_geometry.stride(hw, ll), "Stride")
        wptr = layer_geometry.write_pointer(hw, ctx, group)
        reset_reg(group, dev.regs.wptr_base, wptr)
        lreg(group, dev.regs.wptr_base, wptr, "SRAM write pointer")
        toffs = layer_geometry.write_pointer_timeslot(hw, ll)
        reset_reg(group, dev.regs.wptr_toffs, toffs)
        lreg(group, dev.regs.wptr_toffs, toffs, "Write pointer time slot offset")
        moffs = layer_geometry.write_pointer_mask(hw, ll)
        if moffs is not None:
            lreg(group, dev.regs.wptr_moffs, moffs, "Write pointer mask offset")
        lreg(group, dev.regs.wptr_choffs, layer_geometry.write_pointer_channel(hw, ll),
             "Write pointer multi-pass channel offset")
        rptr = layer_geometry.read_pointer(hw, ll)
        reset_reg(group, dev.regs.rptr_base, rptr)
        lreg(group, dev.regs.rptr_base, rptr, "SRAM read pointer")
        reset_reg(group, dev.regs.lctl, _RESET_LAYER["lctl"])
        lreg(group, dev.regs.lctl, layer_control.layer_control(hw, mem, ctx, group),
             "Layer control")
        lreg(group, dev.regs.lctl2, layer_control.layer_control2(hw, ctx), "Layer control 2")
        for reg, value in layer_control.mask_registers(hw, ctx):
            lreg(group, reg, value, "Mask offset and count")
        if dev.regs.ochan is not None:
            lreg(group, dev.regs.ochan, layer_control.output_channels(hw, mem, ctx),
                 "Output channel count")
        reset_reg(group, dev.regs.oned, _RESET_LAYER["oned"])
        lreg(group, dev.regs.oned, layer_control.one_d(hw, ctx), "1D")
        lreg(group, dev.regs.tptr, layer_geometry.tram_pointer_max(hw, ctx), "TRAM pointer max")
        reset_reg(group, dev.regs.post, _RESET_LAYER["post"])
        lreg(group, dev.regs.post, layer_control.post_processing(hw, mem, ctx, group),
             "Post processing")
        reset_reg(group, dev.regs.ena, _RESET_LAYER["ena"])
        lreg(group, dev.regs.ena, layer_control.enables(hw, ctx, group),
             "Mask and processor enables")
        lreg(group, dev.regs.stream1, streaming.stream1(hw, ll, sv), "Stream processing start")
        lreg(group, dev.regs.stream2, streaming.stream2(hw, ll, sv), "Stream processing delta")
        fmax = streaming.rollover(hw, ll, sv)
        if fmax is not None:
            lreg(group, dev.regs.fmax, fmax, "Rollover")
        frame = streaming.input_frame(hw, ll)
        if frame is not None:
            w.put(dev.ctl_addr(group, dev.regs.reg_ifrm), frame, "Input frame size")


def cnn_configure(hw: HwView, mem: WeightMemoryMap) -> tuple[Write, ...]:
    w = WriteList()
    for ll in range(hw.placement.first_layer_used, hw.count):
        _configure_layer(hw, mem, ll, w)
    control.snoop_registers(hw, w)
    control.fifo_control(hw, w)
    return w.done()


def register_program(lowered: HwNetwork, memory: WeightMemoryMap | None = None
                     ) -> RegisterProgram:
    """All register writes for a lowered network (pure; no files). `memory`: the kernel
    and bias placement the registers point at (default: the lowered network's own
    allocation)."""
    if memory is None:
        memory = WeightMemoryMap.of(lowered.weights)
    hw = lowered.view
    return RegisterProgram(
        cnn_init=control.cnn_init(hw), cnn_configure=cnn_configure(hw, memory),
        cnn_start=control.cnn_start(hw), cnn_stop=control.cnn_stop(hw),
        cnn_continue=control.cnn_continue(hw), cnn_isr=control.cnn_isr(hw),
        groups_used=hw.groups_used)
