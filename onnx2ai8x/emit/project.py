"""The C project writer: register program + memory contents -> SDK project files.

Everything the C does is computed here in Python (register values in `registers`,
memory contents by `onnx2ai8x.emit.memory` / `onnx2ai8x.emit.unload`); the Jinja2
templates in `templates/` only lay the values out. The project is written atomically.
"""
from __future__ import annotations

import array
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..devices import Device, get_device
from ..errors import EXIT_USAGE, Ai8xError
from ..fsutil import write_dir_atomic
from ..map.hw import HwNetwork, derive, ffs, popcount
from ..map.memory_check import FIFO_PROCESSORS_CHW, FIFO_PROCESSORS_HWC
from ..network import Network
from ..options import EmitOptions
from ..placement import Placement
from . import dual_core
from .firmware import DEBUG_WAIT_SECONDS, clock_plan, vscode_files
from .registers import RegisterProgram, WeightMemoryMap, register_program

TEMPLATE_DIR = Path(__file__).parent / "templates"
WIDE_UNROLL = 8  # 32-bit output words copied per unload loop iteration
NARROW_UNROLL = 1  # 8-bit output words unpacked per unload loop iteration

FIFO_STATUS = 1  # FIFO status register index (bit n: FIFO n full)
FIFO_DATA = 2  # first FIFO data register index
FAST_FIFO_STATUS = 1
FAST_FIFO_DATA = 4


@dataclass(frozen=True)
class ProjectData:
    """The memory contents of a project (from kernel/bias allocation and the reference)."""

    kernels: tuple[tuple[int, tuple[int, ...]], ...]  # (address, words) of the stream
    bias: tuple[tuple[int, tuple[int, ...]], ...]  # (address, bytes)
    inputs: tuple[tuple[int, tuple[int, ...]], ...]  # (address, words) memory loads
    expected: tuple[tuple[int, int, tuple[int, ...]], ...]  # (address, mask, words)
    memory: WeightMemoryMap


@dataclass(frozen=True)
class FifoFeed:
    """How main.c feeds the input FIFOs."""

    streams: int
    status: int  # status register address
    data: tuple[int, ...]  # data register address per stream
    full_bit: tuple[int, ...]
    lengths: tuple[int, ...]
    words: tuple[tuple[int, ...], ...]

    @property
    def length(self) -> int:
        return max(self.lengths)


@dataclass(frozen=True)
class UnloadCode:
    """cnn_unload(): the output buffer's name, declarations and statements."""

    buffer: str
    declarations: tuple[str, ...]
    body: tuple[str, ...]
    words: int  # 32-bit words the output buffer needs


def _tuples(items: Sequence) -> tuple:
    """Records `(int, ..., [ints])` as tuples of Python ints (map/tuple run in C: the
    kernel stream alone has tens of thousands of words)."""
    return tuple(tuple(tuple(map(int, x)) if isinstance(x, list | tuple) else int(x)
                       for x in item) for item in items)


def _hex_digits(values: Sequence[int], digits: int) -> np.ndarray | None:
    """The values' hex digits, one row of `digits` ASCII bytes per value, or None when a
    value does not fit (negative or too wide)."""
    code = {2: "B", 4: "H", 8: "I"}.get(digits)
    if code is None:
        return None
    try:
        packed = array.array(code, values)  # range-checked C conversion
    except (OverflowError, TypeError):
        return None
    if packed.itemsize * 2 != digits:
        return None
    if sys.byteorder == "little":
        packed.byteswap()  # most significant digit first
    text = packed.tobytes().hex().encode("ascii")
    return np.frombuffer(text, dtype=np.uint8).reshape(len(values), digits)


def _listed(values: Sequence[int], digits: int = 8, per_line: int = 8) -> str:
    """Lines of a stream macro: every value as `0x<digits>, `, `per_line` to a line,
    each line continued with a backslash. Laid out as one byte array (the kernel
    stream has tens of thousands of words); values that do not fit `digits` are
    formatted one by one, with the same text C's "%0*x" gives."""
    if not values:
        return ""
    hexes = _hex_digits(values, digits)
    if hexes is None:
        items = [f"0x{v:0{digits}x}, " for v in values]
        return "".join("".join(items[i:i + per_line]) + "\\\n"
                       for i in range(0, len(items), per_line))
    size = digits + 4
    cells = np.empty((len(values), size), dtype=np.uint8)
    cells[:, :2] = np.frombuffer(b"0x", dtype=np.uint8)
    cells[:, 2:2 + digits] = hexes
    cells[:, 2 + digits:] = np.frombuffer(b", ", dtype=np.uint8)
    full, rest = divmod(len(values), per_line)
    lines = np.empty((full, per_line * size + 2), dtype=np.uint8)
    lines[:, :-2] = cells[:full * per_line].reshape(full, per_line * size)
    lines[:, -2:] = np.frombuffer(b"\\\n", dtype=np.uint8)
    text = lines.tobytes()
    if rest:
        text += cells[full * per_line:].tobytes() + b"\\\n"
    return text.decode("ascii")


