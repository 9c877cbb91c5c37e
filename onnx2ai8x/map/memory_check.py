"""Independent check of a Placement: processors, data memory, kernel and bias memory.

The checker does not trust whoever made the placement (the automatic mapper or a
hand-written sidecar); it recomputes from the Network what each layer needs and reports
every violation as a Diagnostic naming the layer, the limit and a fix.

Facts (seed 000 "MAX78000 and MAX78002 Hardware and Resources", "Data Memory",
"Multi-Pass", "Kernel memory", "Bias"; vendor izer/tornadocnn.py for the numbers):
* 64 processors in four quadrants of 16; four processors share one data-memory instance.
* HWC data: one 32-bit word per pixel per pass in every instance the channels use (four
  channels per word); CHW (first layer only): one channel per instance, four pixels per
  word. A 32-bit wide output takes four words per pixel per pass.
* Offsets are byte offsets inside each instance: 0 .. 0x7FFF (MAX78000, 8192 words),
  0 .. 0x13FFF (MAX78002, 20480 words).
* Kernel memory per processor, in 72-bit columns (one 3x3 8-bit kernel, or nine 1x1
  8-bit kernels): 768 on MAX78000; 4096 on MAX78002, 5120 for the first processor of a
  quadrant.
* Bias memory per quadrant: 512 bytes (MAX78000), 2048 bytes (MAX78002); a layer's
  bias lives in one quadrant.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..devices import (
    PROCESSORS,
    PROCESSORS_PER_MEMORY,
    Device,
)
from ..errors import Diagnostic
from ..network import DATA_BUFFER, Layer, Network, Op, output_layers
from ..options import HwDecision, default_decision
from ..placement import LayerPlacement, Placement, layer_sequence
from .hw import ffs, fls, multipass, popcount
from .lowered import HwNetwork, HwPlacement, examine
from .weights import try_allocate

INPUT = -1  # in_sequences value of the network input


def instances(processor_map: int) -> int:
    """Bit mask of the data-memory instances a processor map touches."""
    out = 0
    for p in range(PROCESSORS):
        if processor_map >> p & 1:
            out |= 1 << (p // PROCESSORS_PER_MEMORY)
    return out


def lanes(processor_map: int, whole_words: bool) -> int:
    """Byte lanes written: in HWC each processor owns one byte of its instance's word, so
    data on different processors never collides; 32-bit output and CHW data fill whole
    words, i.e. every lane of the instances they touch."""
    if not whole_words:
        return processor_map
    out = 0
    inst = instances(processor_map)
    for i in range(PROCESSORS // PROCESSORS_PER_MEMORY):
        if inst >> i & 1:
            out |= 0xF << (PROCESSORS_PER_MEMORY * i)
    return out


def inputs_of(network: Network, ll: int) -> tuple[int, ...]:
    """Producers of layer `ll`'s input (-1: the network input)."""
    seqs = network.layers[ll].in_sequences
    if seqs is None:
        return (ll - 1,) if ll > 0 else (INPUT,)
    return tuple(seqs)


def last_use(network: Network) -> dict[int, int]:
    """For each producer (and -1, the input) the last layer that reads its output.

    A layer nobody reads is a network output: it stays live to the end (index n).
    """
    n = len(network.layers)
    last = {INPUT: 0, **{i: n for i in range(n)}}
    for ll in range(n):
        for src in inputs_of(network, ll):
            if src == DATA_BUFFER:
                continue  # the data buffer lives for the whole network (buffer_region)
            if src == INPUT or src != n - 1 and last[src] == n:
                last[src] = ll
            elif src != n - 1:
                last[src] = max(last[src], ll)
    for out in output_layers(network):
        last[out] = n  # read back after the inference (cnn_unload, the known answer)
    return last


def output_pad(layer: Layer) -> int:
    """Extra output words of a long-dilation Conv1d run on the Conv2d hardware."""
    dil, k = layer.dilation[0], layer.kernel_size[0]
    if layer.operator.one_d and dil > 1 and (k - 1) * dil >= 9:
        rows = (layer.input_dim[0] + dil - 1) // dil
        return rows * dil - layer.output_dim[0]
    return 0


def output_ignore(layer: Layer) -> int:
    """Bytes a long-dilation 3-tap Conv1d writes below its `out_offset` (vendor rule)."""
    dil, k = layer.dilation[0], layer.kernel_size[0]
    if layer.operator.one_d and dil > 1 and (k - 1) * dil >= 9 and k == 3:
        return 4 * dil * multipass(layer.output_channels)[0]
    return 0


def in_place_margin(network: Network, ll: int, big_data: bool = False) -> int | None:
    """How far below its input (bytes) layer ll may write its output over it, or None
    when it may not overlap its input at all.

    The accelerator supports a layer writing over its own input (the vendor's
    `--overlap-data`: its tool cannot check for "inadvertent overwriting of unprocessed
    input data", README "Data Memory"); it is safe when no input pixel a later output
    still needs is overwritten. A stride-1 Conv2d without pooling on single-pass HWC data
    computes output pixel q (raster order, one word per pixel in every memory instance)
    only after it has read input pixel q + p*W + p (padding p, width W), and later
    outputs need no input pixel below q - p*W - p + 1: the output may start p*W + p words
    below the input. Only for a layer that is its input's last reader.

    Multi-pass input (more than 64 channels, `i` words per pixel) to a single-pass output
    without padding (a 1x1 layer) is read pixel by pixel, all passes of a pixel before its
    output word: output pixel q ends at 4(q + 1) and the next input still needed starts at
    4i(q + 1), so the output may start at the input (the vendor's action-recognition
    sidecar, networks/ai85-kinetics-actiontcn.yaml, writes its 96-channel 1x1 layer
    below its input so). Only that case, the one the vendor's own sidecars show."""
    lay = network.layers[ll]
    srcs = inputs_of(network, ll)
    k, p = lay.kernel_size[0], lay.padding[0]
    words_in = multipass(lay.input_channels)[0]
    words_out = multipass(lay.output_channels)[0]
    if lay.operator != Op.CONV2D or len(srcs) != 1 or lay.operands != 1 or lay.flatten \
            or big_data or lay.stride != (1, 1) or lay.dilation != (1, 1) \
            or lay.pool != (1, 1) or lay.output_width != 8 or lay.conv_groups != 1 \
            or tuple(lay.kernel_size) != (k, k) or tuple(lay.padding) != (p, p) \
            or 2 * p != k - 1 or tuple(lay.input_dim) != tuple(lay.output_dim) \
            or words_out != 1 or words_in > 1 and p:
        return None
    if last_use(network).get(srcs[0]) != ll:
        return None
    return 4 * (p * lay.input_dim[1] + p)


