"""The two accelerators as data: sizes, limits and base addresses.

One frozen record per device; every number is a fact of the hardware chapters of the
vendor guide ("MAX78000 and MAX78002 Hardware and Resources", "Limitations of MAX78000
Networks", "Limitations of MAX78002 Networks") cross-checked against the vendor tool's
device constants (izer/tornadocnn.py). Where the guide and the tool disagree, the tool's
value is used, because the tool is what the golden cases (and the silicon) were
validated with; each such place says so next to the field.

Other stages read these records instead of keeping their own tables. Nothing here is
mutable: `get_device` returns one of two module-level constants built once.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import EXIT_USAGE, Ai8xError

# The processor array, the same on both parts (seed 000, "Data, Weights, and Processors"):
# 64 processors in four quadrants of 16; four processors share one data-memory instance
# and one pass reads at most one channel per processor. Rules that hold for the whole
# family (the multi-pass split, processor masks) read these; a part with another array
# would give them a Device argument.
PROCESSORS = 64
QUADRANTS = 4
PROCESSORS_PER_QUADRANT = 16
PROCESSORS_PER_MEMORY = 4


@dataclass(frozen=True)
class RegisterLayout:
    """Where the accelerator's registers and their fields are (seed 000, "CNN registers";
    the vendor tool's device tables, izer/tornadocnn.py). Indices are 32-bit words."""

    cnn_offset: int  # word offset of the layer register file inside a quadrant
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
    reg_ifrm: int  # input frame size (FIFO-fed first layer)
    mlator: int  # the mlator read port
    # quadrant control registers
    reg_ctl: int = 0
    reg_sram: int = 1
    reg_lcnt_max: int = 2
    reg_sram_test: int = 3
    reg_snoop: tuple[int, ...] = ()  # SNP1_A1 .. SNP2_AM, in order
    fifo_ctl: int = 0  # FIFO control, relative to the APB window
    aon_ctl: int = 1024
    fast_fifo_cr: int = 0  # fast FIFO registers, relative to its own base
    fast_fifo_ie: int = 2
    write_ptr_shift: int = 13  # bit position of the instance number in a write pointer
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
    bist_zero: int = 0
    bist_zero_both: int = 0
    bist_zero_wait: int = 0  # status bit of the register clear (MAX78002)
    # --zero-sram: the built-in self-tests that leave the memories zeroed, in the order
    # the vendor runs them (izer/tornadocnn.py BIST_*): (what, start value written to the
    # SRAM test register, done bits waited for, error bit).
    bist_sram: tuple[tuple[str, int, int, int], ...] = ()


