"""Register values of a hand-built network, against the register layout written out."""
from __future__ import annotations

import pytest

from onnx2ai8x.devices import get_device
from onnx2ai8x.emit.registers import register_program
from onnx2ai8x.emit.registers.writes import WriteList
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.options import EmitOptions
from tests.emit.synthetic import no_bias_memory, one_conv
from tests.lowering import lowered

MAX78000_LAYER_REG = 0x50100010  # quadrant 0, register 0, layer 0
MAX78002_LAYER_REG = 0x51100000


def _final(writes) -> dict[int, int]:
    return {w.address: w.value for w in writes if w.op == "="}


def test_layer_register_addresses() -> None:
    d0 = get_device("MAX78000")
    # MAX78000: one word per layer, 32 layers per register, quadrants 4 MB apart
    assert d0.lreg_addr(0, 0, 0) == MAX78000_LAYER_REG
    assert d0.lreg_addr(0, 1, 0) == MAX78000_LAYER_REG + 32 * 4
    assert d0.lreg_addr(0, 0, 5) == MAX78000_LAYER_REG + 5 * 4
    assert d0.lreg_addr(2, 0, 0) == MAX78000_LAYER_REG + 2 * 0x400000
    d2 = get_device("MAX78002")
    # MAX78002: 256-byte block of registers per layer, quadrants 16 MB apart
    assert d2.lreg_addr(0, 1, 0) == MAX78002_LAYER_REG + 4
    assert d2.lreg_addr(0, 1, 3) == MAX78002_LAYER_REG + 4 + 3 * 0x100
    assert d2.lreg_addr(1, 0, 0) == MAX78002_LAYER_REG + 0x1000000


def test_unknown_device_is_a_user_error() -> None:
    with pytest.raises(Ai8xError, match="MAX99999"):
        get_device("MAX99999")


def test_zero_values_are_not_written_unless_forced() -> None:
    w = WriteList()
    w.put(0x50000000, 0)
    w.put(0x50000004, 0, force=True)
    w.put(0x50000008, 5)
    assert [(x.address, x.value) for x in w.done()] == [(0x50000004, 0), (0x50000008, 5)]


def test_counts_pointers_and_enables_of_one_conv() -> None:
    pl = one_conv()
    prog = register_program(lowered(pl), no_bias_memory(pl))
    regs = _final(prog.cnn_configure)
    d = get_device("MAX78000")
    h, pad = 8, 1
    # rows/columns: last index, padding count at bit 16, padded extent added
    assert regs[d.lreg_addr(0, d.regs.rcnt, 0)] == (h - 1 | pad << 16) + 2 * pad
    assert regs[d.lreg_addr(0, d.regs.ccnt, 0)] == (h - 1 | pad << 16) + 2 * pad
    # read pointer: byte offset / 4; write pointer: out_offset / 4 (processor 0)
    assert d.lreg_addr(0, d.regs.rptr_base, 0) not in regs  # in_offset 0: not written
    assert regs[d.lreg_addr(0, d.regs.wptr_base, 0)] == 0x2000 // 4
    # processors 0-3 enabled, and their masks
    assert regs[d.lreg_addr(0, d.regs.ena, 0)] == 0xF << 16 | 0xF
    # ReLU (bit 9), max pool selected (bit 8, no average), master (bit 5), sync (bit 11)
    assert regs[d.lreg_addr(0, d.regs.lctl, 0)] == 1 << 9 | 1 << 8 | 1 << 5 | 1 << 11
    # TRAM: (columns + 2 pad - kernel width + 1) - 1
    assert regs[d.lreg_addr(0, d.regs.tptr, 0)] == 8 + 2 - 3
    # only quadrant 0 is used
    assert prog.groups_used == (0,)


def test_start_stop_continue_and_interrupt() -> None:
    pl = one_conv()
    prog = register_program(lowered(pl), no_bias_memory(pl))
    ctl = get_device("MAX78000").ctl_addr(0, 0)
    assert [(w.op, w.address, w.value) for w in prog.cnn_stop] == [("&=", ctl, 0xFFFFFFFE)]
    assert [(w.op, w.address, w.value) for w in prog.cnn_continue] == [("|=", ctl, 1)]
    # the interrupt clears "done" (bit 12) and "enable" (bit 0)
    assert [(w.op, w.value) for w in prog.cnn_isr] == [("&=", ~(1 << 12 | 1) & 0xFFFFFFFF)]
    # start: quadrant enabled with clocks (bit 3), express loading (bit 20), sync (bit 11),
    # then the master enable bit 0 last
    assert [w.value for w in prog.cnn_start] == [1 << 20 | 1 << 11 | 1 << 3,
                                                 1 << 20 | 1 << 3 | 1]
    assert prog.cnn_start[-1].address == ctl


def test_streaming_interrupt_also_clears_stream_done() -> None:
    pl = one_conv(streaming=True)
    prog = register_program(lowered(pl, EmitOptions(fifo=True)), no_bias_memory(pl))
    assert prog.cnn_isr[0].value == ~(1 << 12 | 1 << 14 | 1) & 0xFFFFFFFF


def test_fifo_control_and_frame_size() -> None:
    pl = one_conv(streaming=True)
    prog = register_program(lowered(pl, EmitOptions(fifo=True)), no_bias_memory(pl))
    regs = _final(prog.cnn_configure)
    d = get_device("MAX78000")
    assert regs[d.ctl_addr(0, d.regs.reg_ifrm)] == 8 * 8  # HWC: one word per pixel
    fifo = regs[d.fifo_addr(d.regs.fifo_ctl)]
    assert fifo & 1 << 12  # FIFO 0 feeds processor 0
    assert not fifo & 1 << 13


def test_options_from_vendor_args_and_cli() -> None:
    opts = EmitOptions.from_vendor_args(["--fifo", "--softmax", "--timer", "0", "--verbose"])
    assert opts.fifo and opts.softmax and opts.timer == 0 and opts.mexpress
    cli = EmitOptions.from_cli(fifo=False, mexpress=None, new_kernel_loader=False, timer=None)
    assert cli.mexpress and cli.new_kernel_loader and cli.timer is None
    assert not EmitOptions.from_cli(mexpress=False).mexpress