def output_bytes(layer: Layer) -> int:
    """Bytes per instance of a layer's output (HWC, one word per pixel per pass)."""
    h, w = layer.output_dim
    passes = multipass(layer.output_channels)[0]
    return (h * w + output_pad(layer)) * passes * 4 * layer.output_width // 8


def input_bytes(network: Network, ll: int, big_data: bool) -> int:
    """Bytes per instance the layer reads (all operands), vendor's in_size rule."""
    lay = network.layers[ll]
    h, w = lay.input_dim
    passes = multipass(lay.input_channels)[0]
    return h * w * passes * lay.operands * (1 if big_data else 4)


def kernel_columns(layer: Layer, output_processor_map: int, *, as_3x3: bool = False) -> int:
    """Kernel-memory columns the layer takes in each of its input processors.

    Kernels per processor: one per output processor column (from the first to the last
    output processor, plus the columns skipped inside the first instance) per output pass
    and per input pass; a flattened layer holds one row per input pixel and pass. Packed
    into 72-bit columns with narrow weights padded to whole bytes (izer/kernels.py).
    `as_3x3`: a 1x1 convolution next to streaming, stored as 3x3 kernels
    (hw.runs_1x1_as_3x3), nine times the bytes.
    """
    if layer.weights is None or layer.operator.passthrough:
        return 0
    omap = output_processor_map or (1 << multipass(layer.output_channels)[1]) - 1
    passes_in, thresh_in = multipass(layer.input_channels)
    passes_out = multipass(layer.output_channels)[0]
    start_col = ffs(omap) % PROCESSORS_PER_MEMORY
    first = ffs(omap) - (start_col if passes_out > 1 else 0)
    in_exp = 1 if layer.flatten else passes_in
    kc = (1 + fls(omap) - first) * passes_out * in_exp if layer.conv_groups == 1 else in_exp
    if layer.flatten:
        rows = layer.input_channels * layer.pooled_dim[0] * layer.pooled_dim[1] // thresh_in
        kc = kc * rows - (passes_out * popcount(omap) - layer.output_channels) * rows
    ksize = 3 * 3 if as_3x3 else layer.kernel_size[0] * layer.kernel_size[1]
    bits = abs(layer.quantization) or 8
    qfactor = 8 // bits
    res = (kc % qfactor) * ksize * (qfactor - 1)
    return (kc * ksize * bits + res + 71) // 72


def place_kernels(network: Network, maps: list[tuple[int, int]], facts: Device,
                  order: list[int] | None = None, as_3x3: frozenset[int] = frozenset()
                  ) -> tuple[list[int | None], list[int]]:
    """Greedy kernel-memory layout: each layer at the lowest column free in all of its
    input processors (the vendor also gives a layer one column range across its
    processors); the layers in `as_3x3` store 1x1 kernels as 3x3 ones (next to
    streaming). Returns (first column per layer or None if it does not fit, columns
    used per processor)."""
    used = [0] * PROCESSORS  # next free column per processor (layers never share columns)
    busy: list[list[tuple[int, int]]] = [[] for _ in range(PROCESSORS)]
    start: list[int | None] = [None] * len(network.layers)
    for ll in order if order is not None else range(len(network.layers)):
        pmap, omap = maps[ll]
        length = kernel_columns(network.layers[ll], omap, as_3x3=ll in as_3x3)
        if length == 0:
            start[ll] = 0
            continue
        procs = [p for p in range(PROCESSORS) if pmap >> p & 1]
        col = lowest_free(busy, procs, length)
        if col is None or any(col + length > facts.kernel_words(p) for p in procs):
            continue
        for p in procs:
            busy[p].append((col, col + length))
            used[p] = max(used[p], col + length)
        start[ll] = col
    return start, used


def lowest_free(busy: list[list[tuple[int, int]]], procs: list[int],
                 length: int) -> int | None:
    """Lowest column, a multiple of 4 like the vendor's allocator, free in all `procs`."""
    col = 0
    while True:
        clash = [end for p in procs for (s, end) in busy[p] if s < col + length and col < end]
        if not clash:
            return col
        col = (max(clash) + 3) & ~3
        if col > 1 << 16:
            return None


@dataclass(frozen=True)
class Buffer:
    """One layer output (or the network input) in data memory."""

    producer: int  # -1: network input
    lanes: int  # byte lanes (processors) written, see `lanes`
    start: int  # first byte (inclusive), including any bytes written below the offset
    end: int  # last byte (exclusive)
    born: int  # step at which it is written (-1 for the input)
    dies: int  # last step that reads it
    gap: int = 0  # write_gap: slots of 4 * (gap + 1) bytes, only the first one written
    # Written while the streaming layers run (a circular buffer, or the last streaming
    # layer's output); such buffers are checked against each other by the vendor's
    # streaming rules (`_check_streaming`), not by live ranges.
    streaming: bool = False

    def collides(self, other: Buffer) -> bool:
        """Do the two buffers write a common byte?"""
        if not self.lanes & other.lanes or not (self.start < other.end
                                                 and other.start < self.end):
            return False
        if self.gap and self.gap == other.gap:
            # interleaved element-wise operands: distinct slots never collide
            return (self.start - other.start) % (4 * (self.gap + 1)) == 0
        return True