@dataclass(frozen=True)
class Device:
    """Everything the converter needs to know about one accelerator."""

    name: str  # canonical part number, e.g. "MAX78000"
    code: int  # the vendor tool's device number (85, 87)
    aliases: tuple[str, ...]

    # --- processors and data memory ("Data, Weights, and Processors") ---
    processors: int  # 64 processors ...
    quadrants: int  # ... in 4 groups of 16
    processors_per_quadrant: int
    processors_per_memory: int  # 4 processors share one data memory instance
    data_instances: int  # 16 data memory instances
    data_instance_bytes: int  # bytes one instance holds (32 KiB / 80 KiB)
    data_instance_words: int  # 32-bit words that exist in one instance
    data_instance_stride_words: int  # address distance between instances (words)

    # --- weight (kernel) memory ---
    kernel_words_small: int  # 9-byte kernel slots per ordinary processor
    kernel_words_large: int  # slots of processors 0, 16, 32, 48 (larger on MAX78002)
    kernel_bytes_per_word: int  # one slot holds a 3x3 8-bit kernel

    # --- bias memory ("Bias Memories") ---
    bias_instances: int  # one per quadrant
    bias_bytes_per_instance: int

    # --- layers and channels ---
    max_layers: int
    # the highest layer a run may start at (seed 000, "The MAX78002 hardware supports
    # starting a network at any pre-programmed layer"; the vendor tool's MAX_START_LAYER:
    # 0 on MAX78000, whose every run starts at layer 0)
    max_start_layer: int
    max_channels: int  # per layer, input and output (16 passes x 64 processors)
    channels_per_pass: int  # one pass reads at most one channel per processor
    max_passes: int  # the input-expansion field holds up to 16 passes
    max_dim: int  # rows/columns of any input or output (the tool's MAX_ROW_COL)

    # --- convolution geometry ---
    conv2d_kernels: tuple[tuple[int, int], ...]
    conv1d_kernel_max: int
    convtranspose2d_kernels: tuple[tuple[int, int], ...]
    paddings: tuple[int, ...]  # supported zero padding on each side
    conv2d_dilation_max: int
    conv1d_dilation_max: int
    conv1d_stretch_limit: int  # (k-1)*dilation below this: the kernel is stretched to <= 9
    conv1d_dilated_kernel_max: int  # longer dilations run on 3x3 hardware for k <= this
    convtranspose2d_stride: tuple[int, int]
    convtranspose2d_output_padding: tuple[int, ...]
    depthwise: bool  # groups == channels supported

    # --- pooling ---
    pool_max: int  # kernel 1..16 per dimension
    pool_stride_max: int
    pool_dilation_max: int
    pool_passes_max: int  # passes a pooling-only (pass-through) layer may take
    pool_last_operands_max: int  # element-wise operands when pooling after the operation

    # --- flatten / linear ("Fully Connected (Linear) Layers") ---
    flatten_pixels_max: int  # H*W
    flatten_inputs_max: int  # C*H*W

    # --- element-wise ---
    eltwise_operands_min: int
    eltwise_operands_max: int
    eltwise_multipass_emulated: bool  # MAX78000: >2 passes x >2 operands needs pass-through
    eltwise_multipass_conv_bias: bool  # MAX78002 cannot add bias to such layers
    # A single-pass layer may read data written with a gap (`read_gap`, seed 000/004:
    # "On MAX78002 only, when multi-pass is not used"); the tool refuses it with more
    # than one input pass (izer SUPPORT_MULTIPASS_STRIDE / _READ_STRIDE).
    read_gap: bool
    # Padded Conv1d may read more than one input pass (izer SUPPORT_MULTIPASS_PADDED_CONV1D:
    # MAX78000 yes, MAX78002 no; the vendor tool refuses it on MAX78002).
    multipass_padded_conv1d: bool

    # --- numerics ---
    weight_bits: tuple[int, ...]  # -1 is binary (+1/-1) weights
    output_shift_min: int
    output_shift_max: int
    output_widths: tuple[int, ...]

    # --- streaming and FIFOs ("Streaming Mode", "FIFOs") ---
    max_stream_layers: int
    stream_frame_max: int  # width * height * ceil(channels / 64) must stay below this
    fifo_channels_hwc: int
    fifo_channels_chw: int
    fast_fifo_channels_hwc: int
    fast_fifo_channels_chw: int
    stream_nonpadded_final: bool  # the last streaming layer may be unpadded
    stream_passthrough: bool  # pass-through layers may stream
    link_layer: bool  # layers may run in programmed order (next_sequence)

    # --- addresses (absolute, on the AHB/APB map) ---
    apb_base: int
    cnn_base: int  # control registers of quadrant 0
    quadrant_stride: int  # address distance between quadrants
    bias_base: int  # bias memory of quadrant 0
    kernel_base: int  # kernel (mask) memory of quadrant 0
    sram_base: int  # data memory of quadrant 0
    kernel_stride_words: int  # address distance between processors' kernel memories
    fast_fifo_base: int
    bias_div: int  # accumulator bias = 8-bit bias value * 128
    regs: RegisterLayout

    # --- kernel and bias memory layout (izer/tornadocnn.py, izer/kernels.py, kbias.py) ---
    # Kernel memory is built from instances; MAX78002's extended processors add a small
    # instance after the large ones. Depthwise kernels must stay inside one instance there
    # (the weight mask), and calcx4 interleaves kernels over four instances.
    kernel_instance_words_large: int
    kernel_instance_words_small: int
    kernel_weight_mask: bool
    calcx4: bool
    bias_flatten_first: bool  # MAX78000 allocates flattened layers' bias first
    stream_bias: bool  # a streaming first layer can use a bias without a spare byte

    # --- how the register program differs (izer/tornadocnn.py's device switches) ---
    require_reg_clear: bool  # clear the layer registers before programming
    support_pipeline: bool
    require_new_streaming: bool  # the revised streaming equations (seed 000, "Streaming")
    require_fifo_cpl: bool
    emulate_1x1_streaming: bool  # 1x1 kernels next to streaming run on the 3x3 path
    passthrough_avgpool_after_eltwise: bool  # a reset layer before average pooling
    # Cycle estimate (izer/latency.py): multi-pass pooling in a pass-through layer takes
    # 2*passes-1 passes; pooling after a multi-pass element-wise re-reads the kernels.
    two_pass_passthrough: bool
    kernoff_multiwrite: bool

    # --- the microcontroller around the accelerator (firmware projects) ---
    # The SDK linker script's FLASH and SRAM regions (Libraries/CMSIS/Device/Maxim/
    # <part>/Source/GCC/<part>.ld): what a project's text+data and data+bss must fit.
    flash_bytes: int
    sram_bytes: int
    # What every project's firmware takes besides its own code and arrays (the SDK's
    # start-up, drivers and C library; its data, stack and heap), measured on the
    # projects tests/emit/test_firmware_build.py links with the MSDK (emit/footprint.py).
    firmware_code_bytes: int
    firmware_sram_bytes: int
    # Clocks (the vendor tool's IPO_SPEED, APB_SPEED, PLL_SPEED): projects select the
    # internal primary oscillator as system clock; the accelerator runs from the APB
    # clock (IPO / 2) or, where the part has one, from the IPLL.
    ipo_mhz: int
    apb_mhz: int
    pll_mhz: int  # 0: no IPLL
    # Without the pipeline the accelerator must not run faster than this (MHz); the
    # vendor divides the IPLL down to it (MAX_NO_PIPELINE_SPEED).
    no_pipeline_mhz: int
    boards: tuple[str, ...]  # the SDK's board support packages for the part, default first
    # Peripherals a project may name (--timer, --boost). The part's header (Libraries/
    # CMSIS/Device/Maxim/<part>/Include/<part>.h) has MXC_TMR0..5, of which TMR0-TMR3 are
    # the general-purpose 32-bit timers the SDK's software stopwatch (MXC_TMR_SW_Start)
    # runs on (TMR4/TMR5 are low-power timers), and MXC_GPIO0..3 of 32 pins each
    # (MXC_CFG_GPIO_INSTANCES, MXC_CFG_GPIO_PINS_PORT).
    timers: int = 4
    gpio_ports: int = 4
    gpio_pins: int = 32
    # Seed 000, "Fast FIFO": the RISC-V core's fast FIFO feeds processors 0-3 (up to four
    # HWC channels) or 0, 16, 32, 48 (CHW), on both parts.
    fast_fifo_processors_hwc: int = 0x000F
    fast_fifo_processors_chw: int = 0x0001000100010001
    # Run-mode features (the vendor tool's SUPPORT_FIFO_GO, SUPPORT_ONESHOT,
    # REQUIRE_ONESHOT_CLEAR): MAX78002 can start before the first FIFO word and run one
    # layer per continue; its interrupt acknowledge then leaves the enable bit alone.
    support_fifo_go: bool = False
    support_oneshot: bool = False
    oneshot_clear: bool = True
    # Seed 000, "Energy Measurement": the EVKit's power monitor is triggered by LED1/LED2
    # on MAX78000 and by two port pins (P1.6 system, P1.7 CNN; REQUIRE_PMON_GPIO) on
    # MAX78002: (port, pin) of the system and the CNN trigger, None for the LEDs.
    pmon_pins: tuple[tuple[int, int], tuple[int, int]] | None = None

    def __str__(self) -> str:
        return self.name

    @property
    def kernel_memory_bytes(self) -> int:
        """Total kernel memory (432 KiB / 2,340 KiB per the guide)."""
        large = self.quadrants
        small = self.processors - large
        return (large * self.kernel_words_large
                + small * self.kernel_words_small) * self.kernel_bytes_per_word

    @property
    def data_memory_bytes(self) -> int:
        return self.data_instances * self.data_instance_bytes

    @property
    def binary_weights(self) -> bool:
        return -1 in self.weight_bits

    def kernel_words(self, processor: int) -> int:
        """Kernel slots of one processor (the first of each quadrant may have more)."""
        if processor % self.processors_per_quadrant == 0:
            return self.kernel_words_large
        return self.kernel_words_small

    # --- addresses (absolute) ---
    def ctl_addr(self, group: int, reg: int) -> int:
        """A quadrant control register."""
        return self.cnn_base + self.quadrant_stride * group + reg * 4

    def lreg_addr(self, group: int, reg: int, layer: int) -> int:
        """A per-layer register of one quadrant."""
        base = self.cnn_base + self.quadrant_stride * group + self.regs.cnn_offset * 4
        if self.regs.layer_stride is not None:
            if reg <= self.regs.max_lreg:
                return base + reg * 4 + layer * self.regs.layer_stride
            return base + reg * 4 + layer * 4
        return base + reg * 4 * self.max_layers + layer * 4

    def sram_addr(self, offset: int) -> int:
        """A data-memory byte offset of quadrant 0."""
        return self.sram_base + offset

    def fifo_addr(self, reg: int) -> int:
        return self.apb_base + reg * 4

    def fast_fifo_addr(self, reg: int) -> int:
        return self.fast_fifo_base + reg * 4

    def kernel_address(self, processor: int, column: int) -> int:
        """A kernel column (16 bytes per kernel in the address map)."""
        q, p = divmod(processor, self.processors_per_quadrant)
        return (self.kernel_base + q * self.quadrant_stride
                + p * self.kernel_stride_words * 16 + column * 16)

    def bias_address(self, quadrant: int) -> int:
        return self.bias_base + quadrant * self.quadrant_stride

    def quadrant_bits(self, quadrant: int) -> int:
        """The bits of a processor mask that belong to one quadrant."""
        width = self.processors_per_quadrant
        return ((1 << width) - 1) << quadrant * width

    def in_quadrant(self, processor_mask: int, quadrant: int) -> int:
        """One quadrant's part of a processor mask, as a 16-bit mask."""
        width = self.processors_per_quadrant
        return (processor_mask >> quadrant * width) & ((1 << width) - 1)

    def quad_word(self, processor: int) -> int:
        """Word index (from `sram_base`) of the data-memory instance serving `processor`'s
        quad. The vendor combines the two parts with a bitwise or; they never overlap."""
        quad = processor & ~(self.processors_per_memory - 1)
        return ((quad % self.processors_per_quadrant) * self.data_instance_stride_words
                | (quad // self.processors_per_quadrant) * self.quadrant_stride // 4)


_APB = 0x50000000  # the accelerator's window starts here on both parts

MAX78000 = Device(
    name="MAX78000", code=85, aliases=("AI85", "85", "MAX78000"),
    processors=PROCESSORS, quadrants=QUADRANTS, processors_per_quadrant=PROCESSORS_PER_QUADRANT,
    processors_per_memory=PROCESSORS_PER_MEMORY,
    # 16 x 32 KiB data memory (guide); the tool: 2048 words per instance.
    data_instances=16, data_instance_bytes=32 * 1024, data_instance_words=2048,
    data_instance_stride_words=2048,
    # "768 * 64 3x3 Q7 kernels ... 432 KiB".
    kernel_words_small=768, kernel_words_large=768, kernel_bytes_per_word=9,
    bias_instances=4, bias_bytes_per_instance=512,
    max_layers=32,
    max_start_layer=0,
    # The guide: 1024 input/output channels per layer.
    max_channels=1024, channels_per_pass=PROCESSORS, max_passes=16,
    # The guide says rows/columns up to 1023; the tool accepts 1024 (MAX_ROW_COL).
    max_dim=1024,
    conv2d_kernels=((1, 1), (3, 3)), conv1d_kernel_max=9, convtranspose2d_kernels=((3, 3),),
    paddings=(0, 1, 2),
    conv2d_dilation_max=1, conv1d_dilation_max=1023,
    conv1d_stretch_limit=9, conv1d_dilated_kernel_max=3,
    convtranspose2d_stride=(2, 2), convtranspose2d_output_padding=(1,),
    depthwise=False,
    pool_max=16, pool_stride_max=16, pool_dilation_max=1, pool_passes_max=1,
    pool_last_operands_max=2,
    flatten_pixels_max=256, flatten_inputs_max=16384,
    eltwise_operands_min=2, eltwise_operands_max=16,
    eltwise_multipass_emulated=True, eltwise_multipass_conv_bias=True, read_gap=False,
    multipass_padded_conv1d=True,
    weight_bits=(1, 2, 4, 8), output_shift_min=-15, output_shift_max=15,
    output_widths=(8, 32),
    max_stream_layers=8, stream_frame_max=2**21,
    fifo_channels_hwc=16, fifo_channels_chw=4,
    fast_fifo_channels_hwc=4, fast_fifo_channels_chw=1,
    stream_nonpadded_final=False, stream_passthrough=True,
    link_layer=False,
    apb_base=_APB, cnn_base=_APB + 0x100000, quadrant_stride=0x400000,
    bias_base=_APB + 0x108000, kernel_base=_APB + 0x180000,
    sram_base=_APB + 0x400000, kernel_stride_words=1024,
    fast_fifo_base=0x400C0400, bias_div=128,
    regs=RegisterLayout(
        cnn_offset=4, layer_stride=None, nxtlyr=None, rcnt=0, ccnt=1, oned=2, prcnt=3,
        pccnt=4, stride=5, wptr_base=6, wptr_toffs=7, wptr_moffs=8, wptr_choffs=9,
        rptr_base=10, lctl=11, lctl2=20, mcnt=12, mcnt1=None, mcnt2=None, ochan=None,
        tptr=13, ena=14, post=15, stream1=16, stream2=17, fmax=18, max_lreg=20,
        reg_ifrm=612, mlator=1024,
        bist_sram=(("Data SRAM", 1 << 0, 1 << 27 | 1 << 18, 1 << 14),
                   ("Mask SRAM", 1 << 2, 1 << 27 | 1 << 19, 1 << 15),
                   ("Tornado SRAM", 1 << 4, 1 << 27 | 1 << 20, 1 << 16),
                   ("Bias Rfile", 1 << 6, 1 << 27 | 1 << 21, 1 << 17))),
    kernel_instance_words_large=768, kernel_instance_words_small=768,
    kernel_weight_mask=False, calcx4=False, bias_flatten_first=True, stream_bias=False,
    require_reg_clear=False, support_pipeline=False, require_new_streaming=False,
    require_fifo_cpl=True, emulate_1x1_streaming=True,
    passthrough_avgpool_after_eltwise=False,
    two_pass_passthrough=True, kernoff_multiwrite=True,
    flash_bytes=512 * 1024, sram_bytes=128 * 1024,
    firmware_code_bytes=39_200, firmware_sram_bytes=5_200,
    ipo_mhz=100, apb_mhz=50, pll_mhz=0, no_pipeline_mhz=50,
    boards=("EvKit_V1", "FTHR_RevA"),
)

MAX78002 = Device(
    name="MAX78002", code=87, aliases=("AI87", "87", "MAX78002"),
    processors=PROCESSORS, quadrants=QUADRANTS, processors_per_quadrant=PROCESSORS_PER_QUADRANT,
    processors_per_memory=PROCESSORS_PER_MEMORY,
    # 16 x 80 KiB data memory (guide); the tool: 5120 words used of an 8192-word window.
    data_instances=16, data_instance_bytes=80 * 1024, data_instance_words=5120,
    data_instance_stride_words=8192,
    # "processors 0, 16, 32, and 48 ... 5,120 3x3 Q7 kernels, all other ... 4,096".
    kernel_words_small=4096, kernel_words_large=5120, kernel_bytes_per_word=9,
    bias_instances=4, bias_bytes_per_instance=2048,
    max_layers=128,
    max_start_layer=127,
    # The guide says 2048 channels per layer; the tool limits every device to 16 passes of
    # 64 processors (MAX_CHANNELS) and its register field holds 16 passes, so 1024.
    max_channels=1024, channels_per_pass=PROCESSORS, max_passes=16,
    # The guide says 2047; the tool accepts 2048 (golden largeinputh/largeinputw use it).
    max_dim=2048,
    conv2d_kernels=((1, 1), (3, 3)), conv1d_kernel_max=9, convtranspose2d_kernels=((3, 3),),
    paddings=(0, 1, 2),
    # The guide lists Conv2d dilation 1..16; the tool rejects dilation > 1 except for Conv1d.
    conv2d_dilation_max=1, conv1d_dilation_max=2047,
    conv1d_stretch_limit=9, conv1d_dilated_kernel_max=3,
    convtranspose2d_stride=(2, 2), convtranspose2d_output_padding=(1,),
    depthwise=True,
    pool_max=16, pool_stride_max=16, pool_dilation_max=16, pool_passes_max=2**16,
    pool_last_operands_max=2,
    flatten_pixels_max=256, flatten_inputs_max=16384,
    eltwise_operands_min=2, eltwise_operands_max=16,
    eltwise_multipass_emulated=False, eltwise_multipass_conv_bias=False, read_gap=True,
    multipass_padded_conv1d=False,
    weight_bits=(-1, 1, 2, 4, 8), output_shift_min=-15, output_shift_max=15,
    output_widths=(8, 32),
    max_stream_layers=8, stream_frame_max=2**21,
    fifo_channels_hwc=16, fifo_channels_chw=4,
    fast_fifo_channels_hwc=4, fast_fifo_channels_chw=1,
    stream_nonpadded_final=True, stream_passthrough=False,
    link_layer=True,
    apb_base=_APB, cnn_base=_APB + 0x1000000, quadrant_stride=0x1000000,
    bias_base=_APB + 0x1180000, kernel_base=_APB + 0x1400000,
    sram_base=_APB + 0x1800000, kernel_stride_words=8192,
    fast_fifo_base=0x400C0400, bias_div=128,
    regs=RegisterLayout(
        cnn_offset=0x40000, layer_stride=0x100, nxtlyr=0, rcnt=1, ccnt=2, oned=3, prcnt=4,
        pccnt=5, stride=6, wptr_base=7, wptr_toffs=8, wptr_moffs=9, wptr_choffs=10,
        rptr_base=11, lctl=12, lctl2=13, mcnt=None, mcnt1=14, mcnt2=15, ochan=16, tptr=17,
        ena=18, post=19, stream1=0x2000, stream2=0x2008, fmax=0x2010, max_lreg=19,
        reg_ifrm=0x42018, mlator=0x44000, reg_snoop=tuple(range(0x42020, 0x42038)),
        write_ptr_shift=15, max_isval_bits=15, max_dsval2_bits=14, max_fbuf_bits=18,
        pad_cnt_offs=13, pad_ena_offs=15, cnt_diff_offs=16, cnt_inc_offs=4,
        mp_stride_offs=4, xpch_max_offs=12, rd_ahead_offs=17, cprime_max_offs=18,
        rprime_max_offs=22, shift_cnt_offs=26, ctl_pipeline_offs=5,
        bist_zero=1 << 12 | 1 << 11 | 1 << 7,
        bist_zero_both=1 << 12 | 1 << 11 | 1 << 10 | 1 << 7, bist_zero_wait=1 << 25,
        bist_sram=(("Data SRAM", 1 << 12 | 1 << 0, 1 << 18, 1 << 14),
                   ("Mask SRAM", 1 << 13 | 1 << 2, 1 << 19, 1 << 15),
                   ("Tornado SRAM", 1 << 13 | 1 << 12 | 1 << 4, 1 << 20, 1 << 16),
                   ("Bias Rfile", 1 << 12 | 1 << 11 | 1 << 10 | 1 << 6, 1 << 21, 1 << 17))),
    # Kernel memory is built from 1024-word instances, the extension from 256-word ones.
    kernel_instance_words_large=1024, kernel_instance_words_small=256,
    kernel_weight_mask=True, calcx4=True, bias_flatten_first=False, stream_bias=True,
    require_reg_clear=True, support_pipeline=True, require_new_streaming=True,
    require_fifo_cpl=False, emulate_1x1_streaming=True,
    passthrough_avgpool_after_eltwise=True,
    two_pass_passthrough=True, kernoff_multiwrite=False,
    flash_bytes=2560 * 1024, sram_bytes=384 * 1024,
    firmware_code_bytes=42_300, firmware_sram_bytes=5_200,
    ipo_mhz=120, apb_mhz=60, pll_mhz=200, no_pipeline_mhz=50,
    boards=("EvKit_V1",),
    support_fifo_go=True, support_oneshot=True, oneshot_clear=False,
    pmon_pins=((1, 6), (1, 7)),
)

DEVICES: tuple[Device, ...] = (MAX78000, MAX78002)


def device_names() -> tuple[str, ...]:
    """Every name `get_device` accepts, canonical names first."""
    return tuple(d.name for d in DEVICES) + tuple(
        a for d in DEVICES for a in d.aliases if a != d.name)


def get_device(name: str | Device) -> Device:
    """The device called `name` (MAX78000/MAX78002, AI85/AI87, 85/87; any case)."""
    if isinstance(name, Device):
        return name
    key = str(name).strip().upper()
    for device in DEVICES:
        if key in device.aliases:
            return device
    raise Ai8xError("usage.device", str(name), "unknown device",
                    f"use one of: {', '.join(device_names())}", exit_code=EXIT_USAGE)
