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
    multipass_padded_conv1d: bool  # Conv1d with padding and more than 64 input channels

    # --- pooling ---
    pool_max: int  # kernel 1..16 per dimension
    pool_stride_max: int
    pool_dilation_max: int
    pool_passes_max: int  # passes a pooling-only (pass-through) layer may take
    pool_last_operands_max: int  # element-wise operands when pooling after the operation

    # --- flatten / linear ("Fully Connected (Linear) Layers") ---
    flatten_pixels_max: int  # H*W
    flatten_inputs_max: int  # C*H*W
    linear_neurons_max: int

    # --- element-wise ---
    eltwise_operands_min: int
    eltwise_operands_max: int
    eltwise_multipass_emulated: bool  # MAX78000: >2 passes x >2 operands needs pass-through
    eltwise_multipass_conv_bias: bool  # MAX78002 cannot add bias to such layers

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
    max_start_layer: int

    # --- addresses (absolute, on the AHB/APB map) ---
    apb_base: int
    cnn_base: int  # control registers of quadrant 0
    quadrant_stride: int  # address distance between quadrants
    bias_base: int  # bias memory of quadrant 0
    tram_base: int
    kernel_base: int  # kernel (mask) memory of quadrant 0
    sram_base: int  # data memory of quadrant 0
    tram_words: int
    kernel_stride_words: int  # address distance between processors' kernel memories
    fast_fifo_base: int
    bias_div: int  # accumulator bias = 8-bit bias value * 128

    # --- the microcontroller around the accelerator (firmware projects) ---
    # The SDK linker script's FLASH and SRAM regions (Libraries/CMSIS/Device/Maxim/
    # <part>/Source/GCC/<part>.ld): what a project's text+data and data+bss must fit.
    flash_bytes: int
    sram_bytes: int
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


_APB = 0x50000000  # the accelerator's window starts here on both parts

MAX78000 = Device(
    name="MAX78000", code=85, aliases=("AI85", "85", "MAX78000"),
    processors=64, quadrants=4, processors_per_quadrant=16, processors_per_memory=4,
    # 16 x 32 KiB data memory (guide); the tool: 2048 words per instance.
    data_instances=16, data_instance_bytes=32 * 1024, data_instance_words=2048,
    data_instance_stride_words=2048,
    # "768 * 64 3x3 Q7 kernels ... 432 KiB".
    kernel_words_small=768, kernel_words_large=768, kernel_bytes_per_word=9,
    bias_instances=4, bias_bytes_per_instance=512,
    max_layers=32,
    # The guide: 1024 input/output channels per layer.
    max_channels=1024, channels_per_pass=64, max_passes=16,
    # The guide says rows/columns up to 1023; the tool accepts 1024 (MAX_ROW_COL).
    max_dim=1024,
    conv2d_kernels=((1, 1), (3, 3)), conv1d_kernel_max=9, convtranspose2d_kernels=((3, 3),),
    paddings=(0, 1, 2),
    conv2d_dilation_max=1, conv1d_dilation_max=1023,
    conv1d_stretch_limit=9, conv1d_dilated_kernel_max=3,
    convtranspose2d_stride=(2, 2), convtranspose2d_output_padding=(1,),
    depthwise=False, multipass_padded_conv1d=True,
    pool_max=16, pool_stride_max=16, pool_dilation_max=1, pool_passes_max=1,
    pool_last_operands_max=2,
    flatten_pixels_max=256, flatten_inputs_max=16384, linear_neurons_max=1024,
    eltwise_operands_min=2, eltwise_operands_max=16,
    eltwise_multipass_emulated=True, eltwise_multipass_conv_bias=True,
    weight_bits=(1, 2, 4, 8), output_shift_min=-15, output_shift_max=15,
    output_widths=(8, 32),
    max_stream_layers=8, stream_frame_max=2**21,
    fifo_channels_hwc=16, fifo_channels_chw=4,
    fast_fifo_channels_hwc=4, fast_fifo_channels_chw=1,
    stream_nonpadded_final=False, stream_passthrough=True,
    link_layer=False, max_start_layer=0,
    apb_base=_APB, cnn_base=_APB + 0x100000, quadrant_stride=0x400000,
    bias_base=_APB + 0x108000, tram_base=_APB + 0x110000, kernel_base=_APB + 0x180000,
    sram_base=_APB + 0x400000, tram_words=3072, kernel_stride_words=1024,
    fast_fifo_base=0x400C0400, bias_div=128,
    flash_bytes=512 * 1024, sram_bytes=128 * 1024,
    ipo_mhz=100, apb_mhz=50, pll_mhz=0, no_pipeline_mhz=50,
    boards=("EvKit_V1", "FTHR_RevA"),
)

