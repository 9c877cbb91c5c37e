"""Memory maps and register indices of the two accelerators, as data.

Facts only (addresses, strides, register indices, field positions), from the vendor
synthesis tool's device tables (izer/tornadocnn.py) and the register field table of the
user guide (CNNx16_n_* registers). Every address is absolute.
"""
from __future__ import annotations

from dataclasses import dataclass

APB_BASE = 0x50000000


@dataclass(frozen=True)
class Device:
    name: str
    max_layers: int
    cnn_base: int  # quadrant 0 control registers
    group_stride: int  # bytes between quadrants (registers and memories)
    cnn_offset: int  # word offset of the per-layer register file
    layer_stride: int | None  # MAX78002: bytes between layers (registers <= max_lreg)
    max_lreg: int
    # per-layer register indices
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
    mcnt: int | None
    mcnt1: int | None
    mcnt2: int | None
    tptr: int
    ena: int
    post: int
    # memories (offsets relative to cnn_base)
    bram_offset: int
    mram_offset: int
    sram_offset: int
    bias_bytes: int  # per quadrant
    mask_offs: int  # kernel-memory slots (16 bytes each) per processor window
    sram_words: int  # usable 32-bit words per data memory (4 processors)
    write_ptr_shift: int  # data memory index above this bit of a write pointer
    # field layout differences
    cnt_bits: int
    pad_cnt_offs: int
    pad_ena_offs: int | None
    cnt_diff_offs: int | None
    cnt_inc_offs: int | None
    xpch_max_offs: int
    wptr_inc_bits: int  # LCTRL1 write pointer increment, from bit 4
    # The layer count register (CNNx16_n_LCNT_MAX): the last layer a run executes in
    # bits 0-7, the layer it starts at in bits 8-15 (izer/backend/max7800x.py writes
    # last | start << 8). `max_start_layer` is the highest start the part takes
    # (izer/tornadocnn.py MAX_START_LAYER): 0 on the MAX78000, whose runs always begin
    # at layer 0 (the vendor tool refuses --start-layer there), any layer on the MAX78002.
    reg_lcnt_max: int = 2
    max_start_layer: int = 0
    reg_ctl: int = 0
    # The SRAM test register and the bits that start a memory's built-in self-test,
    # which leaves that memory zeroed (--zero-sram; izer/tornadocnn.py REG_SRAM_TEST,
    # BIST_DATA_EX / BIST_MASK_EX / BIST_BIAS_EX: bits 0, 2 and 6 on both parts, the
    # MAX78002 setting further mode bits with them).
    reg_sram_test: int = 3
    bist_data_bit: int = 1 << 0
    bist_mask_bit: int = 1 << 2
    bist_bias_bit: int = 1 << 6
    # MAX78002 only (None/empty on MAX78000, which has neither register nor mode):
    ochan: int | None = None  # output channel count - 1 (LREG_OCHAN)
    # The stride register's multi-pass stride field, from this bit: pool stride x
    # operands x passes x (read gap + 1) (izer/tornadocnn.py MP_STRIDE_OFFS)
    mp_stride_offs: int | None = None
    # A streaming layer 0 reads its bias this many bytes past its bias address: the
    # vendor tool stores a spare zero byte there on the MAX78000 ("work around a problem
    # on AI85", izer/kbias.py, for devices without SUPPORT_STREAM_BIAS; seed 000
    # "Streaming Mode": bias values of streaming layers may not be added correctly).
    stream0_bias_skew: int = 0
    # Kernel memory regions for four-channel (calcx4) layers: (first word, words per
    # instance). A processor's kernel memory is four instances of 1024 words, and the
    # processors with extended memory (every 16th) have four more of 256 words above
    # word 4096 (izer/tornadocnn.py MASK_INSTANCE_LARGE/SMALL, MASK_WIDTH_SMALL).
    mask_regions: tuple[tuple[int, int], ...] = ()
    # Words of one data-memory instance: a data memory is INSTANCE_COUNT blocks that can
    # be read and written at the same time (izer/tornadocnn.py: 16384 bytes per instance,
    # datainstance_from_offs). Read-ahead needs input and output in different blocks.
    data_instance_words: int | None = None
    # MAX78002 snoop units: their control registers (quadrant control register index,
    # name; izer/tornadocnn.py REG_SNP1_A1 .. REG_SNP2_AM) and the CTRL bit that turns
    # conditional execution on. Only their addresses are facts here: what they match
    # is not described anywhere public, so the model refuses projects that use them.
    snoop_registers: tuple[tuple[int, str], ...] = ()
    ctl_snoop_bit: int | None = None
    # Streaming registers (start count, delta, rollover): per-layer register indices
    # (izer/tornadocnn.py LREG_STREAM1, LREG_STREAM2, LREG_FMAX).
    stream_regs: tuple[int, int, int] = (16, 17, 18)
    # CTRL bit 30 turns 1-bit kernels into +1 / -1 (MAX78002 binary weights; the MAX78000
    # has no such mode, its 1-bit kernels are 0 / -1).
    ctl_binary_bit: int | None = None
    # CTRL bits of features the model does not execute (bit, what), e.g. the MAX78002's
    # "simple 1-bit weights" (bit 21).
    ctl_unmodelled: tuple[tuple[int, str], ...] = ()
    # The fast FIFO (seed 000, "Fast FIFO": the RISC-V core's own FIFO, connected to
    # processors 0-3; in quad fan-out each word also reaches the same processors of
    # quadrants 1-3, as the vendor tool lays the first layer out): its data register
    # (izer/tornadocnn.py FAST_FIFO_BASE + 4 x FAST_FIFO_DR), the CTRL bit that selects it
    # for layer 0's input (izer/backend/max7800x.py: 1 << 22 with --fast-fifo) and the
    # CTRL bit of quad fan-out (1 << 31, --fast-fifo-quad).
    fast_fifo_data: int = 0x400C0410
    ctl_fast_fifo_bit: int = 22
    ctl_fast_fifo_quad_bit: int = 31

    def lreg(self, group: int, reg: int, layer: int) -> int:
        base = APB_BASE + self.cnn_base + self.group_stride * group + self.cnn_offset * 4
        if self.layer_stride is not None:
            if reg <= self.max_lreg:
                return base + reg * 4 + layer * self.layer_stride
            return base + reg * 4 + layer * 4
        return base + reg * 4 * self.max_layers + layer * 4

    def ctl(self, group: int, reg: int) -> int:
        return APB_BASE + self.cnn_base + self.group_stride * group + reg * 4

    @property
    def sram_base(self) -> int:
        return APB_BASE + self.cnn_base + self.sram_offset

    @property
    def sram_spacing(self) -> int:
        """Words between two data memories' address windows (and write-pointer unit)."""
        return 1 << self.write_ptr_shift

    def sram_address(self, memory: int, word: int) -> int:
        return (self.sram_base + (memory // 4) * self.group_stride
                + (memory % 4) * self.sram_spacing * 4 + word * 4)

    def sram_locate(self, address: int) -> tuple[int, int] | None:
        """(data memory 0..15, word) of an absolute address, or None."""
        rel = address - self.sram_base
        if rel < 0:
            return None
        group, rest = divmod(rel, self.group_stride)
        inst, off = divmod(rest, self.sram_spacing * 4)
        if group >= 4 or inst >= 4 or off // 4 >= self.sram_words:
            return None
        return group * 4 + inst, off // 4

    def mram_locate(self, address: int) -> tuple[int, int] | None:
        """(processor, byte offset in its kernel window) of an absolute address."""
        rel = address - (APB_BASE + self.cnn_base + self.mram_offset)
        if rel < 0:
            return None
        group, rest = divmod(rel, self.group_stride)
        proc, off = divmod(rest, self.mask_offs * 16)
        if group >= 4 or proc >= 16:
            return None
        return group * 16 + proc, off

    def bram_locate(self, address: int) -> tuple[int, int] | None:
        """(quadrant, byte index) of a bias-memory word address."""
        rel = address - (APB_BASE + self.cnn_base + self.bram_offset)
        if rel < 0:
            return None
        group, rest = divmod(rel, self.group_stride)
        if group >= 4 or rest // 4 >= self.bias_bytes:
            return None
        return group, rest // 4


MAX78000 = Device(
    name="MAX78000", max_layers=32, cnn_base=0x100000, group_stride=0x400000, cnn_offset=4,
    layer_stride=None, max_lreg=20, nxtlyr=None, rcnt=0, ccnt=1, oned=2, prcnt=3, pccnt=4,
    stride=5, wptr_base=6, wptr_toffs=7, wptr_moffs=8, wptr_choffs=9, rptr_base=10, lctl=11,
    lctl2=20, mcnt=12, mcnt1=None, mcnt2=None, tptr=13, ena=14, post=15,
    bram_offset=0x8000, mram_offset=0x80000, sram_offset=0x300000, bias_bytes=512,
    mask_offs=1024, sram_words=8192, write_ptr_shift=13,
    cnt_bits=10, pad_cnt_offs=16, pad_ena_offs=None, cnt_diff_offs=None, cnt_inc_offs=None,
    xpch_max_offs=8, wptr_inc_bits=4, stream0_bias_skew=1,
)

MAX78002 = Device(
    name="MAX78002", max_layers=128, cnn_base=0x1000000, group_stride=0x1000000,
    cnn_offset=0x40000, layer_stride=0x100, max_lreg=19, nxtlyr=0, rcnt=1, ccnt=2, oned=3,
    prcnt=4, pccnt=5, stride=6, wptr_base=7, wptr_toffs=8, wptr_moffs=9, wptr_choffs=10,
    rptr_base=11, lctl=12, lctl2=13, mcnt=None, mcnt1=14, mcnt2=15, tptr=17, ena=18, post=19,
    bram_offset=0x180000, mram_offset=0x400000, sram_offset=0x800000, bias_bytes=2048,
    mask_offs=8192, sram_words=20480, write_ptr_shift=15,
    cnt_bits=11, pad_cnt_offs=13, pad_ena_offs=15, cnt_diff_offs=16, cnt_inc_offs=4,
    xpch_max_offs=12, wptr_inc_bits=8,
    ochan=16, mask_regions=((0, 1024), (4096, 256)), data_instance_words=4096,
    snoop_registers=tuple(
        (0x42020 + 12 * unit + k, f"SNP{unit + 1}_{name}") for unit in range(2)
        for k, name in enumerate(("A1", "A2", "D1", "D2", "X1", "X2", "C1", "C2", "ACC",
                                  "HIT", "MAX", "AM"))),
    ctl_snoop_bit=7,
    mp_stride_offs=4,
    stream_regs=(0x2000, 0x2008, 0x2010), ctl_binary_bit=30,
    ctl_unmodelled=((21, "simple 1-bit weights"),),
    max_start_layer=127,
)

DEVICES = {"MAX78000": MAX78000, "MAX78002": MAX78002}
