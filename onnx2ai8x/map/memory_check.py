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
from types import MappingProxyType

from ..errors import Diagnostic
from ..network import OP_CONV1D, OP_NONE, Layer, Network
from ..placement import Placement

MAX_PROC = 64
P_SHARED = 4  # processors per data-memory instance
P_NUMPRO = 16  # processors per quadrant
INPUT = -1  # in_sequences value of the network input


@dataclass(frozen=True)
class MemoryFacts:
    """The memory sizes of one device (see module docstring)."""

    name: str
    data_bytes: int  # per data-memory instance
    kernel_columns: int  # per processor
    kernel_columns_first: int  # the first processor of each quadrant
    bias_bytes: int  # per quadrant
    max_layers: int


_FACTS = MappingProxyType({
    "MAX78000": MemoryFacts("MAX78000", 0x8000, 768, 768, 512, 32),
    "MAX78002": MemoryFacts("MAX78002", 0x14000, 4096, 5120, 2048, 128),
})
_ALIASES = MappingProxyType({"AI85": "MAX78000", "AI87": "MAX78002", "85": "MAX78000",
                             "87": "MAX78002"})


def device_name(device: object) -> str:
    """The canonical device name of a name or a Device record (anything with `.name`)."""
    name = str(getattr(device, "name", device)).upper()
    return _ALIASES.get(name, name)


def memory_facts(device: object) -> MemoryFacts:
    from ..errors import EXIT_USAGE, Ai8xError

    name = device_name(device)
    if name not in _FACTS:
        raise Ai8xError("usage.device", str(device), "unknown device",
                        f"use one of {', '.join(_FACTS)}", exit_code=EXIT_USAGE)
    return _FACTS[name]


def popcount(x: int) -> int:
    return bin(x).count("1")


def ffs(x: int) -> int:
    return (x & -x).bit_length() - 1


def fls(x: int) -> int:
    return x.bit_length() - 1


