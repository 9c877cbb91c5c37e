"""Write a Placement as a sidecar in the vendor's network-description language (seed 004):
the writer beside the reader (sidecar/parse.py), so one package knows the format.

The file is what a user would have written by hand for this network and mapping: one
entry per layer with the operation, its geometry, and every mapping decision, each
explained by a comment. Reading it back (onnx2ai8x.sidecar) gives the same Placement, so
an automatic mapping can be saved, edited and fed back with `--sidecar`.

Keys are written only where the vendor's default would differ (seed 004 lists the
defaults: `in_offset` is the previous layer's `out_offset`, `output_processors` are the
next layer's `processors`, the final output is packed from processor 0, Conv2d is 3x3
with pad 1, ...), except `processors` and `out_offset`, which every layer states.
The text is deterministic: same input, same bytes.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..devices import PROCESSORS
from ..map.hw import multipass
from ..network import (
    ACT_ABS,
    ACT_RELU,
    DATA_BUFFER,
    ELTWISE_NAMES,
    ELTWISE_NONE,
    Layer,
    Network,
    Op,
    unique_name,
)
from ..placement import Placement

_ACTS = {ACT_RELU: "ReLU", ACT_ABS: "Abs"}

def _mask(x: int) -> str:
    return f"0x{x:016x}"


def _pair(p: tuple[int, int], one_d: bool) -> str:
    if one_d or p[0] == p[1]:
        return str(p[0])
    return f"[{p[0]}, {p[1]}]"


def _procs(x: int) -> str:
    """Processor ranges of a mask, e.g. `0-15, 32-47`."""
    out, p = [], 0
    while p < PROCESSORS:
        if x >> p & 1:
            q = p
            while q + 1 < PROCESSORS and x >> (q + 1) & 1:
                q += 1
            out.append(f"{p}" if p == q else f"{p}-{q}")
            p = q + 1
        else:
            p += 1
    return ", ".join(out) or "none"


def _geometry(lay: Layer) -> list[tuple[str, str]]:
    """The operation keys of one layer (what it computes)."""
    one_d = lay.operator.one_d
    keys: list[tuple[str, str]] = [("op", lay.operator.sidecar_word)]
    if lay.operator == Op.CONV2D:
        keys.append(("kernel_size", f"{lay.kernel_size[0]}x{lay.kernel_size[1]}"))
    elif lay.operator == Op.CONV1D:
        keys.append(("kernel_size", str(lay.kernel_size[0])))
    if lay.operator.convolution:
        keys.append(("pad", str(lay.padding[0])))
    if lay.dilation != (1, 1):
        keys.append(("dilation", _pair(lay.dilation, one_d)))
    if lay.conv_groups > 1:
        keys.append(("groups", str(lay.conv_groups)))
    if lay.operator.transposed and lay.output_padding != (1, 1):
        keys.append(("output_pad", str(lay.output_padding[0])))
    pooled = lay.pool != (1, 1) or lay.pool_stride != (1, 1)
    if pooled:
        keys.append(("avg_pool" if lay.pool_average else "max_pool", _pair(lay.pool, one_d)))
        keys.append(("pool_stride", _pair(lay.pool_stride, one_d)))
        if lay.pool_dilation != (1, 1):
            keys.append(("pool_dilation", _pair(lay.pool_dilation, one_d)))
    if lay.eltwise != ELTWISE_NONE:
        keys.append(("eltwise", ELTWISE_NAMES[lay.eltwise]))
        if lay.operands != 2:
            keys.append(("operands", str(lay.operands)))
        if not lay.pool_first and pooled:
            keys.append(("pool_first", "false"))
    if lay.flatten:
        keys.append(("flatten", "true"))
    if lay.activation in _ACTS:
        keys.append(("activate", _ACTS[lay.activation]))
    if lay.weights is not None and lay.operator.has_weights:
        q = lay.quantization or 8
        if q != 8:
            keys.append(("quantization", "binary" if q == -1 else str(q)))
        # The sidecar's shift excludes the implicit 8 - |bits| (seed 004, output_shift).
        keys.append(("output_shift", str(lay.output_shift - (8 - abs(q)))))
    if lay.output_width != 8:
        keys.append(("output_width", str(lay.output_width)))
    return keys


def _explain(placement: Placement, ll: int) -> list[str]:
    """Why each mapping decision of layer `ll` is what it is."""
    network = placement.network
    lay, pl = network.layers[ll], placement.layers[ll]
    passes, per_pass = multipass(lay.input_channels)
    notes = [f"{lay.input_channels} input channel(s) on processors {_procs(pl.processor_map)}"
             f" ({per_pass} per pass, {passes} pass{'es' if passes > 1 else ''})"]
    if pl.big_data:
        notes.append("CHW input: one channel per memory instance, four pixels per word "
                     "(HWC would not fit, or was not chosen)")
    if pl.write_gap:
        notes.append(f"write_gap {pl.write_gap}: output interleaved with the other "
                     "element-wise operand(s) or concatenated part(s) a later layer reads")
    if pl.input_skip:
        notes.append(f"read_gap {pl.input_skip}: reads its input where it was written "
                     "interleaved for a later layer, skipping the other operands' words "
                     "(no copy needed)")
    if pl.buffer_shift:
        notes.append(f"buffer_shift {pl.buffer_shift}: drops the buffer's oldest "
                     f"{pl.buffer_shift} position(s), reading from position "
                     f"{pl.buffer_shift} on and writing position 0 (the buffer's processors)")
    elif pl.in_sequences == (DATA_BUFFER,):
        notes.append("reads the data buffer where it lives (position 0)")
    if pl.buffer_insert:
        notes.append(f"buffer_insert {pl.buffer_insert}: appends its output as the buffer's "
                     f"last {pl.buffer_insert} position(s)")
    seqs = pl.in_sequences
    if seqs is not None and len(seqs) > 1 and lay.eltwise == ELTWISE_NONE:
        notes.append("concatenated inputs sit side by side so this layer reads them as one"
                     if passes == 1 else "concatenated inputs interleaved, one word per "
                     "pixel each, so this layer reads one part per pass")
    notes.append(f"output {lay.output_channels} channel(s) to processors "
                 f"{_procs(pl.output_processor_map)} at {pl.out_offset:#06x} (kept clear of "
                 "data still needed by later layers)")
    return notes


def _arriving_dim(placement: Placement, ll: int) -> tuple[int, int]:
    """The dimensions the resolver gives a layer without `in_dim`: its (first) input's."""
    network = placement.network
    pl = placement.layers[ll]
    if pl.in_sequences is not None:
        src = pl.in_sequences[0]
    else:
        src = pl.prev_sequence if ll > 0 else -1
    if src == -1:
        shape = network.input_shape
        return (shape[1], shape[2] if len(shape) > 2 else 1)
    return tuple(network.layers[src].output_dim)  # type: ignore[return-value]


