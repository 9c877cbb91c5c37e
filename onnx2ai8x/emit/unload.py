"""Output memory: the known-answer check (`SAMPLE_OUTPUT`) and what `cnn_unload` reads.

Output data sits in data memory in HWC order (seed 000, "Data memory"): the four
processors of a quad share one 32-bit word per pixel, byte `p % 4` for processor `p`;
layers with more than 64 channels take several passes, pass `k` of a pixel in the
`k`-th word (slot) after the pixel's first; a 32-bit (`output_width: 32`) layer uses
four consecutive words per slot, one per processor of the quad; `write_gap` leaves
that many unused slots after each. The facts (address arithmetic, masks, ordering and
grouping, the unload loop shapes) follow the vendor tool's izer/unload.py and
izer/apbaccess.py so that the generated C is the same.

Public functions:

- `known_answer_layers(placement) -> list[int]`: the layers whose output the check
  covers, in the order `expected_output` expects their values.
- `expected_output(placement, outputs, *, max_checklines=None)
  -> list[tuple[int, int, list[int]]]`: `(address, mask, words)` groups of
  `SAMPLE_OUTPUT`.
- `plan_unload(placement, options) -> Unload`: everything `cnn_unload` reads,
  layer by layer, as data (runs of words from one address, the bytes taken from each,
  the mlator set-ups); templates/unload.c.j2 lays it out.
- `unload_plan(placement) -> list[tuple[int, int]]`: per
  `addr = (volatile uint32_t *) ADDRESS;` statement of `cnn_unload`, its address and the
  number of `*addr++` statements written after it (as text: a loop body counts once;
  the vendor's unrolling: loops of 8 statements for 32-bit outputs, of 1 for 8-bit).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import Ai8xError
from ..map.hw import ffs, multipass, popcount
from ..network import Network
from ..options import EmitOptions
from ..placement import Placement, layer_sequence
from .registers.control import CTL_CLOCK_ENABLE

WIDE_UNROLL = 8  # vendor default --unroll-wide: reads per loop body for 32-bit output
NARROW_UNROLL = 1  # vendor default --unroll-8bit


def simulated_layers(placement: Placement) -> list[int]:
    """Layers in the order the known answer is computed: the layer sequence from the
    first layer used."""
    return layer_sequence(placement, placement.first_layer_used)


def _terminating_layer(placement: Placement) -> int:
    """The last simulated layer: where `simulated_sequence` ends, else the final layer."""
    for ll, pl in enumerate(placement.layers):
        if pl.simulated_sequence == -1:
            return ll
    return placement.final_layer


def known_answer_layers(placement: Placement) -> list[int]:
    """Output layers (and the terminating layer), in simulation order."""
    term = _terminating_layer(placement)
    return [ll for ll in simulated_layers(placement)
            if placement.layers[ll].output_layer or ll == term]


def _output_shape(network: Network, ll: int) -> tuple[int, int, int]:
    lay = network.layers[ll]
    return (lay.output_channels, int(lay.output_dim[0]), int(lay.output_dim[1]))


def _as_chw(values: np.ndarray, shape: tuple[int, int, int], name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim >= 1 and arr.size == int(np.prod(shape)):
        return arr.astype(np.int64).reshape(shape)
    raise Ai8xError("emit.output", name,
                    f"reference output has shape {tuple(arr.shape)}, expected {shape} values",
                    "pass one reference output per known-answer layer (no batch axis)")


def _check_entries(placement: Placement, ll: int,
                   values: np.ndarray) -> list[tuple[int, int, str, int]]:
    """(mask, address, mask text, value) of each word the check compares, as the vendor
    lists them before sorting (its C prints the mask with as many hex digits as the
    checked bytes reach; ties at equal mask and address order by that text)."""
    network = placement.network
    lay = network.layers[ll]
    pl = placement.layers[ll]
    mem = placement.device
    chans, rows, cols = _output_shape(network, ll)
    data = _as_chw(values, (chans, rows, cols), lay.name)
    pmap = pl.output_processor_map
    if pmap == 0:
        raise Ai8xError("emit.output", lay.name, "output layer has no output processors",
                        "set `output_processors` for this layer")
    passes, per_pass = multipass(chans)
    _check_output_map(lay.name, pmap, per_pass)
    out_size = lay.output_width // 8
    width = passes * out_size
    start = ffs(pmap) & ~(mem.processors_per_memory - 1)
    first_map = pmap >> start
    entries: list[tuple[int, int, str, int]] = []
    for doffs in range(rows * cols):
        row, col = divmod(doffs, cols)
        this_map = first_map
        poffs = start
        c = 0
        while c < chans:
            if c % per_pass == 0:
                # A new pass starts over at the first output processor.
                poffs = start
                this_map = first_map
            this_c = c
            expand = c // per_pass
            proc = poffs & ~(mem.processors_per_memory - 1)
            present = False
            slot_vals = [0] * mem.processors_per_memory
            for slot in range(mem.processors_per_memory):
                if this_map & 1:
                    present = True
                    if c < chans:
                        slot_vals[slot] = int(data[c, row, col])
                    c += 1
                this_map >>= 1
            addr = mem.sram_base + pl.out_offset + 4 * (
                mem.quad_word(proc) + (doffs * width + expand * out_size) * (pl.write_gap + 1))
            if present:
                num_bytes = min(c - this_c, chans - this_c)
                if out_size == 1:
                    word = 0
                    for slot, v in enumerate(slot_vals):
                        word |= (v & 0xFF) << (8 * slot)
                    first_proc = ffs(pmap >> proc) % 4
                    entries.append(_masked(addr, word, num_bytes, first_proc))
                else:
                    # Wide output: one word per enabled slot position, the vendor takes
                    # the first `num_bytes` slot positions of the quad.
                    for i in range(min(num_bytes, out_size)):
                        entries.append((0xFFFFFFFF, addr + 4 * i, "",
                                        slot_vals[i] & 0xFFFFFFFF))
            poffs += 4
    return entries


def _masked(addr: int, word: int, num_bytes: int, first_proc: int) -> tuple[int, int, str, int]:
    """A partially checked word: only the bytes of the channels present are compared."""
    if num_bytes == 4:
        return (0xFFFFFFFF, addr, "", word)
    mask = ((1 << (8 * num_bytes)) - 1) << (8 * first_proc)
    digits = 2 * (num_bytes + first_proc)
    return (mask, addr, f" & 0x{mask:0{digits}x}", word & mask)


def expected_output(placement: Placement, outputs: Sequence[np.ndarray],
                    *, max_checklines: int | None = None) -> list[tuple[int, int, list[int]]]:
    """`SAMPLE_OUTPUT` groups `(address, mask, words)`.

    `outputs[k]` is the reference output (C, H, W) / (C, L) of
    `known_answer_layers(placement)[k]` (a leading batch axis of 1 is allowed).
    Words are sorted by (mask, address) and grouped into runs of consecutive addresses
    with one mask, as the vendor's check loop reads them.
    """
    network = placement.network
    layers = known_answer_layers(placement)
    if len(outputs) != len(layers):
        raise Ai8xError("emit.output", network.name,
                        f"{len(outputs)} reference outputs for {len(layers)} output layers",
                        "pass one reference output per layer of known_answer_layers()")
    entries = []
    for ll, values in zip(layers, outputs, strict=True):
        entries.extend(_check_entries(placement, ll, values))
    entries.sort()
    groups: list[tuple[int, int, list[int]]] = []
    next_addr = None
    total = 0
    for mask, addr, _text, value in entries:
        if not groups or mask != groups[-1][1] or addr != next_addr:
            groups.append((addr, mask, []))
            next_addr = addr
        groups[-1][2].append(value)
        next_addr += 4
        total += 1
        if max_checklines is not None and total > max_checklines:
            break
    return groups


# --------------------------------------------------------------------------- cnn_unload
# One walk over the output layers returns what `cnn_unload` reads, as data; the template
# templates/unload.c.j2 lays it out. Three shapes of layer (seed 000, "Data memory" and
# "--mlator"): whole 32-bit words copied (no 8-bit output layer at all), bytes unpacked
# channel-major (any 8-bit output layer makes the whole unload byte-wise, as words of one
# layer may then start unaligned in the buffer), and bytes gathered by the mlator.

WIDE_UNROLL = 8  # the vendor's default --unroll-wide: reads per loop body, 32-bit output
NARROW_UNROLL = 1  # the vendor's default --unroll-8bit
MLATOR_UNROLL = 8  # the vendor's default --unroll-mlator
# Quadrant control register bits (seed 000, "CNN control register"): bit 3 is the clock
# enable the unload leaves on, bit 16 loads the mlator's read pointer and turns it on,
# bits 17-18 pick the byte of each word it gathers. READY_SEL (bits 1-2) stays 0.
CTL_MLATOR = 1 << 16
CTL_MLATOR_BYTE = 17


def _blocks(reads: int, unroll: int) -> tuple[tuple[int, int], ...]:
    """(loop count, statements in the body) per block of a plain run: as many whole loop
    bodies as fit, then the rest. The vendor takes a full loop off even when fewer
    statements remained, so a run of fewer than `unroll` reads is one short block."""
    out = []
    remaining = reads
    while remaining > 0:
        loops = max(1, remaining // unroll)
        out.append((loops, min(remaining, unroll)))
        remaining -= loops * unroll
    return tuple(out)


@dataclass(frozen=True)
class ReadRun:
    """Words read from data memory through `addr`, all with the same stride.

    `address`: the absolute address `addr` is set to before the run, or None where the
    vendor's bookkeeping believes it already points there; `stride`: bytes between the
    words (4: the pointer's own post-increment); `reads`: words read; `unroll`: reads per
    loop body; `lanes` (byte-wise unload): per word, the bytes taken as (bit shift,
    buffer index past `offs`); `skip`: buffer positions `offs` jumps after the run.
    """

    layer: int
    address: int | None
    stride: int
    reads: int
    unroll: int
    lanes: tuple[tuple[int, int], ...] = ()
    skip: int = 0

    @property
    def blocks(self) -> tuple[tuple[int, int], ...]:
        return _blocks(self.reads, self.unroll)

    @property
    def step_words(self) -> int:
        """The explicit pointer step (in words) of a run whose stride is not 4."""
        return abs(self.stride) // 4

    @property
    def step_sign(self) -> str:
        return "+" if self.stride >= 0 else "-"


@dataclass(frozen=True)
class WordLayer:
    """An output layer copied a 32-bit word at a time into `out_buf`."""

    layer: int
    runs: tuple[ReadRun, ...]
    kind: str = "words"


@dataclass(frozen=True)
class ByteLayer:
    """An output layer unpacked byte by byte, channel-major, into the byte buffer.

    `indexed`: the buffer is addressed through `offs` (several pixels per channel; one
    pixel per channel writes the bytes in order); `buffer_start`: the layer's byte
    offset in the buffer where the buffer pointer is set (every layer but the first).
    """

    layer: int
    runs: tuple[ReadRun, ...]
    indexed: bool
    buffer_start: int | None
    kind: str = "bytes"


@dataclass(frozen=True)
class MlatorSetup:
    """Point the mlator at the first word of a run: the quadrant's layer-0 write pointer
    (`pointer_reg`) at `first_pixel`, the pointer increment (`increment_reg`) at the
    passes between pixels, the control register at `control` (on, byte `byte`).
    `restart`: the mlator is still on from the previous run and is switched off first."""

    pointer_reg: int
    first_pixel: int
    increment_reg: int
    increment: int
    control: int
    byte: int
    restart: bool


@dataclass(frozen=True)
class MlatorRun:
    """Mlator reads, each filling one output word with four pixels of one channel.

    `out_word`: the buffer word `offs` is set to first, or None where it continues;
    `setup`: the mlator set-up before the reads, or None where the reads continue.
    """

    out_word: int | None
    setup: MlatorSetup | None
    reads: int

    @property
    def blocks(self) -> tuple[tuple[int, int], ...]:
        """A loop only from two whole bodies on, then single statements."""
        n = self.reads
        out = []
        if n >= 2 * MLATOR_UNROLL:
            out.append((n // MLATOR_UNROLL, MLATOR_UNROLL))
            n %= MLATOR_UNROLL
        if n:
            out.append((1, n))
        return tuple(out)


@dataclass(frozen=True)
class MlatorChannel:
    channel: int
    runs: tuple[MlatorRun, ...]


@dataclass(frozen=True)
class MlatorGroup:
    """The channels of one group of four output processors; `port`: the (control
    register, mlator read port) addresses where the quadrant changes, else None."""

    port: tuple[int, int] | None
    channels: tuple[MlatorChannel, ...]


@dataclass(frozen=True)
class MlatorLayer:
    """An 8-bit output layer read through the mlator (`--mlator`), a word per read."""

    layer: int
    groups: tuple[MlatorGroup, ...]
    kind: str = "mlator"


UnloadLayer = WordLayer | ByteLayer | MlatorLayer


@dataclass(frozen=True)
class Unload:
    """Everything `cnn_unload` does, layer by layer (output layers in layer order).

    `function`: the function is written at all (--no-unload leaves it out unless
    --softmax needs it); `wide`: whole words are copied (no 8-bit output layer);
    `words`: 32-bit words the caller's buffer needs; `mlator_off`: the control value
    that switches the mlator off and leaves the clock on.
    """

    function: bool
    wide: bool
    layers: tuple[UnloadLayer, ...]
    words: int
    mlator_off: int = CTL_CLOCK_ENABLE

    @property
    def buffer(self) -> str:
        """The parameter's name: a byte-wise unload writes through a byte pointer."""
        return "out_buf" if self.wide else "out_buf32"

    @property
    def byte_buffer(self) -> bool:
        return not self.wide and any(lay.kind == "bytes" for lay in self.layers)

    @property
    def uses_addr(self) -> bool:
        return any(lay.kind != "mlator" for lay in self.layers)

    @property
    def uses_mlator(self) -> bool:
        return any(lay.kind == "mlator" for lay in self.layers)

    @property
    def uses_loop(self) -> bool:
        return self.uses_mlator or any(
            loops > 1 for lay in self.layers if lay.kind != "mlator"
            for run in lay.runs for loops, _ in run.blocks)

    @property
    def reads(self) -> int:
        """Words `cnn_unload` reads from the accelerator: every read of every run, a loop
        body's as often as the loop runs, and the mlator's priming read after each
        set-up (the phase table's unload, onnx2ai8x.phases)."""
        total = 0
        for lay in self.layers:
            if lay.kind == "mlator":
                total += sum(run.reads + (run.setup is not None) for group in lay.groups
                             for channel in group.channels for run in channel.runs)
            else:
                total += sum(run.reads for run in lay.runs)
        return total

    @property
    def uses_offs(self) -> bool:
        return any(lay.kind == "mlator" or (lay.kind == "bytes" and lay.indexed)
                   for lay in self.layers)


def _check_output_map(name: str, omap: int, per_pass: int) -> None:
    """Every pass writes `per_pass` channels, one per output processor (seed 000, "Data
    memory"); a map with fewer processors leaves channels nowhere to go, and the walks
    over it would never finish. The sidecar reader refuses such a map; this guards a
    Placement built some other way."""
    if popcount(omap) < per_pass:
        raise Ai8xError("emit.output", name, f"the output processor map 0x{omap:016x} "
                        f"enables {popcount(omap)} processors, the layer writes {per_pass} "
                        "channels per pass", f"enable {per_pass} output processors")


def output_layers(placement: Placement) -> list[int]:
    """The layers `cnn_unload` reads: those marked as outputs, else the final layer."""
    marked = [ll for ll, pl in enumerate(placement.layers) if pl.output_layer]
    return marked or [placement.final_layer]


def _output_groups(placement: Placement, ll: int):
    """Walk output layer `ll` four processors at a time, as the output is laid out (seed
    000, "Data memory": a group of four processors shares a word; channels beyond one
    pass wrap around to the first processor, pass number `expand`). Yields `(first
    channel, expand, first processor of the group, the group's map in bits 0-3)`."""
    network = placement.network
    mem = placement.device
    omap = placement.layers[ll].output_processor_map
    _, per_pass = multipass(network.layers[ll].output_channels)
    _check_output_map(network.layers[ll].name, omap, per_pass)
    start = ffs(omap) & ~(mem.processors_per_memory - 1)
    first_map = omap >> start
    c = 0
    poffs, layer_map = start, first_map
    while c < network.layers[ll].output_channels:
        if c % per_pass == 0:
            poffs, layer_map = start, first_map
        quad = poffs & ~(mem.processors_per_memory - 1)
        yield c, c // per_pass, quad, layer_map & 0x0F
        poffs += 4
        c += popcount(layer_map & 0x0F)
        layer_map >>= 4


def _sources(placement: Placement, ll: int, wide: bool) -> list:
    """The data-memory byte offsets read for layer `ll`, in read order: one per word
    (`wide`), else (offset, byte) per byte taken (a 32-bit layer in a byte-wise unload
    gives all four bytes of each of its words)."""
    network = placement.network
    mem = placement.device
    lay = network.layers[ll]
    pl = placement.layers[ll]
    out_size = lay.output_width // 8
    passes, _ = multipass(lay.output_channels)
    width = passes * out_size
    pixels = int(lay.output_dim[0]) * int(lay.output_dim[1])
    sources: list = []
    for _, expand, quad, group_map in _output_groups(placement, ll):
        for doffs in range(pixels):
            this_map = group_map
            # The vendor scales the instance base by the write gap as well.
            offs = pl.out_offset + (mem.quad_word(quad) + doffs * width
                                    + expand * out_size) * (pl.write_gap + 1) * 4
            for shift in range(4):
                if this_map & 1:
                    if wide:
                        sources.append(offs)
                        offs += 4
                    elif out_size == 4:
                        sources.extend((offs + 4 * shift, b) for b in range(4))
                    else:
                        sources.append((offs, shift))
                this_map >>= 1
    return sources


def _word_runs(ll: int, sources: list[int], base: int, pointer: int
               ) -> tuple[list[ReadRun], int]:
    """Runs of equally spaced words, and where the vendor then believes `addr` points."""
    runs = []
    idx = 0
    while idx < len(sources):
        delta = sources[idx + 1] - sources[idx] if idx + 1 < len(sources) else 4
        run = 0
        # Vendor quirk: the run test compares entries counted from the start of the
        # layer's list, not from the current position (the reads are the same, only the
        # loop split differs).
        while idx + run + 1 < len(sources) and sources[run + 1] - sources[run] == delta:
            run += 1
        addr = base + sources[idx]
        new_addr = None
        if pointer == 0 or pointer != addr:
            new_addr = pointer = addr
        r = ReadRun(ll, new_addr, delta, run + 1, WIDE_UNROLL)
        runs.append(r)
        # The vendor adds the statement count (in words) to a byte address, so a run
        # at the next word normally gets a fresh `addr =` assignment.
        pointer += sum(loops for loops, _ in r.blocks) * WIDE_UNROLL
        idx += run + 1
    return runs, pointer


def _byte_runs(ll: int, sources: list[tuple[int, int]], base: int, pointer: int,
               pixels: int, indexed: bool) -> tuple[list[ReadRun], int, int | None]:
    """Runs of equally spaced words with the same bytes taken from each; where the
    vendor then believes `addr` points, and the last word read (mlator bookkeeping)."""
    runs = []
    last_read = None
    idx = 0
    while idx < len(sources):
        read = sources[idx][0]
        last_read = read
        shifts = []
        while idx + len(shifts) < len(sources) and sources[idx + len(shifts)][0] == read:
            shifts.append(sources[idx + len(shifts)][1])
        count = len(shifts)
        nxt = idx + count
        delta = sources[nxt][0] - read if nxt < len(sources) else 4
        run = 0
        while idx + count * (run + 1) < len(sources) and \
                sources[idx + count * (run + 1)][0] - sources[idx + count * run][0] == delta:
            run += 1
        addr = base + read
        new_addr = None
        if pointer == 0 or pointer != addr:
            new_addr = pointer = addr
        idx += count * (run + 1)
        # channel-major buffer: byte `shift` of a word belongs `pixels` bytes further on
        skip = pixels * (count - 1) if indexed and idx < len(sources) and count > 1 else 0
        r = ReadRun(ll, new_addr, delta, run + 1, NARROW_UNROLL,
                    tuple((8 * s, pixels * s) for s in shifts), skip)
        runs.append(r)
        pointer += 4 * sum(loops for loops, _ in r.blocks) * NARROW_UNROLL
    return runs, pointer, last_read


def mlator_fits(network: Network, ll: int) -> bool:
    """Whether --mlator applies to output layer `ll` (seed 000, "--mlator": 8-bit output;
    it gathers four pixels of one channel per read, so a channel must have at least four
    pixels and, with several channels, a multiple of four)."""
    lay = network.layers[ll]
    pixels = int(lay.output_dim[0]) * int(lay.output_dim[1])
    if lay.output_width != 8 or pixels < 4:
        return False
    return lay.output_channels == 1 or pixels % 4 == 0


def _mlator_layer(placement: Placement, ll: int, written: int,
                  cursor: tuple[int | None, int | None]
                  ) -> tuple[MlatorLayer, tuple[int | None, int | None]]:
    """Output layer `ll` read through the mlator (seed 000, "--mlator").

    Set to byte b of a memory instance, each read of the mlator port returns that byte of
    four consecutive words, i.e. four pixels of one channel, so the channel-major buffer
    fills a word at a time. Per channel: point the quadrant's layer-0 write pointer at the
    first pixel and its pointer increment at the words between pixels, switch the mlator
    on for the byte, prime it with one read, read, switch it off. `written`: the layer's
    byte position in the buffer; `cursor`: (data-memory byte after the last word read,
    buffer byte after the last word written) as the vendor tracks them across layers, so
    a channel is set up afresh only where it does not continue from there.
    """
    network = placement.network
    mem = placement.device
    lay = network.layers[ll]
    pl = placement.layers[ll]
    pixels = int(lay.output_dim[0]) * int(lay.output_dim[1])
    width, _ = multipass(lay.output_channels)  # 8-bit data: one byte per pass
    read_at, write_at = cursor
    groups = []
    port = None
    for c, expand, quad, group_map in _output_groups(placement, ll):
        group = quad // mem.processors_per_quadrant
        mlat = mem.ctl_addr(group, mem.regs.mlator)
        new_port = None
        if mlat != port:
            port = mlat
            new_port = (mem.ctl_addr(group, mem.regs.reg_ctl), mlat)
        channels = []
        this_map = group_map
        for byte in range(4):
            if this_map & 1:
                runs: list[list] = []
                for doffs in range(0, pixels, 4):
                    source = pl.out_offset + (mem.quad_word(quad) + (doffs >> 2) * width
                                              + expand) * (pl.write_gap + 1) * 4
                    # Channel-major output: the vendor's formula, row * rows + col, equals
                    # this for the square and 1-D outputs it is used with.
                    target = (c + byte) * pixels + doffs + written
                    out_word = target >> 2 if target != write_at else None
                    setup = None
                    if source != read_at:
                        setup = MlatorSetup(
                            mem.lreg_addr(group, mem.regs.wptr_base, 0), doffs,
                            mem.lreg_addr(group, mem.regs.lctl2, 0), expand,
                            CTL_CLOCK_ENABLE | CTL_MLATOR | byte << CTL_MLATOR_BYTE, byte,
                            restart=doffs != 0)
                    if not runs or out_word is not None or setup is not None:
                        runs.append([out_word, setup, 0])
                    runs[-1][2] += 1
                    read_at, write_at = source + 4, target + 4
                channels.append(MlatorChannel(c + byte, tuple(MlatorRun(*r) for r in runs)))
            this_map >>= 1
        groups.append(MlatorGroup(new_port, tuple(channels)))
    return MlatorLayer(ll, tuple(groups)), (read_at, write_at)


def plan_unload(placement: Placement,
                options: EmitOptions | None = None) -> Unload:
    """What `cnn_unload` reads, from where, and how the reads are laid out in loops.

    The address arithmetic, grouping and the pointer bookkeeping follow the vendor
    tool's unload so that the generated C is the same; an 8-bit output layer read by the
    mlator (--mlator) must start on a whole buffer word.
    """
    network = placement.network
    options = options or EmitOptions()
    mem = placement.device
    outs = output_layers(placement)
    wide = all(network.layers[ll].output_width != 8 for ll in outs)
    layers: list[UnloadLayer] = []
    pointer = 0  # where the vendor believes `addr` points
    cursor: tuple[int | None, int | None] = (None, None)
    written = 0
    for ll in outs:
        lay = network.layers[ll]
        pixels = int(lay.output_dim[0]) * int(lay.output_dim[1])
        if options.mlator and mlator_fits(network, ll) and written % 4 == 0:
            mlayer, cursor = _mlator_layer(placement, ll, written, cursor)
            layers.append(mlayer)
        elif wide:
            runs, pointer = _word_runs(ll, _sources(placement, ll, True),
                                       mem.sram_base, pointer)
            layers.append(WordLayer(ll, tuple(runs)))
        else:
            indexed = pixels != 1
            runs, pointer, last = _byte_runs(ll, _sources(placement, ll, False),
                                             mem.sram_base, pointer, pixels, indexed)
            if last is not None:
                cursor = (last, cursor[1])
            layers.append(ByteLayer(ll, tuple(runs), indexed,
                                    written if layers else None))
        written += lay.output_channels * pixels * lay.output_width // 8
    return Unload(function=options.softmax or not options.no_unload, wide=wide,
                  layers=tuple(layers), words=(written + 3) // 4)


def unload_plan(placement: Placement) -> list[tuple[int, int]]:
    """`(address, statements)` per `addr = ...` statement of `cnn_unload`: the
    `*addr++` statements written before the next assignment (a loop body counts once)."""
    plan: list[tuple[int, int]] = []
    for lay in plan_unload(placement).layers:
        if lay.kind == "mlator":
            continue
        for r in lay.runs:
            if r.address is not None:
                plan.append((r.address, 0))
            if plan and r.stride == 4:
                plan[-1] = (plan[-1][0], plan[-1][1] + sum(n for _, n in r.blocks))
    return plan