def expand(channels: int) -> tuple[int, int]:
    """(passes, processors per pass) for `channels` (seed 000 "Multi-Pass": beyond 64
    channels the channels wrap in passes; the per-pass count rounds up to a multiple of 4
    so each pass fills whole memory instances)."""
    passes = max(1, (channels + MAX_PROC - 1) // MAX_PROC)
    per_pass = (channels + passes - 1) // passes
    if channels > MAX_PROC:
        per_pass = min((per_pass + P_SHARED - 1) & ~(P_SHARED - 1), MAX_PROC)
    return passes, per_pass


def instances(processor_map: int) -> int:
    """Bit mask of the data-memory instances a processor map touches."""
    out = 0
    for p in range(MAX_PROC):
        if processor_map >> p & 1:
            out |= 1 << (p // P_SHARED)
    return out


def lanes(processor_map: int, whole_words: bool) -> int:
    """Byte lanes written: in HWC each processor owns one byte of its instance's word, so
    data on different processors never collides; 32-bit output and CHW data fill whole
    words, i.e. every lane of the instances they touch."""
    if not whole_words:
        return processor_map
    out = 0
    inst = instances(processor_map)
    for i in range(MAX_PROC // P_SHARED):
        if inst >> i & 1:
            out |= 0xF << (P_SHARED * i)
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
            if src == INPUT or src != n - 1 and last[src] == n:
                last[src] = ll
            elif src != n - 1:
                last[src] = max(last[src], ll)
    return last


def output_pad(layer: Layer) -> int:
    """Extra output words of a long-dilation Conv1d run on the Conv2d hardware."""
    dil, k = layer.dilation[0], layer.kernel_size[0]
    if layer.operator == OP_CONV1D and dil > 1 and (k - 1) * dil >= 9:
        rows = (layer.input_dim[0] + dil - 1) // dil
        return rows * dil - layer.output_dim[0]
    return 0


def output_ignore(layer: Layer) -> int:
    """Bytes a long-dilation 3-tap Conv1d writes below its `out_offset` (vendor rule)."""
    dil, k = layer.dilation[0], layer.kernel_size[0]
    if layer.operator == OP_CONV1D and dil > 1 and (k - 1) * dil >= 9 and k == 3:
        return 4 * dil * expand(layer.output_channels)[0]
    return 0


def output_bytes(layer: Layer) -> int:
    """Bytes per instance of a layer's output (HWC, one word per pixel per pass)."""
    h, w = layer.output_dim
    passes = expand(layer.output_channels)[0]
    return (h * w + output_pad(layer)) * passes * 4 * layer.output_width // 8


def input_bytes(network: Network, ll: int, big_data: bool) -> int:
    """Bytes per instance the layer reads (all operands), vendor's in_size rule."""
    lay = network.layers[ll]
    h, w = lay.input_dim
    passes = expand(lay.input_channels)[0]
    return h * w * passes * lay.operands * (1 if big_data else 4)


def kernel_columns(layer: Layer, output_processor_map: int) -> int:
    """Kernel-memory columns the layer takes in each of its input processors.

    Kernels per processor: one per output processor column (from the first to the last
    output processor, plus the columns skipped inside the first instance) per output pass
    and per input pass; a flattened layer holds one row per input pixel and pass. Packed
    into 72-bit columns with narrow weights padded to whole bytes (izer/kernels.py).
    """
    if layer.weights is None or layer.operator == OP_NONE:
        return 0
    omap = output_processor_map or (1 << expand(layer.output_channels)[1]) - 1
    passes_in, thresh_in = expand(layer.input_channels)
    passes_out = expand(layer.output_channels)[0]
    start_col = ffs(omap) % P_SHARED
    first = ffs(omap) - (start_col if passes_out > 1 else 0)
    in_exp = 1 if layer.flatten else passes_in
    kc = (1 + fls(omap) - first) * passes_out * in_exp if layer.conv_groups == 1 else in_exp
    if layer.flatten:
        rows = layer.input_channels * layer.pooled_dim[0] * layer.pooled_dim[1] // thresh_in
        kc = kc * rows - (passes_out * popcount(omap) - layer.output_channels) * rows
    ksize = layer.kernel_size[0] * layer.kernel_size[1]
    bits = abs(layer.quantization) or 8
    qfactor = 8 // bits
    res = (kc % qfactor) * ksize * (qfactor - 1)
    return (kc * ksize * bits + res + 71) // 72


def kernel_capacity(facts: MemoryFacts, proc: int) -> int:
    return facts.kernel_columns_first if proc % P_NUMPRO == 0 else facts.kernel_columns


def place_kernels(network: Network, maps: list[tuple[int, int]], facts: MemoryFacts,
                  order: list[int] | None = None) -> tuple[list[int | None], list[int]]:
    """Greedy kernel-memory layout: each layer at the lowest column free in all of its
    input processors (the vendor also gives a layer one column range across its
    processors). Returns (first column per layer or None if it does not fit, columns
    used per processor)."""
    used = [0] * MAX_PROC  # next free column per processor (layers never share columns)
    busy: list[list[tuple[int, int]]] = [[] for _ in range(MAX_PROC)]
    start: list[int | None] = [None] * len(network.layers)
    for ll in order if order is not None else range(len(network.layers)):
        pmap, omap = maps[ll]
        length = kernel_columns(network.layers[ll], omap)
        if length == 0:
            start[ll] = 0
            continue
        procs = [p for p in range(MAX_PROC) if pmap >> p & 1]
        col = lowest_free(busy, procs, length)
        if col is None or any(col + length > kernel_capacity(facts, p) for p in procs):
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


def bias_fits(network: Network, facts: MemoryFacts, layers: list[int]) -> list[int]:
    """Layers whose bias finds no room: first-fit, largest first, one quadrant per bias
    (the vendor's bias allocation, izer/kbias.py facts)."""
    free = [facts.bias_bytes] * 4
    need = sorted(((network.layers[ll].output_channels, ll) for ll in layers
                   if network.layers[ll].bias_hw is not None
                   or network.layers[ll].bias is not None), key=lambda t: (-t[0], t[1]))
    missing = []
    for size, ll in need:
        for g in range(4):
            if free[g] >= size:
                free[g] -= size
                break
        else:
            missing.append(ll)
    return sorted(missing)


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

    def collides(self, other: Buffer) -> bool:
        """Do the two buffers write a common byte?"""
        if not self.lanes & other.lanes or not (self.start < other.end
                                                 and other.start < self.end):
            return False
        if self.gap and self.gap == other.gap:
            # interleaved element-wise operands: distinct slots never collide
            return (self.start - other.start) % (4 * (self.gap + 1)) == 0
        return True


def buffers(network: Network, placement: Placement) -> list[Buffer]:
    """Every layer output and the network input with its memory range and live range."""
    last = last_use(network)
    first = placement.layers[0] if placement.layers else None
    out = []
    if first is not None:
        big = first.big_data
        size = input_bytes(network, 0, big)
        if network.layers[0].in_sequences not in (None, (INPUT,)):
            size = _network_input_bytes(network, big)
        if first.streaming:
            # A streaming input arrives through the FIFO into a circular buffer.
            size = stream_buffer_bytes(network, 0)
        out.append(Buffer(INPUT, lanes(first.processor_map, big), first.in_offset,
                          first.in_offset + _round4(size), -1, last[INPUT]))
    for ll, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        size = output_bytes(lay)
        if pl.write_gap:
            # every slot is followed by write_gap unused slots
            size = size * (pl.write_gap + 1) - 4 * pl.write_gap
        nxt = placement.layers[ll + 1] if ll + 1 < len(placement.layers) else None
        if pl.streaming and nxt is not None and nxt.streaming:
            size = stream_buffer_bytes(network, ll + 1)  # circular buffer of the reader
        start = pl.out_offset - output_ignore(lay)
        dies = len(network.layers) if pl.output_layer else last[ll]
        out.append(Buffer(ll, lanes(pl.output_processor_map, lay.output_width != 8), start,
                          pl.out_offset + _round4(size), ll, dies, pl.write_gap))
    return out


def stream_buffer_bytes(network: Network, ll: int) -> int:
    """Bytes per memory instance of streaming layer ll's circular input buffer.

    The vendor's rollover (MAX78000 rule, words): prefill + (pool rows - 1) * columns +
    max(stride, pool stride, pool), where the prefill is pad * (columns + 2 pad) +
    row_inc * (columns + 2 pad) + pad + 2 col_inc (times the operands), rounded to the
    passes (seed 000, "Streaming Mode"; izer backend, "Rollover"). The MAX78002's rule
    differs in detail but stays below this bound with the margin of two extra rows.
    """
    lay = network.layers[ll]
    rows, cols = lay.input_dim
    pad = lay.padding[1] if lay.operator != OP_CONV1D else 0
    row_inc = max(lay.pool[0] * lay.pool_dilation[0], lay.pool_stride[0])
    col_inc = max(lay.pool[1] * lay.pool_dilation[1], lay.pool_stride[1])
    width = cols + 2 * pad
    prefill = pad * width + (row_inc * width + pad + 2 * col_inc) * lay.operands
    words = prefill + (lay.pool[0] - 1) * cols + max(lay.stride[1], lay.pool_stride[1],
                                                     lay.pool[1])
    words += 2 * width  # margin: the MAX78002 rule and read-ahead
    passes = expand(lay.input_channels)[0]
    words = -(-words // passes) * passes
    return 4 * min(words, rows * cols * passes)


def _network_input_bytes(network: Network, big: bool) -> int:
    shape = network.input_shape
    c = shape[0]
    pixels = shape[1] * (shape[2] if len(shape) > 2 else 1)
    return pixels * expand(c)[0] * (1 if big else 4)


def _round4(x: int) -> int:
    return (x + 3) & ~3


def _where(network: Network, ll: int) -> str:
    return f"layer `{network.layers[ll].name}`" if ll >= 0 else "network input"


def check_placement(network: Network, placement: Placement,
                    device: object | None = None) -> list[Diagnostic]:
    """Every violation of the device's processor and memory limits (empty: all fit)."""
    facts = memory_facts(device if device is not None else placement.device)
    diags: list[Diagnostic] = []
    n = len(network.layers)
    if len(placement.layers) != n:
        return [Diagnostic("map.check", "placement",
                           f"{len(placement.layers)} placed layers for {n} network layers",
                           "place every layer of the network")]
    if n > facts.max_layers:
        diags.append(Diagnostic("map.layers", "network",
                                f"{n} layers, {facts.name} runs at most {facts.max_layers}",
                                "merge layers or use a larger device"))
    for ll, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        where = _where(network, ll)
        passes, per_pass = expand(lay.input_channels)
        if popcount(pl.processor_map) != per_pass:
            diags.append(Diagnostic(
                "map.processors", where,
                f"{lay.input_channels} input channels need {per_pass} processors per pass "
                f"({passes} pass(es)); the map {pl.processor_map:#018x} enables "
                f"{popcount(pl.processor_map)}", f"enable exactly {per_pass} processors"))
        opasses, oper = expand(lay.output_channels)
        if popcount(pl.output_processor_map) != oper:
            diags.append(Diagnostic(
                "map.processors", where,
                f"{lay.output_channels} output channels need {oper} output processors; "
                f"the map {pl.output_processor_map:#018x} enables "
                f"{popcount(pl.output_processor_map)}", f"enable exactly {oper} processors"))
        if pl.big_data:
            if ll != 0:
                diags.append(Diagnostic("map.chw", where, "only the first layer reads CHW data",
                                        "use HWC (remove `data_format: CHW`)"))
            elif any(popcount((pl.processor_map >> (4 * i)) & 0xF) > 1 for i in range(16)):
                diags.append(Diagnostic(
                    "map.chw", where, "CHW input needs one channel per memory instance "
                    f"(processors 0, 4, 8, ...), the map is {pl.processor_map:#018x}",
                    "enable one processor out of each group of four"))
        in_size = input_bytes(network, ll, pl.big_data)
        if not pl.streaming and pl.in_offset + in_size > facts.data_bytes:
            diags.append(Diagnostic(
                "map.data-memory", where,
                f"the input ({in_size} bytes per instance) at offset {pl.in_offset:#x} ends "
                f"past the {facts.data_bytes:#x}-byte data memory instance",
                "use a smaller input, a lower `in_offset`, or streaming"))
        out_size = output_bytes(lay) * (pl.write_gap + 1)
        if not 0 <= pl.out_offset or pl.out_offset + out_size - 4 * pl.write_gap \
                > facts.data_bytes and (not pl.streaming or ll == n - 1):
            diags.append(Diagnostic(
                "map.data-memory", where,
                f"the output ({out_size} bytes per instance) at offset {pl.out_offset:#x} "
                f"ends past the {facts.data_bytes:#x}-byte data memory instance",
                "lower `out_offset` or reduce the output size"))
        if pl.out_offset % 4 or pl.in_offset % 4:
            diags.append(Diagnostic("map.alignment", where,
                                    "data offsets must be multiples of 4 (one word)",
                                    "round `in_offset`/`out_offset` to a multiple of 4"))
    diags += _check_liveness(network, placement)
    exact = _exact_weight_memory(network, placement)
    if exact is not None:
        return diags + exact
    maps = [(pl.processor_map, pl.output_processor_map) for pl in placement.layers]
    start, _ = place_kernels(network, maps, facts)
    for ll, col in enumerate(start):
        if col is None:
            lay = network.layers[ll]
            diags.append(Diagnostic(
                "map.kernel-memory", _where(network, ll),
                f"the layer's {kernel_columns(lay, maps[ll][1])} kernel columns per processor "
                f"do not fit in the remaining kernel memory ({facts.kernel_columns} columns "
                f"per processor on {facts.name})",
                "spread layers over other processors, use fewer weight bits, or a larger "
                "device"))
    for ll in bias_fits(network, facts, list(range(n))):
        diags.append(Diagnostic(
            "map.bias-memory", _where(network, ll),
            f"{network.layers[ll].output_channels} bias values do not fit in any quadrant's "
            f"remaining bias memory ({facts.bias_bytes} bytes per quadrant)",
            "drop the bias of some layers or use a larger device"))
    return diags


def _exact_weight_memory(network: Network, placement: Placement) -> list[Diagnostic] | None:
    """Kernel and bias memory checked with the emission's allocators (the vendor's exact
    layout, onnx2ai8x.map.kernels / onnx2ai8x.map.bias) when they are available; None
    when they are not (the estimates above are used instead)."""
    from ..errors import Ai8xError

    try:
        from .bias import allocate_bias  # type: ignore[import-not-found]
        from .kernels import allocate_kernels  # type: ignore[import-not-found]
    except ImportError:
        return None
    out = []
    for code, alloc in (("map.kernel-memory", allocate_kernels), ("map.bias-memory",
                                                                   allocate_bias)):
        try:
            alloc(network, placement)
        except Ai8xError as err:
            out += [Diagnostic(code, d.where, d.message, d.hint) for d in err.diagnostics]
        except Exception:  # noqa: BLE001 - an allocator defect: fall back to the estimate
            return None
    return out


def _check_liveness(network: Network, placement: Placement) -> list[Diagnostic]:
    """No output may overwrite data a later layer still reads (live ranges).

    Streaming layers keep only a rolling window of rows in a circular buffer (seed 000,
    "Streaming Mode"), so their buffers are not whole tensors; they are not checked here.
    """
    bufs = buffers(network, placement)
    n = len(network.layers)

    def streams(ll: int) -> bool:
        return 0 <= ll < n and placement.layers[ll].streaming

    diags = []
    for b in bufs:
        if b.producer < 0 or streams(b.producer):
            continue
        for a in bufs:
            if a is b or a.born >= b.born or streams(a.producer) or streams(a.dies):
                continue
            if b.born <= a.dies and b.collides(a):
                diags.append(Diagnostic(
                    "map.overwrite", _where(network, b.producer),
                    f"the output (bytes {b.start:#x}-{b.end - 1:#x}) overwrites the data of "
                    f"{_where(network, a.producer)} (bytes {a.start:#x}-{a.end - 1:#x}) "
                    f"which layer `{network.layers[min(a.dies, len(network.layers) - 1)].name}`"
                    " still reads", "move `out_offset` to a free region"))
    return diags