MAX78002 = Device(
    name="MAX78002", code=87, aliases=("AI87", "87", "MAX78002"),
    processors=64, quadrants=4, processors_per_quadrant=16, processors_per_memory=4,
    # 16 x 80 KiB data memory (guide); the tool: 5120 words used of an 8192-word window.
    data_instances=16, data_instance_bytes=80 * 1024, data_instance_words=5120,
    data_instance_stride_words=8192,
    # "processors 0, 16, 32, and 48 ... 5,120 3x3 Q7 kernels, all other ... 4,096".
    kernel_words_small=4096, kernel_words_large=5120, kernel_bytes_per_word=9,
    bias_instances=4, bias_bytes_per_instance=2048,
    max_layers=128,
    # The guide says 2048 channels per layer; the tool limits every device to 16 passes of
    # 64 processors (MAX_CHANNELS) and its register field holds 16 passes, so 1024.
    max_channels=1024, channels_per_pass=64, max_passes=16,
    # The guide says 2047; the tool accepts 2048 (golden largeinputh/largeinputw use it).
    max_dim=2048,
    conv2d_kernels=((1, 1), (3, 3)), conv1d_kernel_max=9, convtranspose2d_kernels=((3, 3),),
    paddings=(0, 1, 2),
    # The guide lists Conv2d dilation 1..16; the tool rejects dilation > 1 except for Conv1d.
    conv2d_dilation_max=1, conv1d_dilation_max=2047,
    conv1d_stretch_limit=9, conv1d_dilated_kernel_max=3,
    convtranspose2d_stride=(2, 2), convtranspose2d_output_padding=(1,),
    depthwise=True, multipass_padded_conv1d=False,
    pool_max=16, pool_stride_max=16, pool_dilation_max=16, pool_passes_max=2**16,
    pool_last_operands_max=2,
    flatten_pixels_max=256, flatten_inputs_max=16384, linear_neurons_max=1024,
    eltwise_operands_min=2, eltwise_operands_max=16,
    eltwise_multipass_emulated=False, eltwise_multipass_conv_bias=False,
    weight_bits=(-1, 1, 2, 4, 8), output_shift_min=-15, output_shift_max=15,
    output_widths=(8, 32),
    max_stream_layers=8, stream_frame_max=2**21,
    fifo_channels_hwc=16, fifo_channels_chw=4,
    fast_fifo_channels_hwc=4, fast_fifo_channels_chw=1,
    stream_nonpadded_final=True, stream_passthrough=False,
    link_layer=True, max_start_layer=127,
    apb_base=_APB, cnn_base=_APB + 0x1000000, quadrant_stride=0x1000000,
    bias_base=_APB + 0x1180000, tram_base=_APB + 0x1200000, kernel_base=_APB + 0x1400000,
    sram_base=_APB + 0x1800000, tram_words=12288, kernel_stride_words=8192,
    fast_fifo_base=0x400C0400, bias_div=128,
    flash_bytes=2560 * 1024, sram_bytes=384 * 1024,
    ipo_mhz=120, apb_mhz=60, pll_mhz=200, no_pipeline_mhz=50,
    boards=("EvKit_V1",),
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
