"""Register map of the CNN accelerator, per device, as data.

Addresses and bit positions are the accelerator's register interface (seed 000, "CNN
registers" chapters; the numbers match the vendor synthesis tool's device tables). Every
function here is pure: a register's address from (quadrant, register, layer).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import Ai8xError

APB_BASE = 0x50000000  # the accelerator's peripheral window on both devices
FAST_FIFO_BASE = 0x400C0400  # the fast FIFO sits outside the CNN window (absolute)


@dataclass(frozen=True)
class DeviceRegs:
    """Register indices, address arithmetic and field positions of one device."""

    name: str
    max_layers: int
    cnn_offset: int  # C_CNN: word offset of the layer register file in a quadrant
    cnn_base: int  # quadrant 0's control registers (relative to APB_BASE)
    group_stride: int  # distance between quadrants
    layer_stride: int | None  # MAX78002 lays registers out per layer, MAX78000 per register
    # per-layer register indices (None: the register does not exist on this device)
    nxtlyr: int | None
    rcnt: int
    ccnt: int
    oned: int
    prcnt: int
    pccnt: int
    stride: int
    wptr_base: int
    wptr_toffs: int
    wptr_moffs: int
    wptr_choffs: int
    rptr_base: int
    lctl: int
    lctl2: int
    mcnt: int | None  # single mask register (MAX78000)
    mcnt1: int | None  # mask count / offset pair (MAX78002)
    mcnt2: int | None
    ochan: int | None
    tptr: int
    ena: int
    post: int
    stream1: int
    stream2: int
    fmax: int
    max_lreg: int  # registers above this index are packed one word per layer
    # quadrant control registers
    reg_ctl: int = 0
    reg_sram: int = 1
    reg_lcnt_max: int = 2
    reg_sram_test: int = 3
    reg_ifrm: int = 612
    reg_snoop: tuple[int, ...] = ()  # SNP1_A1 .. SNP2_AM, in order
    fifo_ctl: int = 0
    aon_ctl: int = 1024
    fast_fifo_cr: int = 0
    fast_fifo_ie: int = 2
    # geometry
    sram_offset: int = 0x300000  # data memory, relative to cnn_base
    mask_offs: int = 1024  # kernel memory word stride per processor (readback layout)
    p_numgroups: int = 4
    p_numpro: int = 16
    p_shared: int = 4
    instance_size: int = 2048
    write_ptr_shift: int = 13
    # field widths the vendor checks (bits)
    max_isval_bits: int = 14  # stream start
    max_dsval2_bits: int = 12  # stream delta 2
    max_fbuf_bits: int = 17  # rollover
    # field positions
    pad_cnt_offs: int = 16
    pad_ena_offs: int | None = None
    cnt_diff_offs: int | None = None
    cnt_inc_offs: int | None = None
    mp_stride_offs: int | None = None
    xpch_max_offs: int = 8
    rd_ahead_offs: int | None = None
    cprime_max_offs: int | None = None
    rprime_max_offs: int | None = None
    shift_cnt_offs: int | None = None
    mcnt_sad_offs: int = 16
    mcnt_max_offs: int = 0
    ctl_pipeline_offs: int | None = None
    # behaviour switches
    require_reg_clear: bool = False
    support_pipeline: bool = False
    require_new_streaming: bool = False
    require_fifo_cpl: bool = True
    emulate_eltwise_mp: bool = False
    emulate_1x1_streaming: bool = True
    require_passthrough_avgpool_after_eltwise: bool = False
    bist_zero: int = 0
    bist_zero_both: int = 0

    @property
    def max_proc(self) -> int:
        return self.p_numpro * self.p_numgroups

    def ctl_addr(self, group: int, reg: int) -> int:
        return APB_BASE + self.group_stride * group + self.cnn_base + reg * 4

    def lreg_addr(self, group: int, reg: int, layer: int) -> int:
        base = APB_BASE + self.group_stride * group + self.cnn_base + self.cnn_offset * 4
        if self.layer_stride is not None:
            if reg <= self.max_lreg:
                return base + reg * 4 + layer * self.layer_stride
            return base + reg * 4 + layer * 4
        return base + reg * 4 * self.max_layers + layer * 4

    def sram_addr(self, offset: int) -> int:
        """Absolute address of a data-memory byte offset (quadrant 0 relative)."""
        return APB_BASE + self.cnn_base + self.sram_offset + offset

    def fifo_addr(self, reg: int) -> int:
        return APB_BASE + reg * 4

    def fast_fifo_addr(self, reg: int) -> int:
        return FAST_FIFO_BASE + reg * 4


MAX78000 = DeviceRegs(
    name="MAX78000", max_layers=32, cnn_offset=4, cnn_base=0x100000, group_stride=0x400000,
    layer_stride=None, nxtlyr=None, rcnt=0, ccnt=1, oned=2, prcnt=3, pccnt=4, stride=5,
    wptr_base=6, wptr_toffs=7, wptr_moffs=8, wptr_choffs=9, rptr_base=10, lctl=11, lctl2=20,
    mcnt=12, mcnt1=None, mcnt2=None, ochan=None, tptr=13, ena=14, post=15, stream1=16,
    stream2=17, fmax=18, max_lreg=20, reg_ifrm=612,
    emulate_eltwise_mp=True,
)

MAX78002 = DeviceRegs(
    name="MAX78002", max_layers=128, cnn_offset=0x40000, cnn_base=0x1000000,
    group_stride=0x1000000, layer_stride=0x100, nxtlyr=0, rcnt=1, ccnt=2, oned=3, prcnt=4,
    pccnt=5, stride=6, wptr_base=7, wptr_toffs=8, wptr_moffs=9, wptr_choffs=10, rptr_base=11,
    lctl=12, lctl2=13, mcnt=None, mcnt1=14, mcnt2=15, ochan=16, tptr=17, ena=18, post=19,
    stream1=0x2000, stream2=0x2008, fmax=0x2010, max_lreg=19, reg_ifrm=0x42018,
    reg_snoop=tuple(range(0x42020, 0x42038)),
    instance_size=8192, write_ptr_shift=15, sram_offset=0x800000, mask_offs=8192,
    max_isval_bits=15, max_dsval2_bits=14, max_fbuf_bits=18,
    pad_cnt_offs=13, pad_ena_offs=15,
    cnt_diff_offs=16, cnt_inc_offs=4, mp_stride_offs=4, xpch_max_offs=12, rd_ahead_offs=17,
    cprime_max_offs=18, rprime_max_offs=22, shift_cnt_offs=26, ctl_pipeline_offs=5,
    require_reg_clear=True, support_pipeline=True, require_new_streaming=True,
    require_fifo_cpl=False, require_passthrough_avgpool_after_eltwise=True,
    bist_zero=1 << 12 | 1 << 11 | 1 << 7, bist_zero_both=1 << 12 | 1 << 11 | 1 << 10 | 1 << 7,
)

DEVICES = {"MAX78000": MAX78000, "MAX78002": MAX78002}


def device_regs(device: str) -> DeviceRegs:
    try:
        return DEVICES[device]
    except KeyError:
        raise Ai8xError("emit.device", device, f"no register map for device `{device}`",
                        "use --device MAX78000 or --device MAX78002") from None