def _initializer(values: Sequence[int], digits: int = 8, per_line: int = 8) -> str:
    """Lines of an array initializer macro: values separated by commas (none after the
    last), each line continued with a backslash. The same text as `_listed` except at
    the very end."""
    text = _listed(values, digits, per_line)
    return text[:-4] + " \\\n" if text else ""


def weight_memory_map(placement: Placement) -> WeightMemoryMap:
    """Per-layer kernel and bias placement (kernel/bias allocation of `onnx2ai8x.map`)."""
    from .memory import weight_memory_map as from_allocation

    return from_allocation(placement.network, placement)


def project_data(network: Network, placement: Placement, sample: np.ndarray,
                 outputs: list[np.ndarray], options: EmitOptions | None = None
                 ) -> ProjectData:
    """Memory contents from the placement's kernel/bias allocation (map/weights.py)
    and the data-section functions.

    `outputs` are the reference outputs of `unload.known_answer_layers(placement)`.
    """
    from ..map.weights import weights_of
    from . import memory as mem_sections
    from . import unload as unload_sections

    options = options or EmitOptions()
    allocation = weights_of(network, placement)
    kernels, bias = allocation.kernels, allocation.bias
    memory = mem_sections.weight_memory_map(network, placement, kernels, bias)
    inputs = () if options.uses_fifo else \
        mem_sections.input_loads(network, placement, sample)
    expected = unload_sections.expected_output(network, placement, outputs,
                                               max_checklines=options.max_checklines)
    # The stream's words are Python ints already: one tuple per run, no per-word step.
    stream = mem_sections.kernel_stream(network, placement, kernels)
    return ProjectData(kernels=tuple((int(addr), tuple(words)) for addr, words in stream),
                       bias=_tuples(mem_sections.bias_loads(network, placement, bias)),
                       inputs=_tuples(inputs), expected=_tuples(expected), memory=memory)