def buffer_word(network: Network) -> str | None:
    """The data buffer's name as the sidecar spells it (None: no buffer). The vendor tool
    matches a lower-cased `in_sequences` reference against the name as written, so the
    name is written lower-case, and kept apart from the layer names it shares the
    namespace with."""
    if network.data_buffer is None:
        return None
    taken = {lay.name.lower() for lay in network.layers} | {"input", "stop"}
    return unique_name(network.data_buffer.name.lower(), taken)


def _buffer_lines(placement: Placement) -> list[str]:
    """The global `data_buffer` entry (seed 004; seed 000 Rolling Buffers)."""
    network = placement.network
    buf, where = network.data_buffer, placement.data_buffer
    if buf is None or where is None:
        return []
    return [
        "# Data buffer: kept in data memory from one inference to the next, one channel per",
        f"# processor ({_procs(where.processors)}), position p at {where.offset:#06x} + 4p; "
        "no other data is placed there.",
        "data_buffer:",
        f"  - processors: {_mask(where.processors)}",
        f"    dim: {buf.length}",
        f"    channels: {buf.channels}",
        f"    offset: {where.offset:#06x}",
        f"    name: {buffer_word(network)}",
        "",
    ]


def implied_flags(placement: Placement, avg_pool_rounding: str | None = None,
                  overlapping: Sequence[int] = ()) -> tuple[tuple[str, str], ...]:
    """Command-line options the network needs that the YAML language has no key for:
    (flag, why). The vendor tool must be given them to build the same network.
    `overlapping`: the layers that write over their own input
    (map/memory_check.overlapping_layers)."""
    flags = []
    if placement.layers and placement.layers[0].streaming:
        flags.append(("--fifo", "the first layer streams, so its input arrives through the "
                                "FIFOs (seed 000, Streaming Mode)"))
    if avg_pool_rounding == "nearest":
        flags.append(("--avg-pool-rounding", "the model rounds average pooling to nearest"))
    if placement.data_buffer is not None:
        flags.append(("--zero-sram", "the data buffer must hold zeros before the first "
                                     "inference (seed 000, Rolling Buffers)"))
    if overlapping:
        names = ", ".join(placement.network.layers[ll].name for ll in overlapping)
        flags.append(("--overlap-data", f"layers write over their own input ({names}); "
                                        "the vendor tool refuses that without it"))
    return tuple(flags)


