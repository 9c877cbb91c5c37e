"""The C project writer: register program + memory contents -> SDK project files.

Everything the C does is computed here in Python (register values in `registers`,
memory contents by `onnx2ai8x.emit.memory` / `onnx2ai8x.emit.unload`); the Jinja2
templates in `templates/` only lay the values out. The project is written atomically.
"""
from __future__ import annotations

import array
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..devices import Device
from ..errors import EXIT_USAGE, Ai8xError
from ..fsutil import write_dir_atomic
from ..map.hw import HwView
from ..map.kernels import fifo_input_map
from ..map.lowered import HwNetwork
from ..map.memory_check import FIFO_PROCESSORS_CHW, FIFO_PROCESSORS_HWC
from ..network import Network
from ..options import EmitOptions, check_device_options
from . import dual_core
from .firmware import DEBUG_WAIT_SECONDS, options_clock_plan, power_plan, vscode_files
from .registers import RegisterProgram, WeightMemoryMap, register_program
from .unload import Unload, plan_unload

TEMPLATE_DIR = Path(__file__).parent / "templates"

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
class PhaseWords:
    """The 32-bit words each phase function of a written project moves, taken from the
    values its templates lay out (onnx2ai8x.phases turns them into time): the first run
    of each function main() calls, as a measurement loop repeats the same work."""

    weights: int  # cnn_load_weights: the kernel stream's words, an express byte store a run
    bias: int  # cnn_load_bias: one 32-bit store per bias byte (memcpy_8to32)
    configure: int  # cnn_configure: its register stores
    input: int  # load_input: the words it copies into data memory or pushes into FIFOs
    fifo: bool  # load_input pushes into the input FIFOs
    unload: int  # cnn_unload: the words it reads (0 when main() does not call it)
    mlator: bool  # cnn_unload reads (some of) the output through the mlator


STORES = ("=", "|=", "&=")  # a register write's forms that store (not wait or check)


def _phase_words(data: ProjectData, program: RegisterProgram, fifo: FifoFeed | None,
                 unload: Unload, mexpress: bool) -> PhaseWords:
    express = 1 if mexpress else 0
    return PhaseWords(
        weights=sum(len(words) + express for _, words in data.kernels),
        bias=sum(len(values) for _, values in data.bias),
        configure=sum(1 for w in program.cnn_configure if w.op in STORES),
        input=sum(fifo.lengths) if fifo is not None else sum(len(w) for _, w in data.inputs),
        fifo=fifo is not None,
        # main() reads the output through cnn_unload (softmax_layer calls it too) whenever
        # the function is written
        unload=unload.reads if unload.function else 0,
        mlator=unload.function and unload.uses_mlator)


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


def project_data(hw: HwNetwork, sample: np.ndarray, outputs: list[np.ndarray],
                 options: EmitOptions | None = None) -> ProjectData:
    """Memory contents from the lowered network's kernel/bias allocation
    (map/weights.py) and the data-section functions.

    `outputs` are the reference outputs of `unload.known_answer_layers(placement)`.
    """
    from . import memory as mem_sections
    from . import unload as unload_sections

    options = options or EmitOptions()
    choices = hw.choices
    memory = WeightMemoryMap.of(hw.weights)
    inputs = () if choices.fifo else mem_sections.input_loads(hw, sample)
    expected = unload_sections.expected_output(hw.placement, outputs,
                                               max_checklines=options.max_checklines)
    # The stream's words are Python ints already: one tuple per run, no per-word step.
    stream = mem_sections.kernel_stream(hw, mexpress=choices.mexpress,
                                        skip_zero=choices.zero_sram)
    return ProjectData(kernels=tuple((int(addr), tuple(words)) for addr, words in stream),
                       bias=_tuples(mem_sections.bias_loads(hw)),
                       inputs=_tuples(inputs), expected=_tuples(expected), memory=memory)


def fifo_feed(hw: HwView, sample: np.ndarray) -> FifoFeed:
    """Words per input FIFO (seed 000, "FIFOs": CHW one channel per FIFO, four bytes
    of a row per word; HWC four channels per word, one FIFO per group of four)."""
    pl = hw.placement.layers[hw.start_layer]
    lay = hw.network.layers[hw.start_layer]
    data = np.asarray(sample, dtype=np.int64).reshape(lay.input_channels, -1)
    chans, pixels = data.shape
    if lay.operands != 1:
        raise Ai8xError("emit.fifo", lay.name, "a FIFO-fed first layer takes one operand",
                        "load element-wise inputs through memory (drop --fifo)")
    pmap = fifo_input_map(hw.placement)
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
    if hw.choices.fast_fifo:
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


def unload_text(unload: Unload) -> str:
    """`cnn_unload()` as C (templates/unload.c.j2; cnn.c includes the same text)."""
    return _environment().get_template("unload.c.j2").render(unload=unload)


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