def stream_count(placement: Placement) -> int:
    """How many leading layers stream (they all run at once, seed 000 "Streaming Mode")."""
    k = 0
    for pl in placement.layers:
        if not pl.streaming:
            break
        k += 1
    return k


def buffers(hp: HwPlacement) -> list[Buffer]:
    """Every layer output and the network input with its memory range and live range.

    While the first k layers stream they all run at once: the input and every streaming
    layer's output but the last are circular buffers of the reader's rollover size (the
    one the project programs, `hp.rollover`), born before the first layer and dead when
    the streaming part ends (layer k - 1); the last streaming layer's output is whole and
    lives until its last reader.
    """
    placement, network = hp.placement, hp.network
    last = last_use(network)
    first = placement.layers[0] if placement.layers else None
    k = stream_count(placement)
    roll = hp.rollover
    out = []
    if first is not None:
        big = first.big_data
        size = input_bytes(network, 0, big)
        if network.layers[0].in_sequences not in (None, (INPUT,)):
            size = _network_input_bytes(network, big)
        dies = last[INPUT]
        if k:
            size, dies = 4 * (roll[0] or 0), max(dies, k - 1)
        out.append(Buffer(INPUT, lanes(first.processor_map, big), first.in_offset,
                          first.in_offset + _round4(size), -1, dies, streaming=k > 0))
    for ll, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        if lay.buffer_shift or lay.buffer_insert:
            continue  # writes into the data buffer (buffer_region), checked by buffer_kept
        size = output_bytes(lay)
        if pl.write_gap:
            # every slot is followed by write_gap unused slots
            size = size * (pl.write_gap + 1) - 4 * pl.write_gap
        start = pl.out_offset - output_ignore(lay)
        dies = len(network.layers) if pl.output_layer else last[ll]
        born = ll
        if ll < k:
            born = INPUT
            if ll < k - 1:
                size, dies = 4 * (roll[ll + 1] or 0), max(dies, k - 1)
        out.append(Buffer(ll, lanes(pl.output_processor_map, lay.output_width != 8), start,
                          pl.out_offset + _round4(size), born, dies, pl.write_gap,
                          streaming=ll < k))
    region = buffer_region(placement)
    if region is not None:
        out.append(region)
    return out


def buffer_region(placement: Placement) -> Buffer | None:
    """The data buffer's memory (None without one): `length` words from its offset in
    each of its processors' byte lanes, written before the first layer (zeroed, then
    kept from the inference before) and read after the last (by the next inference)."""
    network = placement.network
    buf, where = network.data_buffer, placement.data_buffer
    if buf is None or where is None:
        return None
    return Buffer(DATA_BUFFER, where.processors, where.offset, where.offset + 4 * buf.length,
                  born=-1, dies=len(network.layers))


def _network_input_bytes(network: Network, big: bool) -> int:
    shape = network.input_shape
    c = shape[0]
    pixels = shape[1] * (shape[2] if len(shape) > 2 else 1)
    return pixels * multipass(c)[0] * (1 if big else 4)


def _round4(x: int) -> int:
    return (x + 3) & ~3


def _where(network: Network, ll: int) -> str:
    if ll == DATA_BUFFER and network.data_buffer is not None:
        return f"data buffer `{network.data_buffer.name}`"
    return f"layer `{network.layers[ll].name}`" if ll >= 0 else "network input"


def check_placement(placement: Placement, decision: HwDecision | None = None
                    ) -> list[Diagnostic]:
    """Every violation of the device's processor and memory limits (empty: all fit),
    the placement examined under `decision` (default: the default options')."""
    return checked(examine(placement, decision or default_decision(placement.device)))[1]