def fifo_feed(hw: HwNetwork, sample: np.ndarray) -> FifoFeed:
    """Words per input FIFO (seed 000, "FIFOs": CHW one channel per FIFO, four bytes
    of a row per word; HWC four channels per word, one FIFO per group of four)."""
    pl = hw.placement.layers[hw.start_layer]
    lay = hw.network.layers[hw.start_layer]
    data = np.asarray(sample, dtype=np.int64).reshape(lay.input_channels, -1)
    chans, pixels = data.shape
    if lay.operands != 1:
        raise Ai8xError("emit.fifo", lay.name, "a FIFO-fed first layer takes one operand",
                        "load element-wise inputs through memory (drop --fifo)")
    pmap = pl.processor_map
    allowed = FIFO_PROCESSORS_CHW if pl.big_data else FIFO_PROCESSORS_HWC
    if not pmap or pmap & ~allowed:
        # the walk below finds each FIFO's processors at a quadrant's start; a map with
        # other processors has no FIFO order (and would never reach one)
        raise Ai8xError(
            "emit.fifo", lay.name,
            f"a FIFO-fed input must sit on the FIFO processors "
            f"({'0, 16, 32, 48 (CHW)' if pl.big_data else '0-3, 16-19, 32-35, 48-51 (HWC)'}"
            f"); the processor map is {pmap:#018x}",
            "place the input channels on the FIFO processors or drop --fifo/--fast-fifo")
    # Which FIFO each channel (CHW) or group of four channels (HWC) goes to, and where,
    # depends only on the processor map, not on the pixel: work it out once, then pack
    # all pixels at once (the per-word loop took ~40 ms on a 3x128x128 input).
    parts: dict[int, list[np.ndarray]] = {}
    if pl.big_data:
        # four consecutive pixels of one channel per little-endian word
        padded = np.zeros((chans, -(-pixels // 4) * 4), dtype=np.uint8)
        padded[:, :pixels] = data & 0xFF
        words = padded.view("<u4").astype(np.int64)  # (chans, words per channel)
        fifo, rest = 0, 0
        for c in range(chans):
            if rest == 0:
                rest, fifo = pmap, 0
            while rest & 1 == 0:
                rest >>= 16
                fifo += 1
            parts.setdefault(fifo, []).append(words[c])
            rest >>= 16
            fifo += 1
    else:
        # One pixel per word: channel k sits on the k-th processor of the map (wrapping
        # into the next pass), processor p is fed by FIFO p // 16 in byte lane p % 16
        # (seed 000, "FIFOs": FIFO q writes processors 16q .. 16q + 3). The vendor tool
        # steps four channels per FIFO instead, which drops channels when a quadrant
        # holds fewer than four (processors 0, 16, 32: only channel 0 reached FIFO 0).
        procs = [q for q in range(64) if pmap >> q & 1]
        rows: dict[tuple[int, int], np.ndarray] = {}
        for c in range(chans):
            q = procs[c % len(procs)]
            key = (q // 16, c // len(procs))  # (FIFO, pass)
            val = rows.setdefault(key, np.zeros(pixels, dtype=np.int64))
            val |= (data[c] & 0xFF) << (q % 16) * 8
        for fifo, _ in sorted(rows):
            parts.setdefault(fifo, [])
        for (fifo, _), val in sorted(rows.items()):
            parts[fifo].append(val)
    # a FIFO fed by several channels (groups) takes them in turn, word position first
    streams = {f: np.stack(rows, axis=1).reshape(-1).tolist() for f, rows in parts.items()}
    order = sorted(streams)
    dev = hw.dev
    if hw.options.fast_fifo:
        status = dev.fast_fifo_addr(FAST_FIFO_STATUS)
        data_regs = tuple(dev.fast_fifo_addr(FAST_FIFO_DATA) for _ in order)
        full = tuple(2 for _ in order)
    else:
        status = dev.fifo_addr(FIFO_STATUS)
        data_regs = tuple(dev.fifo_addr(FIFO_DATA + f) for f in order)
        full = tuple(1 << f for f in order)
    words = tuple(tuple(streams[f]) for f in order)
    return FifoFeed(streams=len(order), status=status, data=data_regs, full_bit=full,
                    lengths=tuple(len(w) for w in words), words=words)


def _output_layers(hw: HwNetwork) -> list[int]:
    marked = [ll for ll, p in enumerate(hw.placement.layers) if p.output_layer]
    return marked or [hw.placement.final_layer]


def _output_words(hw: HwNetwork, ll: int):
    """Walk output layer `ll` four processors at a time, as the output is laid out (seed
    000, "Data memory": a group of four processors shares a word, channels beyond one
    pass wrap around to the first processor with the pass number `expand`). Yields
    `(first channel, expand, first processor of the group, the group's map in bits 0-3)`.
    """
    dev = hw.dev
    h = hw.layers[ll]
    omap = hw.placement.layers[ll].output_processor_map
    start = ffs(omap) & ~(dev.processors_per_memory - 1)
    map_init = omap >> start
    c = 0
    poffs, layer_map = start, map_init
    while c < hw.network.layers[ll].output_channels:
        if c % h.out_expand_thresh == 0:
            poffs, layer_map = start, map_init
        quad = poffs & ~(dev.processors_per_memory - 1)
        yield c, c // h.out_expand_thresh, quad, layer_map & 0x0F
        poffs += 4
        c += popcount(layer_map & 0x0F)
        layer_map >>= 4


def unload_code(hw: HwNetwork) -> UnloadCode:
    """cnn_unload(): read the output layers' data memory into the caller's buffer.

    Reads follow the output layout (seed 000, "Data memory": four channels per 32-bit
    word in HWC order, each group of four output processors in its own memory instance,
    `out_offset` and `write_gap` applied); 8-bit outputs are unpacked channel-major.
    """
    dev = hw.dev
    outs = _output_layers(hw)
    widths = {hw.network.layers[ll].output_width for ll in outs}
    o_width = 32 if 8 not in widths else 8
    body: list[str] = []
    need_i = need_offs = False
    out_addr = 0
    written = 0
    first = True
    # The data-memory word after the last one read, and the output word after the last
    # one written, as the vendor tracks them across layers: an mlator channel starts
    # with a fresh address set-up only where it does not continue from there.
    cursor: list[int | None] = [None, None]
    mlator_layers: list[int] = []
    for ll in outs:
        lay = hw.network.layers[ll]
        pl = hw.placement.layers[ll]
        h = hw.layers[ll]
        chans, rows, cols = lay.output_channels, lay.output_dim[0], lay.output_dim[1]
        pixels = rows * cols
        if o_width != 32 and pixels != 1:
            need_offs = True
        out_size = lay.output_width // 8
        width = h.out_expand * out_size
        # the mlator fills whole output words: the layer must start on one
        if hw.options.mlator and _mlator_fits(hw, ll) and written % 4 == 0:
            mlator_layers.append(ll)
            body += _mlator_unload(hw, ll, written, cursor)
            written += chans * pixels
            first = False
            continue
        emit: list = []
        for _, expand, proc, group_map in _output_words(hw, ll):
            for doffs in range(pixels):
                this_map = group_map
                offs = pl.out_offset + (dev.quad_word(proc)
                                        + doffs * width + expand * out_size) \
                    * (pl.write_gap + 1) * 4
                for shift in range(4):
                    if this_map & 1:
                        if o_width == 32:
                            emit.append(offs)
                            offs += 4
                        elif out_size == 4:
                            emit.extend((offs + 4 * shift, k) for k in range(4))
                        else:
                            emit.append((offs, shift))
                    this_map >>= 1
        if o_width == 32:
            idx = 0
            while idx < len(emit):
                delta = emit[idx + 1] - emit[idx] if idx + 1 < len(emit) else 4
                run = 0
                # Runs are measured from the list's start, as the vendor tool does; the
                # reads are the same, only the loop split differs.
                while idx + run + 1 < len(emit) and emit[run + 1] - emit[run] == delta:
                    run += 1
                addr = dev.sram_addr(emit[idx])
                if out_addr == 0 or out_addr != addr:
                    body.append(f"addr = (volatile uint32_t *) 0x{addr:08x};")
                    out_addr = addr
                remaining = run + 1
                while remaining > 0:
                    loops = max(1, remaining // WIDE_UNROLL)
                    pad = "  " if loops > 1 else ""
                    if loops > 1:
                        need_i = True
                        body.append(f"for (i = 0; i < {loops}; i++) {{")
                    for _ in range(min(remaining, WIDE_UNROLL)):
                        if delta == 4:
                            body.append(f"{pad}*out_buf++ = *addr++;")
                        else:
                            body.append(f"{pad}*out_buf++ = *addr;")
                            body.append(f"{pad}addr {'+' if delta >= 0 else '-'}= "
                                        f"0x{abs(delta) // 4:04x};")
                    if loops > 1:
                        body.append("}")
                    remaining -= loops * WIDE_UNROLL
                    out_addr += loops * WIDE_UNROLL
                idx += run + 1
        else:
            idx = 0
            short = pixels == 1
            if not short:
                body.append("offs = 0x0000;")
            if not first:
                body.append(f"out_buf = ((uint8_t *) out_buf32) + 0x{written:04x};")
            while idx < len(emit):
                read = emit[idx][0]
                cursor[0] = read  # the vendor's shared read bookkeeping (see above)
                shifts = []
                count = 0
                while idx + count < len(emit) and emit[idx + count][0] == read:
                    shifts.append(emit[idx + count][1])
                    count += 1
                delta = emit[idx + count][0] - emit[idx][0] if idx + count < len(emit) else 4
                run = 0
                while idx + count * (run + 1) < len(emit) \
                        and emit[idx + count * (run + 1)][0] - emit[idx + count * run][0] \
                        == delta:
                    run += 1
                addr = dev.sram_addr(read)
                if out_addr == 0 or out_addr != addr:
                    body.append(f"addr = (volatile uint32_t *) 0x{addr:08x};")
                    out_addr = addr
                remaining = run + 1
                while remaining > 0:
                    loops = max(1, remaining // NARROW_UNROLL)
                    pad = "  " if loops > 1 else ""
                    if loops > 1:
                        need_i = True
                        body.append(f"for (i = 0; i < {loops}; i++) {{")
                    for _ in range(min(remaining, NARROW_UNROLL)):
                        if delta == 4:
                            body.append(f"{pad}val = *addr++;")
                        else:
                            body.append(f"{pad}val = *addr;")
                            body.append(f"{pad}addr {'+' if delta >= 0 else '-'}= "
                                        f"0x{abs(delta) // 4:04x};")
                        for shift in shifts:
                            src = "val" if shift == 0 else f"(val >> {shift * 8})"
                            if short:
                                body.append(f"{pad}*out_buf++ = {src} & 0xff;")
                            else:
                                at = "offs" if shift == 0 else f"offs+0x{pixels * shift:02x}"
                                body.append(f"{pad}out_buf[{at}] = {src} & 0xff;")
                        if not short:
                            body.append(f"{pad}offs++;")
                    if loops > 1:
                        body.append("}")
                    remaining -= loops * NARROW_UNROLL
                    out_addr += 4 * loops * NARROW_UNROLL
                idx += (run + 1) * count
                if not short and idx < len(emit) and count > 1:
                    body.append(f"offs += 0x{pixels * (count - 1):04x};")
        written += chans * pixels * lay.output_width // 8
        first = False
    decl = []
    plain = len(mlator_layers) < len(outs)
    if o_width != 32 and plain:
        decl += ["uint8_t *out_buf = (uint8_t *) out_buf32;", "uint32_t val;"]
    if o_width == 32 or plain:
        decl.append("volatile uint32_t *addr;")
    if mlator_layers:
        decl.append("volatile uint32_t *mlat, *ctrl;")
    if need_i or mlator_layers:
        decl.append("int i;")
    if need_offs:
        decl.append("uint32_t offs;")
    return UnloadCode(buffer="out_buf32" if o_width != 32 else "out_buf",
                      declarations=tuple(decl), body=tuple(body), words=(written + 3) // 4)


MLATOR_UNROLL = 8  # mlator reads per unload loop iteration (the vendor's default)
# Quadrant control register bits (seed 000, "CNN control register"): bit 3 is the
# clock enable the unload leaves on, bit 16 loads the mlator's read pointer and turns it
# on, bits 17-18 pick the byte of each word it gathers. READY_SEL (bits 1-2) is 0.
CTL_CLOCK = 1 << 3
CTL_MLATOR = 1 << 16
CTL_MLATOR_BYTE = 17


def _mlator_fits(hw: HwNetwork, ll: int) -> bool:
    """Whether --mlator applies to output layer `ll` (seed 000, "--mlator": 8-bit output;
    it gathers four pixels of one channel per read, so a channel must have at least four
    pixels and, with several channels, a multiple of four)."""
    lay = hw.network.layers[ll]
    pixels = lay.output_dim[0] * lay.output_dim[1]
    if lay.output_width != 8 or pixels < 4:
        return False
    return lay.output_channels == 1 or pixels % 4 == 0


def _mlator_unload(hw: HwNetwork, ll: int, written: int,
                   cursor: list[int | None]) -> list[str]:
    """cnn_unload() statements that read output layer `ll` through the mlator.

    The mlator (seed 000, "--mlator") rearranges HWC data on read: set to byte b of a
    memory instance, each read of its port returns that byte of four consecutive words,
    i.e. four pixels of one channel, so the channel-major buffer is filled a word at a
    time. Per channel: point the quadrant's layer-0 write pointer at the first pixel and
    its pointer increment at the words between pixels, enable the mlator for the byte,
    prime it with one read, read, disable. `written` is the byte position of the layer in
    the buffer; `cursor` the shared [read, write] bookkeeping of `unload_code`.
    """
    dev = hw.dev
    lay = hw.network.layers[ll]
    pl = hw.placement.layers[ll]
    pixels = lay.output_dim[0] * lay.output_dim[1]
    width = hw.layers[ll].out_expand  # 8-bit data: one byte per pass
    off = f"0x{CTL_CLOCK:08x}"
    lines: list[str] = []
    pending = 0

    def flush() -> None:
        nonlocal pending
        n = pending
        if n >= 2 * MLATOR_UNROLL:
            lines.append(f"for (i = 0; i < {n // MLATOR_UNROLL}; i++) {{")
            lines.extend(["  out_buf32[offs++] = *mlat;"] * MLATOR_UNROLL)
            lines.append("}")
            n %= MLATOR_UNROLL
        lines.extend(["out_buf32[offs++] = *mlat;"] * n)
        pending = 0

    port = None
    for c, expand, proc, group_map in _output_words(hw, ll):
        group = proc // dev.processors_per_quadrant
        mlat = dev.ctl_addr(group, dev.regs.mlator)
        if mlat != port:
            port = mlat
            ctrl = dev.ctl_addr(group, dev.regs.reg_ctl)
            lines.append(f"ctrl = (volatile uint32_t *) 0x{ctrl:08x};")
            lines.append(f"mlat = (volatile uint32_t *) 0x{mlat:08x};")
        this_map, this_c = group_map, c
        for byte in range(4):
            if this_map & 1:
                lines.append(f"// Channel {this_c}")
                for doffs in range(0, pixels, 4):
                    # (the vendor scales the instance base by the write gap as well)
                    source = pl.out_offset + (dev.quad_word(proc)
                                              + (doffs >> 2) * width + expand) \
                        * (pl.write_gap + 1) * 4
                    # Channel-major output: the vendor's formula, row * rows + col, equals
                    # this for the square and 1-D outputs it is used with.
                    target = this_c * pixels + doffs + written
                    if target != cursor[1]:
                        lines.append(f"offs = 0x{target >> 2:04x};")
                    if source != cursor[0]:
                        flush()
                        if doffs:
                            lines.append(f"*ctrl = {off}; // Disable mlator")
                        lines.append(f"*((volatile uint32_t *) "
                                     f"0x{dev.lreg_addr(group, dev.regs.wptr_base, 0):08x}) = "
                                     f"0x{doffs:08x}; // Set SRAM address")
                        lines.append(f"*((volatile uint32_t *) "
                                     f"0x{dev.lreg_addr(group, dev.regs.lctl2, 0):08x}) = "
                                     f"0x{expand:08x}; // Set pointer increment")
                        val = CTL_CLOCK | CTL_MLATOR | byte << CTL_MLATOR_BYTE
                        lines.append(f"*ctrl = 0x{val:08x}; // Enable mlator, byte {byte}")
                        lines.append('asm volatile ("" : "=m" (*mlat) : "r" (*mlat)); '
                                     "// Prime")
                    pending += 1
                    cursor[0], cursor[1] = source + 4, target + 4
                flush()
                lines.append(f"*ctrl = {off}; // Disable mlator")
            this_c += 1
            this_map >>= 1
    return lines


def _template_cache():
    """Jinja2's compiled-template cache in the user's cache directory, when writable.

    Compiling the templates is a fifth of a small conversion's time; like Python's own
    `.pyc` files the cache only saves work, it never changes what is rendered. Set
    ONNX2AI8X_NO_CACHE=1 to switch it off.
    """
    import jinja2

    if os.environ.get("ONNX2AI8X_NO_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "onnx2ai8x", "templates")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(path) if os.access(path, os.W_OK) else None


def _environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined, autoescape=False,
                              bytecode_cache=_template_cache())


def _boost(value: str | None, name: str) -> tuple[int, int] | None:
    if value is None:
        return None
    try:
        port, pin = (int(x) for x in value.split("."))
    except ValueError:
        raise Ai8xError("usage.boost", name, f"--boost `{value}` is not PORT.PIN",
                        "use e.g. --boost 2.5 for port 2 pin 5") from None
    return port, pin


def project_board(device: Device, board: str | None) -> str:
    """The board the project is set up for: the SDK's default board unless asked."""
    if board is None:
        return device.boards[0]
    for known in device.boards:
        if board.lower() == known.lower():
            return known
    raise Ai8xError("usage.board", board, f"the MSDK has no {device.name} board `{board}`",
                    f"use one of: {', '.join(device.boards)}", exit_code=EXIT_USAGE)


def _input_description(net: Network, chw: bool) -> str:
    """The input as the README names it, e.g. `1x28x28 (CHW)` or `3x128x128 (HWC)`."""
    shape = "x".join(str(d) for d in net.input_shape)
    return f"{shape} ({'CHW' if chw else 'HWC'})"


def render_project(placement: Placement, program: RegisterProgram, data: ProjectData,
                   options: EmitOptions, sample: np.ndarray | None = None,
                   name: str | None = None) -> dict[str, str]:
    """File name -> text of the C project (pure)."""
    hw = derive(placement, options)
    dual_core.check_fast_fifo(hw)
    net = placement.network
    name = name or net.name
    device = get_device(placement.device)
    board = project_board(device, options.board)
    if options.uses_fifo:
        if sample is None:
            raise Ai8xError("emit.fifo", name, "a FIFO project needs the sample input",
                            "pass the sample to write_project")
        fifo = fifo_feed(hw, sample)
        input_words = fifo.words
    else:
        fifo = None
        input_words = tuple(words for _, words in data.inputs)
    unload = unload_code(hw)
    final = placement.final_layer
    final_layer = net.layers[final]
    group_mask = sum(1 << g for g in hw.groups_used)
    pipeline = hw.pipeline
    ctx = dict(
        name=name, device=device.name, layer_count=hw.count,
        input_format="CHW" if placement.layers[hw.start_layer].big_data else "HWC",
        program=program, kernels=data.kernels, bias=data.bias, inputs=data.inputs,
        input_words=input_words, expected=data.expected, fifo=fifo, unload=unload,
        # The data sections, formatted here once (templates only place the blocks).
        kernel_runs=tuple((addr, len(words), _listed(words)) for addr, words in data.kernels),
        bias_blocks=tuple((addr, len(values), _initializer(values, 2, 16))
                          for addr, values in data.bias),
        input_blocks=tuple(_initializer(words) for words in input_words),
        expected_runs=tuple((addr, mask, len(words), _listed(words))
                            for addr, mask, words in data.expected),
        unload_words=max(1, unload.words), num_outputs=final_layer.output_channels,
        timer=options.timer, mexpress=options.mexpress,
        mask_high=~(device.kernel_stride_words - 1) & 0xFFFFFFFF,
        mask_low=device.kernel_stride_words - 1,
        group_mask=group_mask, group_unmask=~group_mask & 0xF,
        has_pll=bool(device.pll_mhz), clock=clock_plan(device, pipeline),
        debug_wait=DEBUG_WAIT_SECONDS, board=board, boards=device.boards,
        input_desc=_input_description(net, placement.layers[hw.start_layer].big_data),
        softmax=options.softmax, softmax_wide=final_layer.output_width == 32,
        softmax_shift=8 - abs(final_layer.quantization) if final_layer.quantization else 0,
        kat=not options.no_kat, unload_flag=not options.no_unload,
        # The vendor tool writes cnn_unload() only when it is used (--softmax needs it).
        unload_function=options.softmax or not options.no_unload,
        boost=_boost(options.boost, name), riscv=options.riscv, fast_fifo=options.fast_fifo,
    )
    env = _environment()
    files = {
        "cnn.h": "cnn.h.j2", "cnn.c": "cnn.c.j2", "weights.h": "weights.h.j2",
        "main.c": "main.c.j2", "sampledata.h": "sampledata.h.j2",
        "sampleoutput.h": "sampleoutput.h.j2", "Makefile": "Makefile.j2",
        "project.mk": "project.mk.j2", "README.md": "README.md.j2",
    }
    if options.softmax:
        files["softmax.c"] = "softmax.c.j2"
        files["softmax.h"] = "softmax.h.j2"
    files = dual_core.project_templates(options, files)
    out = {}
    for target, template in files.items():
        tmpl = env.get_template(template)
        out[target] = tmpl.render(**ctx)
    out.update(vscode_files(device, board))
    return out


def write_project(network: Network, placement: Placement, out_dir: Path | str, *,
                  options: EmitOptions, sample: np.ndarray, outputs: list[np.ndarray],
                  overwrite: bool = False, extra_files: Mapping[str, bytes] | None = None,
                  data: ProjectData | None = None) -> None:
    """Write the C project for a placed network to `out_dir` (atomically).

    `data` overrides the memory contents (tests); normally they come from the kernel/bias
    allocation and the data-section functions.
    """
    if placement.network is not network:
        # keeps the kernel/bias allocation, which was made for `network`
        placement = dataclasses.replace(placement, network=network)
    if data is None:
        data = project_data(network, placement, sample, outputs, options)
    program = register_program(placement, data.memory, options)
    files = render_project(placement, program, data, options, sample)

    def fill(tmp: Path) -> None:
        for fname, text in sorted(files.items()):
            (tmp / fname).parent.mkdir(exist_ok=True)
            (tmp / fname).write_text(text, encoding="utf-8")
        for fname, blob in sorted((extra_files or {}).items()):
            (tmp / fname).write_bytes(blob)

    write_dir_atomic(Path(out_dir), fill, overwrite)