def render_project(lowered: HwNetwork, program: RegisterProgram, data: ProjectData,
                   options: EmitOptions, sample: np.ndarray | None = None,
                   name: str | None = None, stem: str | None = None,
                   cpu_tail: tuple[str, ...] = (), source: str | None = None
                   ) -> dict[str, str]:
    """File name -> text of the C project (pure); `stem` names the side files the
    README lists (the model file's stem; default: the network's name)."""
    return _rendered(lowered, program, data, options, sample, name, stem,
                     cpu_tail, source)[0]


def _rendered(lowered: HwNetwork, program: RegisterProgram, data: ProjectData,
              options: EmitOptions, sample: np.ndarray | None, name: str | None,
              stem: str | None, cpu_tail: tuple[str, ...] = (),
              source: str | None = None) -> tuple[dict[str, str], PhaseWords]:
    """render_project's files, and the words its phase functions move."""
    placement, hw, choices = lowered.placement, lowered.view, lowered.choices
    check_device_options(options, placement.device)
    dual_core.check_fast_fifo(hw, options)
    net = placement.network
    name = name or net.name
    device = placement.device
    board = project_board(device, options.board)
    if choices.fifo:
        if sample is None:
            raise Ai8xError("emit.fifo", name, "a FIFO project needs the sample input",
                            "pass the sample to write_project")
        fifo = fifo_feed(hw, sample)
        input_words = fifo.words
    else:
        fifo = None
        input_words = tuple(words for _, words in data.inputs)
    unload = plan_unload(placement, options)
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
        timer=options.timer, mexpress=choices.mexpress,
        mask_high=~(device.kernel_stride_words - 1) & 0xFFFFFFFF,
        mask_low=device.kernel_stride_words - 1,
        group_mask=group_mask, group_unmask=~group_mask & 0xF,
        has_pll=bool(device.pll_mhz), clock=options_clock_plan(device, pipeline, options),
        power=power_plan(device, options, final), fifo_wait=options.fifo_wait,
        debug_wait=DEBUG_WAIT_SECONDS, board=board, boards=device.boards,
        input_desc=_input_description(net, placement.layers[hw.start_layer].big_data),
        softmax=options.softmax, softmax_wide=final_layer.output_width == 32,
        softmax_shift=8 - abs(final_layer.quantization) if final_layer.quantization else 0,
        kat=not options.no_kat, unload_flag=not options.no_unload,
        boost=_boost(options.boost, name), riscv=options.riscv, fast_fifo=choices.fast_fifo,
        picolibc_console=dual_core.PICOLIBC_CONSOLE,
        zero_sram=choices.zero_sram, stem=stem or name, cpu_tail=cpu_tail,
        source=source or f"`{name}.onnx`",
        other_boards=[b for b in device.boards if b != board],
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
    return out, _phase_words(data, program, fifo, unload, choices.mexpress)


@dataclass(frozen=True)
class Rendered:
    """A project as rendered, before it is moved into place: its files (name -> text)
    and the words its phase functions move."""

    files: Mapping[str, str]
    words: PhaseWords

    def sources(self) -> dict[str, str]:
        """The C sources and headers at the project's top level (emit/footprint.py), as
        text: no second copy of the sample data and the kernel stream."""
        return {name: text for name, text in self.files.items()
                if "/" not in name and name.endswith((".c", ".h"))}


def write_project(hw: HwNetwork, out_dir: Path | str, *,
                  options: EmitOptions, sample: np.ndarray, outputs: list[np.ndarray],
                  overwrite: bool = False, extra_files: Mapping[str, bytes] | None = None,
                  data: ProjectData | None = None, stem: str | None = None,
                  finish: Callable[[Path, Rendered], Mapping[str, bytes]] | None = None,
                  cpu_tail: tuple[str, ...] = (), source: str | None = None) -> None:
    """Write the C project for a lowered network to `out_dir` (atomically).

    `data` overrides the memory contents (tests); normally they come from the kernel/bias
    allocation and the data-section functions. `stem`: the name of the extra files
    (`STEM.yaml`, `STEM.onnx`) the README lists (default: the network's name).
    `finish(directory, rendered)` returns more files, computed from the project as
    rendered (before it is moved into place). `cpu_tail`: the model's final operators the
    application applies (--cpu-tail), which the README and main.c state; `source`: what
    the README names as the project's source (default: the network's name).
    """
    if data is None:
        data = project_data(hw, sample, outputs, options)
    program = register_program(hw, data.memory)
    files, words = _rendered(hw, program, data, options, sample, None, stem, cpu_tail,
                             source)
    rendered = Rendered(files, words)

    def fill(tmp: Path) -> None:
        made = {tmp}
        for fname, text in sorted(files.items()):
            path = tmp / fname
            if path.parent not in made:
                path.parent.mkdir(exist_ok=True)
                made.add(path.parent)
            path.write_bytes(text.encode("utf-8"))
        for fname, blob in sorted((extra_files or {}).items()):
            (tmp / fname).write_bytes(blob)
        # files computed from the project (the report's phase counts), before the
        # directory is moved into place
        for fname, blob in sorted((finish(tmp, rendered) if finish else {}).items()):
            (tmp / fname).write_bytes(blob)

    write_dir_atomic(Path(out_dir), fill, overwrite)