def checked(hp: HwPlacement) -> tuple[HwNetwork | None, list[Diagnostic]]:
    """Every violation of an examined placement (see `check_placement`), and the lowered
    network with the kernel and bias memory the check allocated (None when something
    does not fit): the mapper hands this on, so neither the hardware view nor the
    allocation is made again."""
    placement = hp.placement
    network = placement.network
    facts = placement.device
    diags: list[Diagnostic] = []
    n = len(network.layers)
    if len(placement.layers) != n:
        return None, [Diagnostic("map.check", "placement",
                                 f"{len(placement.layers)} placed layers for {n} network "
                                 "layers", "place every layer of the network")]
    if n > facts.max_layers:
        diags.append(Diagnostic("map.layers", "network",
                                f"{n} layers, {facts.name} runs at most {facts.max_layers}",
                                "merge layers or use a larger device"))
    for ll, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        where = _where(network, ll)
        passes, per_pass = multipass(lay.input_channels)
        if popcount(pl.processor_map) != per_pass:
            diags.append(Diagnostic(
                "map.processors", where,
                f"{lay.input_channels} input channels need {per_pass} processors per pass "
                f"({passes} pass(es)); the map {pl.processor_map:#018x} enables "
                f"{popcount(pl.processor_map)}", f"enable exactly {per_pass} processors",
                key="processors"))
        opasses, oper = multipass(lay.output_channels)
        if popcount(pl.output_processor_map) != oper:
            diags.append(Diagnostic(
                "map.processors", where,
                f"{lay.output_channels} output channels need {oper} output processors; "
                f"the map {pl.output_processor_map:#018x} enables "
                f"{popcount(pl.output_processor_map)}", f"enable exactly {oper} processors",
                key="output_processors"))
        if pl.big_data:
            if ll != 0:
                diags.append(Diagnostic("map.chw", where, "only the first layer reads CHW data",
                                        "use HWC (remove `data_format: CHW`)",
                                        key="data_format"))
            elif any(popcount((pl.processor_map >> (4 * i)) & 0xF) > 1 for i in range(16)):
                diags.append(Diagnostic(
                    "map.chw", where, "CHW input needs one channel per memory instance "
                    f"(processors 0, 4, 8, ...), the map is {pl.processor_map:#018x}",
                    "enable one processor out of each group of four", key="processors"))
        in_size = input_bytes(network, ll, pl.big_data)
        if not pl.streaming and pl.in_offset + in_size > facts.data_instance_bytes:
            diags.append(Diagnostic(
                "map.data-memory", where,
                f"the input ({in_size} bytes per instance) at offset {pl.in_offset:#x} ends "
                f"past the {facts.data_instance_bytes:#x}-byte data memory instance",
                "use a smaller input, a lower `in_offset`, or streaming", key="in_offset"))
        out_size = output_bytes(lay) * (pl.write_gap + 1)
        if not 0 <= pl.out_offset or pl.out_offset + out_size - 4 * pl.write_gap \
                > facts.data_instance_bytes and (not pl.streaming or ll == n - 1):
            diags.append(Diagnostic(
                "map.data-memory", where,
                f"the output ({out_size} bytes per instance) at offset {pl.out_offset:#x} "
                f"ends past the {facts.data_instance_bytes:#x}-byte data memory instance",
                f"lower `out_offset` to {max(facts.data_instance_bytes - out_size, 0):#x} "
                "or below, or reduce the output size", key="out_offset"))
        for key, value in (("in_offset", pl.in_offset), ("out_offset", pl.out_offset)):
            if value % 4:
                # the offset registers count words: the hardware would use value & ~3
                diags.append(Diagnostic(
                    "map.alignment", where,
                    f"`{key}` {value:#06x} is not a multiple of 4; data offsets count whole "
                    f"words (the accelerator would use {value & ~3:#06x})",
                    f"set `{key}: {value & ~3:#06x}` or `{(value + 3) & ~3:#06x}`", key=key))
    diags += _check_liveness(hp) + buffer_kept(hp)
    diags += read_gap_supported(hp) + read_as_written(placement)
    diags += read_where_written(placement)
    diags += chw_input_read_once(placement) + outputs_without_gaps(placement)
    diags += _check_streaming(hp)
    # Kernel and bias memory: the allocators' exact layouts (map/kernels.py, map/bias.py).
    weights, problems = try_allocate(placement)
    diags += problems
    return (HwNetwork.of(hp, weights) if weights is not None and not diags else None), diags


def buffer_kept(hp: HwPlacement) -> list[Diagnostic]:
    """The data buffer keeps its values from one inference to the next (seed 000,
    "Rolling Buffers"): its words (one channel per buffer processor, `length` positions
    from its offset) belong to it for the whole network. Only the shift layer (reading
    positions k.., writing positions 0..) and the inserting layer (writing the last k
    positions) may write there, every layer reading it reads it where it lives, and no
    other output (nor the network input, loaded before each inference) may land on it."""
    placement, network = hp.placement, hp.network
    buf, where = network.data_buffer, placement.data_buffer
    if buf is None:
        return []
    name = f"data buffer `{buf.name}`"
    if where is None:
        return [Diagnostic("map.data-buffer", "network",
                           f"the {name} has no place in data memory",
                           "give the sidecar a global `data_buffer` with `processors` and "
                           "`offset`")]
    region = buffer_region(placement)
    assert region is not None
    span = f"bytes {region.start:#x}-{region.end - 1:#x} of processors {where.processors:#018x}"
    diags = []
    if popcount(where.processors) != buf.channels:
        diags.append(Diagnostic(
            "map.data-buffer", name,
            f"{buf.channels} channels need {buf.channels} processors (one channel each); "
            f"the map {where.processors:#018x} enables {popcount(where.processors)}",
            f"enable exactly {buf.channels} processors in `data_buffer` `processors`"))
    if where.offset % 4 or region.end > placement.device.data_instance_bytes:
        diags.append(Diagnostic(
            "map.data-buffer", name,
            f"{buf.length} positions at offset {where.offset:#x} must start on a word and "
            f"end by the {placement.device.data_instance_bytes:#x}-byte data memory instance",
            f"set `offset` to a multiple of 4 no higher than "
            f"{placement.device.data_instance_bytes - 4 * buf.length:#x}"))
    for b in buffers(hp):
        if b.producer != DATA_BUFFER and b.collides(region):
            diags.append(Diagnostic(
                "map.data-buffer", _where(network, b.producer),
                f"{'the input' if b.producer == INPUT else 'the output'} (bytes "
                f"{b.start:#x}-{b.end - 1:#x}) lands on the {name} ({span}), which keeps "
                "its values across inferences; only its shift and insert layers write it",
                "move `out_offset` (or the input's `in_offset`) off the buffer, or move "
                "the buffer"))
    for ll, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        diags += _buffer_access(network, ll, lay, pl, where.processors, where.offset,
                                buf.length)
    return diags


def _buffer_access(network: Network, ll: int, lay: Layer, pl: LayerPlacement, procs: int,
                   offset: int, length: int) -> list[Diagnostic]:
    """Where a layer touching the data buffer must read and write it (buffer_kept)."""
    want: list[tuple[str, int, int]] = []  # (key, given, needed)
    reads = inputs_of(network, ll) == (DATA_BUFFER,)
    if reads:
        want += [("processors", pl.processor_map, procs),
                 ("in_offset", pl.in_offset, offset + 4 * lay.buffer_shift)]
    if lay.buffer_shift:
        want += [("output_processors", pl.output_processor_map, procs),
                 ("out_offset", pl.out_offset, offset)]
    if lay.buffer_insert:
        want += [("output_processors", pl.output_processor_map, procs),
                 ("out_offset", pl.out_offset, offset + 4 * (length - lay.buffer_insert))]
    out = []
    for key, given, need in want:
        if given != need:
            width = 18 if "processors" in key else 0
            out.append(Diagnostic(
                "map.data-buffer", _where(network, ll),
                f"`{key}` is {given:#0{width}x}; the data buffer (positions "
                f"{'after the shift ' if lay.buffer_shift and key == 'in_offset' else ''}"
                f"{'it writes' if key.startswith('out') else 'it reads'}) is at "
                f"{need:#0{width}x}", f"set `{key}: {need:#0{width}x}`"))
    return out