def _provenance(origin: str | None, pins: Sequence[str] | None) -> str:
    """The header line saying which keys were given (and kept) and which chosen here:
    only what was kept is claimed (issue 35)."""
    tail = "; edit and pass back with --sidecar."
    if origin is None:
        return "# Every mapping key below was chosen by onnx2ai8x" + tail
    if pins is None:
        return (f"# Mapping keys given in {origin} are kept (checked by onnx2ai8x), the rest "
                "were chosen by onnx2ai8x" + tail)
    if not pins:
        return (f"# {origin} pinned no `processors`, `output_processors` or `out_offset`: "
                "every mapping key below was chosen by onnx2ai8x" + tail)
    return (f"# The pins of {origin} are kept ({', '.join(pins)}), every other mapping key "
            "was chosen by onnx2ai8x" + tail)


def write_sidecar(placement: Placement, *,
                  reasons: Mapping[str, str | Sequence[str]] | None = None,
                  flags: Sequence[tuple[str, str]] = (), origin: str | None = None,
                  pins: Sequence[str] | None = None) -> str:
    """The sidecar YAML text for `placement` on its device (vendor syntax,
    deterministic).

    `reasons` adds comment lines per layer name (why the mapper chose something);
    `flags` (see implied_flags) are stated in the header. `origin`: the sidecar the
    placement was read from (its keys are kept, the header says so instead of claiming
    every key was chosen here); `pins`: when it was a partial sidecar, the pins of it
    that were kept (the header names them, or says that it pinned nothing).
    """
    network = placement.network
    dev = placement.device.name
    reasons = reasons or {}
    n = len(network.layers)
    lines = [
        "---",
        f"# Network `{network.name}` placed on {dev}.",
        _provenance(origin, pins),
    ]
    if any(lay.weights is not None and abs(lay.quantization or 8) != 8
           for lay in network.layers):
        # the annotated ONNX and the report state the total shift; say why they differ
        lines.append("# `output_shift` excludes the implicit 8 - |quantization| of narrow "
                     "weights (seed 004); the annotated ONNX states the total.")
    if flags:
        lines.append("# Build it with these command-line options (the YAML has no key for "
                     "them):")
        lines += [f"#   {flag}  ({why})" for flag, why in flags]
    lines += [
        f"arch: {network.name}",
        f"dataset: {network.name}",
        "",
        *_buffer_lines(placement),
        "layers:",
    ]
    places = placement.layers
    # Without any `output: true` the vendor takes the final layer as the only output; once
    # one layer says it, only the marked layers are outputs (seed 004, `output`), so
    # either no layer is marked or every output layer is, the final one included.
    outputs = [ll for ll, pl in enumerate(places) if pl.output_layer]
    mark_outputs = outputs != [placement.final_layer]
    for ll, (lay, pl) in enumerate(zip(network.layers, places, strict=True)):
        extra = reasons.get(lay.name, ())
        extra = [extra] if isinstance(extra, str) else list(extra)
        lines.append(f"  # Layer {ll}: {lay.operator_name}, "
                     f"{lay.input_channels}x{lay.input_dim[0]}x{lay.input_dim[1]} -> "
                     f"{lay.output_channels}x{lay.output_dim[0]}x{lay.output_dim[1]}")
        lines += [f"  # {note}" for note in _explain(placement, ll) + extra]
        entry: list[tuple[str, str]] = [("name", lay.name)]
        reads_buffer = pl.in_sequences == (DATA_BUFFER,)
        if reads_buffer:
            # the vendor tool recognises a buffer reader by this exact form
            entry.append(("in_sequences", str(buffer_word(network))))
        elif pl.in_sequences is not None:
            refs = ["input" if s == -1 else network.layers[s].name for s in pl.in_sequences]
            entry.append(("in_sequences", f"[{', '.join(refs)}]"))
        entry.append(("processors", _mask(pl.processor_map)))
        # Defaults the resolver applies when a key is absent (seed 004).
        default_in = 0 if ll == 0 else places[pl.prev_sequence if pl.prev_sequence >= 0
                                              else ll - 1].out_offset
        if pl.in_offset != default_in or reads_buffer:
            # a buffer reader states where it reads (the vendor requires it)
            entry.append(("in_offset", f"{pl.in_offset:#06x}"))
        entry.append(("out_offset", f"{pl.out_offset:#06x}"))
        nxt = pl.next_sequence if pl.next_sequence is not None else ll + 1
        if 0 <= nxt < n and nxt != ll:
            default_out = places[nxt].processor_map
        else:
            default_out = (1 << multipass(lay.output_channels)[1]) - 1
        if pl.output_processor_map != default_out:
            entry.append(("output_processors", _mask(pl.output_processor_map)))
        if pl.write_gap:
            entry.append(("write_gap", str(pl.write_gap)))
        if pl.input_skip:
            entry.append(("read_gap", str(pl.input_skip)))
        if pl.big_data:
            entry.append(("data_format", "CHW"))
        if pl.streaming:
            entry.append(("streaming", "true"))
        if pl.output_layer and mark_outputs:
            entry.append(("output", "true"))
        if pl.next_sequence not in (None, ll + 1) and not (ll == n - 1
                                                            and pl.next_sequence == -1):
            entry.append(("next_sequence", "stop" if pl.next_sequence == -1
                          else network.layers[pl.next_sequence].name))
        if reads_buffer:
            # no producer layer to take them from: the vendor requires both
            entry.append(("in_dim", str(lay.input_dim[0]) if lay.input_dim[1] == 1
                          else f"[{lay.input_dim[0]}, {lay.input_dim[1]}]"))
            entry.append(("in_channels", str(lay.input_channels)))
        elif lay.input_dim != _arriving_dim(placement, ll):
            # the data is reinterpreted (same pixel count, other shape)
            entry.append(("in_dim", f"[{lay.input_dim[0]}, {lay.input_dim[1]}]"))
        if pl.buffer_shift:
            entry.append(("buffer_shift", str(pl.buffer_shift)))
        if pl.buffer_insert:
            entry.append(("buffer_insert", str(pl.buffer_insert)))
        entry += _geometry(lay)
        for i, (key, value) in enumerate(entry):
            lines.append(f"  {'- ' if i == 0 else '  '}{key}: {value}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