def read_gap_supported(hp: HwPlacement) -> list[Diagnostic]:
    """A layer may skip words while it reads (`read_gap`) only on the MAX78002 and only
    when it reads its input in one pass, i.e. 64 channels or fewer (seed 000 "read_gap";
    the vendor tool refuses it otherwise)."""
    placement, network = hp.placement, hp.network
    facts = placement.device
    diags = []
    for ll, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        if not pl.input_skip:
            continue
        passes = multipass(lay.input_channels)[0]
        if not facts.read_gap or passes > 1:
            why = f"{facts.name} has no read gap" if not facts.read_gap else \
                f"its {lay.input_channels} input channels are read in {passes} passes"
            diags.append(Diagnostic(
                "map.read-gap", _where(network, ll),
                f"the layer reads with read_gap {pl.input_skip}, but {why}",
                "let a pass-through layer copy the input without gaps (seed 004, "
                "Residual Connections) and read the copy", key="read_gap"))
    return diags


def read_as_written(placement: Placement) -> list[Diagnostic]:
    """A layer reading one layer's output where it was written must read it the way it
    was written: data written with gaps (`write_gap`, interleaved with other operands or
    concatenated parts) is read with the same `read_gap`, else the layer reads the other
    operands' words as its own pixels (seed 000 "write_gap", "read_gap")."""
    network = placement.network
    diags = []
    for ll, pl in enumerate(placement.layers):
        srcs = inputs_of(network, ll)
        if len(srcs) != 1 or srcs[0] < 0 or pl.streaming:
            continue
        src = placement.layers[srcs[0]]
        if pl.in_offset != src.out_offset or pl.input_skip == src.write_gap:
            continue
        name = network.layers[srcs[0]].name
        diags.append(Diagnostic(
            "map.read-gap", _where(network, ll),
            f"reads the output of `{name}`, written with write_gap {src.write_gap}, with "
            f"read_gap {pl.input_skip}", f"read it with read_gap {src.write_gap} (MAX78002, "
            f"one input pass), or copy `{name}` with a pass-through layer and read the copy",
            key="read_gap"))
    return diags


def read_where_written(placement: Placement) -> list[Diagnostic]:
    """A layer reading one layer's output reads the bytes that layer wrote: an
    `in_offset` that starts its input outside them, or runs past their end, makes it read
    words nobody wrote for it (a hand-edited `in_offset`; seed 000 "Data Memory": a
    layer reads from its offset in the memories of its processors)."""
    network = placement.network
    diags = []
    for ll, pl in enumerate(placement.layers):
        srcs = inputs_of(network, ll)
        if len(srcs) != 1 or srcs[0] < 0 or pl.streaming or pl.input_skip:
            continue
        src, lay = placement.layers[srcs[0]], network.layers[srcs[0]]
        if src.streaming or src.write_gap or lay.buffer_shift or lay.buffer_insert:
            continue
        start, end = src.out_offset, src.out_offset + output_bytes(lay)
        need = input_bytes(network, ll, False)
        if start <= pl.in_offset and pl.in_offset + need <= end:
            continue
        diags.append(Diagnostic(
            "map.read-offset", _where(network, ll),
            f"reads its input at {pl.in_offset:#06x}-{pl.in_offset + need - 1:#06x}, but "
            f"`{lay.name}` wrote it at {start:#06x}-{end - 1:#06x}",
            f"set `in_offset: {start:#06x}` (or leave it out: it follows the producer's "
            "`out_offset`)", key="in_offset"))
    return diags


def later_input_readers(network: Network) -> list[int]:
    """The layers after the first that read the network input (`in_sequences: input`)."""
    return [ll for ll in range(1, len(network.layers)) if INPUT in inputs_of(network, ll)]


def chw_input_read_once(placement: Placement) -> list[Diagnostic]:
    """CHW input (one channel per memory instance, four pixels a word) is read as CHW
    only by a layer whose CHW bit (LCTRL0 bit 6) is set, and only the first layer may
    set it (seed 000, "CHW (Big Data)"; the vendor tool refuses `data_format: CHW`
    elsewhere). A later layer reading the input again takes its words for HWC pixels
    (four channels of one pixel): its result is not the network's."""
    # A layer's read mode is its own bit; the hardware keeps no record of who wrote a
    # word. The vendor's known answers assume the CHW reading: its 37 FAILing projects
    # of the random sweep PASS on ai8xsim once the reader reads CHW, its 15 PASSing ones
    # PASS both ways (tests/ai8xsim/test_chw_reread.py). The two readings agree only for
    # a one-pixel input on processors at byte 0 of their words (pixel 0 is byte 0 of
    # word 0 either way): not carved out, CHW gains nothing there.
    network = placement.network
    if not placement.layers or not placement.layers[0].big_data:
        return []
    return _input_read_again(
        network, "map.chw",
        "which is stored CHW (four pixels a word); only the first layer can read CHW "
        "data, this layer would read those words as HWC",
        "use HWC input (remove `data_format: CHW`), or read the output of a first "
        "layer that copies the input (a pass-through layer, `op: none`) instead")


def fifo_input_read_once(network: Network, fifo: bool) -> list[Diagnostic]:
    """Input arriving through the FIFOs (--fifo, --fast-fifo, a streaming first layer)
    is fed to the first layer as it arrives and never stored where a later layer could
    read it (seed 000, "FIFOs"): a later layer reading the network input would read
    data memory nobody wrote."""
    if not fifo:
        return []
    return _input_read_again(
        network, "map.fifo-input",
        "but the input arrives through the FIFOs, which feed the first layer only; the "
        "input is never in data memory for this layer",
        "load the input into data memory (no --fifo, no streaming first layer), or read "
        "the output of a first layer that copies the input (`op: none`) instead")


def _input_read_again(network: Network, code: str, why: str, hint: str
                      ) -> list[Diagnostic]:
    """One refusal per later layer that reads the network input again (`why`: how the
    input is held that such a layer cannot read)."""
    return [Diagnostic(code, _where(network, ll), f"reads the network input again, {why}",
                       hint, key="in_sequences") for ll in later_input_readers(network)]


def _gapped(processors: int) -> bool:
    low = processors & -processors
    return processors != 0 and bool((processors + low) & processors)


def _depthwise_gaps(processors: int) -> int | None:
    """The first quadrant (of a depthwise layer without broadcast) whose processors
    leave a gap, or that is not the layer's first quadrant yet does not start at its
    processor 0; None when there is none."""
    first = True
    for g in range(PROCESSORS // 16):
        q = processors >> 16 * g & 0xFFFF
        if not q:
            continue
        if _gapped(q) or (not first and q & 1 == 0):
            return g
        first = False
    return None


def outputs_without_gaps(placement: Placement) -> list[Diagnostic]:
    """A convolution or linear layer writes its output channels to consecutive output
    processors from the first one (the mask range, LCTRL2, counts slots from there and
    the kernels are stored packed), so output processors with gaps (within a quadrant
    or across quadrants) receive the wrong channels and write over processors outside
    the map; the time-slot offset that might space them is programmed by neither this
    converter nor the vendor tool, and no known answer shows it (seed 000, "Processor
    and Output Processor Maps"). A depthwise layer without broadcast (output processors
    other than its input's) writes in turns, one per enabled processor: with gaps among
    its processors, which bias byte each reads is shown by no known answer."""
    network = placement.network
    diags = []
    for ll, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        if not lay.operator.has_weights:
            continue
        depthwise = lay.conv_groups > 1
        if not depthwise and _gapped(pl.output_processor_map):
            n = popcount(pl.output_processor_map)
            packed = ((1 << n) - 1) << min(ffs(pl.output_processor_map), PROCESSORS - n)
            diags.append(Diagnostic(
                "map.output-gaps", _where(network, ll),
                f"the output processors {pl.output_processor_map:#018x} have gaps; a "
                f"{lay.operator.word} layer writes its channels to consecutive processors "
                "from the first one, so the gaps would take channels and the projects "
                "of both this converter and the vendor tool give wrong results",
                f"use {n} consecutive output processors (e.g. {packed:#018x})",
                key="output_processors"))
        elif depthwise and pl.processor_map != pl.output_processor_map and \
                (g := _depthwise_gaps(pl.processor_map)) is not None:
            diags.append(Diagnostic(
                "map.output-gaps", _where(network, ll),
                f"a depthwise layer moving its data (output processors other than its "
                f"processors {pl.processor_map:#018x}) on processors with a gap in quadrant "
                f"{g}: it writes in turns, and which bias byte each processor then reads is "
                "shown by no known answer (the vendor tool's time slots and bias layout "
                "disagree there)",
                "keep the output on the input processors (broadcast), or use processors "
                "without gaps, each quadrant after the first from its processor 0",
                key="processors"))
    return diags


def _check_liveness(hp: HwPlacement) -> list[Diagnostic]:
    """No output may overwrite data a later layer still reads (live ranges).

    Buffers written while the streaming layers run are checked against each other by
    `_check_streaming` (the vendor's rules); against the layers after the streaming part
    they are ordinary live ranges. An output over its own input is judged by the
    hardware's read/write order (map/overlap.py). A layer the sequence never reaches
    (one a stated `simulated_sequence` jumps past, seed 004) writes nothing the
    sequence reads.
    """
    placement, network = hp.placement, hp.network
    bufs = buffers(hp)
    runs = set(layer_sequence(placement, placement.first_layer_used))
    diags = []
    for b in bufs:
        if b.producer < 0 or b.producer not in runs:
            continue
        for a in bufs:
            if a is b or a.born >= b.born or a.streaming and b.streaming \
                    or a.producer == DATA_BUFFER:  # buffer_kept says it better
                continue
            if not (b.born <= a.dies and b.collides(a)):
                continue
            own = _own_input_order(placement, a, b)
            if own is True:
                continue
            if own is not None:
                diags.append(Diagnostic(
                    "map.overwrite", _where(network, b.producer),
                    f"the output (bytes {b.start:#x}-{b.end - 1:#x}) overlaps its own input "
                    f"(bytes {a.start:#x}-{a.end - 1:#x}) in an order the accelerator cannot "
                    f"run: {own.describe()} (the layer produces its output pixels row by "
                    "row, seed 000 Streaming Mode)", "move `out_offset` further below the "
                    "input, or to a free region", key="out_offset"))
                continue
            diags.append(Diagnostic(
                "map.overwrite", _where(network, b.producer),
                f"the output (bytes {b.start:#x}-{b.end - 1:#x}) overwrites the data of "
                f"{_where(network, a.producer)} (bytes {a.start:#x}-{a.end - 1:#x}) "
                f"which layer `{network.layers[min(a.dies, len(network.layers) - 1)].name}`"
                " still reads", "move `out_offset` to a free region", key="out_offset"))
    return diags


def _own_input_order(placement: Placement, a: Buffer, b: Buffer):
    """For output `b` over `a`, the only input of its layer and read by no later layer:
    True when the hardware's order makes it safe, else the first clobbered word
    (overlap.Clobber); None when `a` is not such an input or the order is not modelled."""
    network = placement.network
    from .overlap import first_clobber

    ll = b.producer
    # the last streaming layer's output is whole (not circular) once streaming ends
    whole = not a.streaming or a.producer == stream_count(placement) - 1
    if not whole or b.streaming or a.gap or b.gap or a.dies != ll \
            or inputs_of(network, ll) != (a.producer,):
        return None
    big = a.producer == INPUT and placement.layers[0].big_data
    try:
        found = first_clobber(network.layers[ll], placement.layers[ll], big)
    except ValueError:
        return None
    return True if found is None else found


def unpermitted_overlaps(hp: HwPlacement) -> list[Diagnostic]:
    """Without --overlap-data a layer may not write over its own input: the vendor's tool
    refuses it ("... is overwriting input ...", seed 000 "Data Memory": its generator
    cannot check the order, so the overlap must be asked for). With the flag, onnx2ai8x
    checks the order (`_check_liveness`). A data buffer's shift layer is left to
    `buffer_kept`: it moves the buffer in place by design. An input written by the
    streaming layers is not one the vendor's tool checks (its facedet demo, built
    without the flag, writes layer 2 below the last streaming layer's output)."""
    network = hp.network
    bufs = {buf.producer: buf for buf in buffers(hp)}
    diags = []
    for ll in overlapping_layers(hp):
        src = bufs[inputs_of(network, ll)[0]]
        if network.layers[ll].buffer_shift or src.streaming:
            continue
        out = bufs[ll]
        if _own_input_order(hp.placement, src, out) not in (True, None):
            # One diagnosis per cause, the most specific: the accelerator's order
            # clobbers input it still needs, which --overlap-data would not cure;
            # _check_liveness names that (map.overwrite).
            continue
        diags.append(Diagnostic(
            "map.overlap", _where(network, ll),
            f"the output (bytes {out.start:#x}-{out.end - 1:#x}) lands on the layer's own "
            f"input (bytes {src.start:#x}-{src.end - 1:#x}); like the vendor's tool, "
            "onnx2ai8x refuses that unless --overlap-data asks for it",
            "pass --overlap-data (onnx2ai8x then checks that the accelerator's read/write "
            "order never overwrites input it still needs), or move `out_offset` to a free "
            "region", key="out_offset"))
    return diags


def overlapping_layers(hp: HwPlacement) -> tuple[int, ...]:
    """The layers that write over their own input (the vendor tool needs --overlap-data).

    A data buffer's shift layer always does (it moves the buffer down in place); the
    vendor tool refuses such a network without --overlap-data ("... output ... is
    overwriting input ... that was created by layer ... (shift)")."""
    network = hp.network
    bufs = {buf.producer: buf for buf in buffers(hp)}
    out = []
    for ll in range(len(network.layers)):
        if network.layers[ll].buffer_shift:
            out.append(ll)
            continue
        srcs = inputs_of(network, ll)
        if len(srcs) == 1 and srcs[0] in bufs and ll in bufs and not bufs[ll].streaming \
                and bufs[ll].collides(bufs[srcs[0]]):
            out.append(ll)
    return tuple(out)


# The FIFOs write processors 0-3 of each quadrant (HWC) or the first processor of each
# quadrant (CHW) (seed 000, "FIFOs"; vendor izer backend FIFO checks).
FIFO_PROCESSORS_HWC = 0x000F000F000F000F
FIFO_PROCESSORS_CHW = 0x0001000100010001


def _touches(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """The vendor's range test: both ends inclusive, so ranges that merely touch clash."""
    return a[0] <= b[1] and b[0] <= a[1]


def stream_register_diagnostics(hp: HwPlacement) -> list[Diagnostic]:
    """What a streaming placement needs whatever its offsets (seed 000 "FIFOs",
    "Streaming Mode"; vendor izer backend facts): the input on the FIFO processors, at
    most 16 HWC / 4 CHW input channels, and the stream start, deltas, volume offset and
    rollover within their register fields: the values the register emitter writes, from
    the same hardware view under the conversion's choices (--no-pipeline changes the
    second delta)."""
    placement, network, hw = hp.placement, hp.network, hp.view
    k = stream_count(placement)
    if not k:
        return []
    from ..errors import Ai8xError
    from .streaming import stream1, stream2, stream_values

    diags: list[Diagnostic] = []
    first, lay0 = placement.layers[0], network.layers[0]
    allowed = FIFO_PROCESSORS_CHW if first.big_data else FIFO_PROCESSORS_HWC
    if first.processor_map & ~allowed:
        diags.append(Diagnostic(
            "map.streaming", _where(network, 0),
            f"a streaming input arrives through the FIFOs, which write processors "
            f"{'0, 16, 32, 48 (CHW)' if first.big_data else '0-3, 16-19, 32-35, 48-51 (HWC)'}"
            f"; the map is {first.processor_map:#018x}",
            "place the input channels on the FIFO processors"))
    if lay0.input_channels > (4 if first.big_data else 16):
        diags.append(Diagnostic(
            "map.streaming", _where(network, 0),
            f"{lay0.input_channels} input channels; the FIFOs take at most 4 (CHW) or 16 "
            "(HWC)", "reduce the input channels or do not stream"))
    roll = hp.rollover
    for ll in range(k):
        where = _where(network, ll)
        try:
            sv = stream_values(hw, ll)
            stream1(hw, ll, sv)
            stream2(hw, ll, sv)
        except Ai8xError as err:
            diags += [Diagnostic("map.streaming", where, d.message, d.hint)
                      for d in err.diagnostics]
        if (roll[ll] or 0) >= 1 << hw.dev.regs.max_fbuf_bits:
            diags.append(Diagnostic("map.streaming", where,
                                    f"streaming rollover {roll[ll]} exceeds the device limit "
                                    f"of {(1 << hw.dev.regs.max_fbuf_bits) - 1}",
                                    "use a narrower input or fewer streaming layers"))
    return diags


def _check_streaming(hp: HwPlacement) -> list[Diagnostic]:
    """The vendor's checks of a streaming network (seed 000 "Streaming Mode", "FIFOs";
    izer backend facts): `stream_register_diagnostics`, every circular buffer inside its
    instance, no two circular buffers of the streaming layers in a common memory instance
    at touching offsets, the last streaming layer's output clear of them, and a layer
    whose input and output processors overlap keeping its rollover clear of its output."""
    placement, network, facts = hp.placement, hp.network, hp.device
    k = stream_count(placement)
    if not k:
        return []
    diags = stream_register_diagnostics(hp)
    roll = hp.rollover
    held: list[tuple[int, tuple[int, int], int]] = []  # (layer, byte range, instances)
    for ll in range(k):
        lay, pl, words = network.layers[ll], placement.layers[ll], roll[ll] or 0
        where = _where(network, ll)
        buf = (pl.in_offset, pl.in_offset + 4 * words)
        if buf[1] >= facts.data_instance_bytes:
            diags.append(Diagnostic(
                "map.streaming", where,
                f"the circular input buffer ({words} words at {pl.in_offset:#x}) reaches the "
                f"end of the {facts.data_instance_bytes:#x}-byte data memory instance",
                "lower `in_offset` of this streaming layer"))
        ignore = output_ignore(lay)
        if pl.processor_map & pl.output_processor_map:
            # input and output share processors: the rollover must stay clear
            if pl.in_offset < pl.out_offset - ignore:
                clash = buf[1] >= pl.out_offset - ignore
            else:
                clash = pl.out_offset + 4 * words >= pl.in_offset or ll == len(
                    network.layers) - 1 and pl.out_offset + output_bytes(lay) >= pl.in_offset
            if clash:
                diags.append(Diagnostic(
                    "map.streaming", where,
                    f"the circular input buffer ({words} words at {pl.in_offset:#x}) and the "
                    f"output at {pl.out_offset:#x} overlap on shared processors",
                    "move `out_offset` away from the input buffer"))
        inst = instances(pl.processor_map)
        for other, obuf, oinst in held:
            if oinst & inst and _touches(buf, obuf):
                diags.append(Diagnostic(
                    "map.streaming", where,
                    f"the circular input buffer ({buf[0]:#x}-{buf[1]:#x}) overlaps the one of "
                    f"{_where(network, other)} ({obuf[0]:#x}-{obuf[1]:#x}) in a shared memory "
                    "instance", "give the streaming layers separate offsets or instances"))
        held.append((ll, buf, inst))
    return diags + streaming_output_clear(hp)


def _stream_buffers(hp: HwPlacement) -> list[tuple[int, tuple[int, int], int]]:
    """(layer, byte range in its memory instances, instance mask) of the circular input
    buffer of every streaming layer: `in_offset` to `in_offset` + 4 * rollover, both ends
    counted (the vendor's range test), on the instances its input processors use."""
    placement, roll = hp.placement, hp.rollover
    return [(ll, (pl.in_offset, pl.in_offset + 4 * (roll[ll] or 0)),
             instances(pl.processor_map))
            for ll, pl in enumerate(placement.layers[:stream_count(placement)])]


def streaming_output_clear(hp: HwPlacement) -> list[Diagnostic]:
    """While the streaming layers run, every one of them reads its input from a circular
    buffer that the FIFO or the layer before it keeps refilling; the output of the last
    streaming layer is written at the same time and must not land in any of those
    buffers' memory instances and addresses, or it overwrites input that is still to be
    read (seed 000, "Streaming Mode"; the vendor tool stops with "The output ... overlaps
    streaming buffer for layer ...")."""
    placement, network = hp.placement, hp.network
    k = stream_count(placement)
    if not k:
        return []
    last, lay = placement.layers[k - 1], network.layers[k - 1]
    h, w = lay.output_dim
    end = last.out_offset + (h * w + output_pad(lay)) * 4 * lay.output_width // 8
    if last.write_gap:
        # written interleaved (an element-wise operand): the slots spread further
        end += (end - last.out_offset - 4) * last.write_gap
    inst = instances(last.output_processor_map)
    diags = []
    for other, obuf, oinst in _stream_buffers(hp):
        if oinst & inst and _touches((last.out_offset, end), obuf):
            diags.append(Diagnostic(
                "map.streaming-overlap", _where(network, k - 1),
                f"the output of the last streaming layer (bytes {last.out_offset:#06x}-"
                f"{end:#06x}, output processors {last.output_processor_map:#018x}) overlaps "
                f"the circular input buffer of {_where(network, other)} (bytes "
                f"{obuf[0]:#06x}-{obuf[1]:#06x}, processors "
                f"{placement.layers[other].processor_map:#018x}) in a shared memory "
                "instance; the streaming layers would overwrite input they still read",
                f"set `out_offset` of layer `{lay.name}` to {obuf[1] + 4:#06x} or above, or "
                f"low enough that the output ends before {obuf[0]:#06x}, or use other "
                "output processors"))
    return diags


# The rules a sidecar's own placement is held to before anything is emitted: what the
# vendor tool, too, refuses for any mapping, and a data buffer overwritten between
# inferences, which the vendor's single-inference known answer cannot show (each
# function's docstring is the reason).
SIDECAR_RULES = (streaming_output_clear, read_gap_supported, buffer_kept)


def check_sidecar_placement(hp: HwPlacement) -> list[Diagnostic]:
    """Every SIDECAR_RULES violation of a (examined) placement read from a sidecar."""
    return [d for rule in SIDECAR_RULES for d in rule(hp)]
