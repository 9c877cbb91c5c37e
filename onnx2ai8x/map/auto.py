"""Automatic placement: processors and data memory for a Network without a sidecar.

What the mapper decides and why (seed 000, "MAX78000 and MAX78002 Hardware and
Resources", "Data Memory", "Processors", "Multi-Pass", "HWC/CHW", "Kernel memory"):

* Processors. Each input channel of a layer runs on its own processor; beyond 64
  channels the channels wrap in passes and the per-pass count rounds up to a multiple
  of 4. The count is therefore fixed by the channel count; the mapper only chooses where
  the block of processors starts. A layer's kernels live in the kernel memory of its
  input processors, so the start is chosen where the layer's kernels land lowest in
  kernel memory (this spreads layers over the 64 processors and keeps room for later
  layers). Starts are multiples of 4: an output block that starts inside a memory
  instance costs extra kernels (and mask cycles) for the skipped columns.
* Cycles. The frame cycles of a layer (onnx2ai8x.map.latency) depend on the passes,
  pooling, kernel and the output channels the mask counter walks; with the channel
  count fixed, the only mapping choice that changes them is the alignment of the output
  block, which is why blocks start on instance boundaries. Passthrough and depthwise
  layers keep their data on the same processors (no data movement, broadcast mode).
* Data format. HWC (four channels per word) except for a first layer whose HWC input
  would not fit in one data memory instance: CHW (one channel per instance, four pixels
  per word) takes a quarter of the memory and needs at most 16 channels.
* Data memory. A layer's input offset is its producer's output offset. Outputs are
  placed first-fit at the lowest offset that overwrites no data still needed by a later
  layer (live ranges), in the byte lanes (processors) they use.
* Element-wise operands are written interleaved (`write_gap` = operands - 1, operand k
  at base + 4k: "each machine fetch gathers one operand", seed 004 "Residual
  Connections"). Another layer reading one operand alone (a residual block's first
  convolution) reads it there with `read_gap` = write_gap on the MAX78002 (seed 000
  "read_gap"; legalize/rewrite.py gives it a copy where it cannot). Concatenated inputs
  sit on consecutive processor blocks at one offset (single pass) or in consecutive
  passes at consecutive offsets (multi-pass), so the consumer sees them contiguous.
* Streaming ("Streaming Mode", "FIFOs"). When the data still does not fit (HWC and
  CHW tried), the first k layers stream, for the smallest k that fits (at most the
  device's streaming layer count, each streaming layer read only by the next one, none
  flattening, 1-D or dilated): the input arrives through the FIFOs into a circular
  buffer and every streaming layer reads a circular buffer its producer writes, so
  those buffers hold a few rows instead of whole frames. All streaming layers run at
  once, so their buffers and the last streaming layer's (whole) output are live
  together. Each buffer is exactly the rollover the project programs
  (`streaming.rollovers` of the candidate's hardware view), one word longer,
  and streaming buffers never share a memory instance at overlapping offsets: the
  vendor tests ranges with both ends inclusive and by instance, not by byte lane. The
  input is HWC on the FIFO processors (0-3 of each quadrant, at most 16 channels). The
  result must pass the checker's streaming rules and register limits, else the next k
  is tried. The project then loads the input through the FIFO (`--fifo` is implied; a
  placement says so by its first layer streaming). Streaming has no 1x1 path: a 1x1
  convolution that streams, or reads the last streaming layer's output, runs as a 3x3
  one with padding 1 (hw.runs_1x1_as_3x3; the vendor tool does the same, e.g. for its
  face-ID 112x112 sidecar), so the mapper counts its kernels at nine bytes each and a
  streaming one's padding as 1 (MAX78000: the last streaming layer must be padded).
* Data buffer (seed 000, "Rolling Buffers"). A network with a data buffer keeps it in
  data memory from one inference to the next, so it is placed before anything else and
  no other data ever shares its bytes: one channel per processor on the highest
  processors (starting on an instance boundary), its positions in the last words of
  each processor's memory (the vendor's own sidecar: processors 32-63, offset 0x7FC4 =
  0x8000 - 4 * 15 on MAX78000). The shift layer reads position k and writes position 0
  (its processors are the buffer's), the inserting layer writes the last k positions,
  and every other reader reads position 0.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..devices import (
    PROCESSORS,
    PROCESSORS_PER_MEMORY,
    PROCESSORS_PER_QUADRANT,
    QUADRANTS,
    Device,
)
from ..errors import Ai8xError, Diagnostic
from ..legalize.facts import reads_gapped, same_weights
from ..network import (
    DATA_BUFFER,
    ELTWISE_NONE,
    Network,
    output_layers,
)
from ..options import HwDecision, default_decision
from ..placement import BufferPlacement, LayerPlacement, Placement
from .hw import ffs, multipass, popcount, runs_1x1_as_3x3
from .lowered import HwNetwork, examine
from .memory_check import (
    INPUT,
    checked,
    in_place_margin,
    input_bytes,
    inputs_of,
    kernel_columns,
    lanes,
    last_use,
    later_input_readers,
    lowest_free,
    output_bytes,
    output_ignore,
    place_kernels,
    stream_register_diagnostics,
)

Hints = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class _Group:
    """One allocation in data memory: a layer output, the network input, or the
    interleaved/concatenated inputs of one consumer."""

    members: tuple[int, ...]  # producers (-1: network input)
    lanes: int
    size: int  # bytes, including bytes written below the first offset
    below: int  # bytes written below the offset (long-dilation Conv1d)
    born: int
    dies: int
    layout: str  # "single", "interleave", "sequential", "lanes", "buffer"
    member_size: int = 0
    # "lanes" (a concatenation at one offset): per member its byte lanes and the step
    # it is written, since each member's processors are only in use from then on
    parts: tuple[tuple[int, int], ...] = ()

    def meets(self, other: _Group) -> bool:
        """Do the two allocations share a byte lane while both are live?"""
        mine = self.parts or ((self.lanes, self.born),)
        theirs = other.parts or ((other.lanes, other.born),)
        return any(a & b and born_a <= other.dies and born_b <= self.dies
                   for a, born_a in mine for b, born_b in theirs)


def _block(start: int, width: int) -> int:
    return ((1 << width) - 1) << start


def _chw_map(channels: int) -> int:
    """One channel per memory instance: processors 0, 4, 8, ..."""
    out = 0
    for c in range(channels):
        out |= 1 << (PROCESSORS_PER_MEMORY * c)
    return out


def _fail(network: Network, ll: int, code: str, message: str, hint: str) -> Ai8xError:
    where = f"layer `{network.layers[ll].name}`" if ll >= 0 else "network input"
    return Ai8xError(code, where, message, hint)


def _hints_of(network: Network, partial: object) -> dict[int, dict[str, int]]:
    """Per layer index, the decisions a partial sidecar fixes."""
    out: dict[int, dict[str, int]] = {}
    if partial is None:
        return out
    names = {lay.name: i for i, lay in enumerate(network.layers)}
    for key, value in dict(partial).items():  # type: ignore[call-overload]
        ll = names.get(key) if not isinstance(key, int) else key
        if ll is None:
            raise Ai8xError("map.hint", f"hint `{key}`", "no layer of that name",
                            f"use one of {', '.join(sorted(names))}")
        out[ll] = {k: int(v) for k, v in dict(value).items()}
    return out


class _Mapper:
    """Mutable working state of one auto_place call (never shared between calls)."""

    def __init__(self, network: Network, facts: Device,
                 hints: dict[int, dict[str, int]], chw: bool = False,
                 stream: int = 0, overlap: bool = False, fifo: bool = False) -> None:
        self.net = network
        self.buffer = place_data_buffer(network, facts)
        # layers writing into the data buffer -> position they write (no memory of
        # their own: their output lives in the buffer)
        self.buffer_writers = _buffer_writers(network)
        self.fifo = fifo  # the input arrives through the FIFOs (HWC on their processors)
        self.stream = stream  # the first `stream` layers stream
        # layers may write over their own input where memory_check.in_place_margin
        # allows (tried only when the data does not fit otherwise)
        self.overlap = overlap
        self.facts = facts
        self.hints = hints
        self.n = len(network.layers)
        self.tensor: dict[int, int] = {}  # producer -> output processor map
        self.pmap = [0] * self.n
        self.busy: list[list[tuple[int, int]]] = [[] for _ in range(PROCESSORS)]
        # layer -> the block its input was preferred on (data that cannot move) where its
        # kernels did not fit: the reason a pass-through rule breaks, for the message
        self.moved: dict[int, int] = {}
        self.big_data = False
        self.want_chw = chw
        self.free_outputs: list[int] = []  # outputs nobody reads (block may move)
        # streaming: per layer the rollover words of its circular input buffer
        self.rollover: tuple[int | None, ...] = (None,) * self.n
        # per layer, the earlier layer whose identical weights it can reuse (a shared
        # head applied to several feature maps): on the same input processors the
        # kernels are stored once (vendor izer/kdedup.py)
        self.twin: list[int | None] = [
            next((j for j in range(ll) if same_weights(network.layers[j], lay)), None)
            for ll, lay in enumerate(network.layers)]

    # --- processors -------------------------------------------------------------------
    def channels_of(self, src: int) -> int:
        if src == INPUT:
            return self.net.input_shape[0]
        return self.net.layers[src].output_channels

    def columns(self, ll: int) -> int:
        """Kernel-memory columns of layer ll per input processor, as the hardware stores
        its kernels (a 1x1 convolution next to the streaming layers as 3x3 ones)."""
        lay = self.net.layers[ll]
        return kernel_columns(lay, (1 << multipass(lay.output_channels)[1]) - 1,
                              as_3x3=runs_1x1_as_3x3(self.facts, lay, ll, ll <= self.stream
                                                     and self.stream > 0))

    def kernel_cost(self, ll: int, pmap: int) -> int:
        """Lowest column end at which layer ll's kernels fit on `pmap` (big if none)."""
        length = self.columns(ll)
        if length == 0:
            return 0
        procs = [p for p in range(PROCESSORS) if pmap >> p & 1]
        col = lowest_free(self.busy, procs, length) or 0
        end = col + length
        if any(end > self.facts.kernel_words(p) for p in procs):
            return 1 << 20
        return end

    def commit_kernels(self, ll: int) -> None:
        twin = self.twin[ll]
        if twin is not None and self.pmap[twin] == self.pmap[ll]:
            return  # the twin's kernels serve this layer too
        length = self.columns(ll)
        if length == 0:
            return
        end = self.kernel_cost(ll, self.pmap[ll])
        if end >= 1 << 20:
            return  # reported by the final kernel-memory check
        for p in range(PROCESSORS):
            if self.pmap[ll] >> p & 1:
                self.busy[p].append((end - length, end))

    def choose(self, ll: int, width: int, prefer: int | None) -> int:
        """The processor block (start on an instance boundary) for layer ll's input."""
        if width > PROCESSORS:
            raise _fail(self.net, ll, "map.processors",
                        f"{width} processors per pass exceed the {PROCESSORS} processors",
                        "reduce the channel count")
        twin = self.twin[ll]
        if prefer is None and twin is not None and popcount(self.pmap[twin]) == width:
            return self.pmap[twin]  # reuse the twin's kernels: no kernel memory spent
        cands = []
        if prefer is not None and popcount(prefer) == width:
            cands.append(prefer)
        cands += [_block(s, width) for s in range(0, PROCESSORS - width + 1, PROCESSORS_PER_MEMORY)]
        if prefer is not None and popcount(prefer) == width:
            if self.kernel_cost(ll, prefer) < 1 << 20:
                return prefer  # keep the data where it is (passthrough/depthwise rule)
            self.moved[ll] = prefer
        judge = self._kernel_proxy(ll, width)
        return min(cands, key=lambda m: (self.kernel_cost(judge, m), ffs(m)))

    def _kernel_proxy(self, ll: int, width: int) -> int:
        """The layer whose kernels decide layer ll's block: ll itself, or for a layer
        without kernels (a pass-through copy) the next layer with kernels that reads the
        same data or ll's output on as many processors (a copy keeps its processors, so
        the block must suit the layers reading it)."""
        if self.columns(ll):
            return ll
        data = {*inputs_of(self.net, ll), ll}
        for k in range(ll + 1, self.n):
            nxt = self.net.layers[k]
            if data & set(inputs_of(self.net, k)) and multipass(nxt.input_channels)[1] == width \
                    and self.columns(k):
                return k
        return ll

    def map_processors(self) -> None:
        net = self.net
        first = net.layers[0]
        in_c = self.channels_of(INPUT)
        h = net.input_shape[1]
        w = net.input_shape[2] if len(net.input_shape) > 2 else 1
        hwc_bytes = h * w * multipass(first.input_channels)[0] * first.operands * 4
        if (hwc_bytes > self.facts.data_instance_bytes or self.want_chw) and not self.stream \
                and not self.fifo \
                and not first.operator.one_d \
                and first.operands == 1 and in_c <= PROCESSORS // PROCESSORS_PER_MEMORY \
                and inputs_of(net, 0) == (INPUT,) and not later_input_readers(net):
            # (only the first layer reads CHW: memory_check.chw_input_read_once)
            self.big_data = True
            self.tensor[INPUT] = _chw_map(in_c)
        if self.buffer is not None:
            # The buffer's processors are fixed: its readers read there, its writers
            # write there.
            for src in (DATA_BUFFER, *self.buffer_writers):
                self.tensor[src] = self.buffer.processors
        # Concatenations, by the layer outputs they join (U-Net skips: an encoder's output
        # is read by the next encoder layer long before the decoder concatenates it).
        joins: dict[int, list[int]] = {}
        for ll, lay in enumerate(net.layers):
            srcs = inputs_of(net, ll)
            if len(srcs) > 1 and lay.eltwise == ELTWISE_NONE:
                for src in srcs:
                    joins.setdefault(src, []).append(ll)
        for ll, lay in enumerate(net.layers):
            srcs = inputs_of(net, ll)
            passes, width = multipass(lay.input_channels)
            hint = self.hints.get(ll, {})
            if "processors" in hint:
                forced = hint["processors"]
                for src in srcs:
                    self.tensor.setdefault(src, forced)
            for src in srcs:
                # A concatenated output that another layer reads first: its processors
                # are chosen now, for the concatenation, with its partners beside it;
                # this layer then reads it where the concatenation needs it.
                for cat in joins.get(src, ()):
                    if cat != ll and src not in self.tensor:
                        self._plan_concat(cat)
            if len(srcs) == 1 or lay.eltwise != ELTWISE_NONE:
                self._map_same(ll, srcs, width)
            else:
                self._map_concat(ll, srcs, passes, width)
            self.commit_kernels(ll)
        for src in range(self.n):
            if src not in self.tensor:
                hint = self.hints.get(src, {})
                width = multipass(net.layers[src].output_channels)[1]
                # Outputs nobody reads: packed from processor 0, where the unload
                # expects them by default (moved only if that memory is still in use);
                # a pass-through layer writes where it reads (vendor rule,
                # _check_passthrough_maps), and so does a depthwise layer when it can:
                # its data then stays on its processors (broadcast mode, the vendor's
                # energy notice on depthwise layers that move data)
                keep = net.layers[src].operator.passthrough or (
                    net.layers[src].conv_groups > 1 and popcount(self.pmap[src]) == width)
                default = self.pmap[src] if keep else _block(0, width)
                self.tensor[src] = hint.get("output_processors", default)
                if "output_processors" not in hint:
                    self.free_outputs.append(src)

    def _prefer(self, src: int) -> int | None:
        """Passthrough and depthwise layers keep data on their input processors."""
        if src == INPUT:
            return None
        lay = self.net.layers[src]
        if lay.operator.passthrough or lay.conv_groups > 1:
            return self.pmap[src]
        return None

    def _map_same(self, ll: int, srcs: tuple[int, ...], width: int) -> None:
        known = [self.tensor[s] for s in srcs if s in self.tensor]
        if known:
            pmap = known[0]
            if any(k != pmap for k in known):
                raise _fail(self.net, ll, "map.eltwise",
                            "the element-wise operands already sit on different processors",
                            "give the operands' producers the same output processors")
        else:
            # any operand a passthrough/depthwise layer wrote (an element-wise layer reads
            # all its operands on one block, so one that cannot move decides it)
            prefer = next((p for p in map(self._prefer, srcs) if p is not None), None)
            pmap = self.choose(ll, width, prefer)
        if popcount(pmap) != width:
            raise _fail(self.net, ll, "map.processors",
                        f"the input is on {popcount(pmap)} processors, this layer needs "
                        f"{width}", "give every reader of a layer the same channel count")
        for s in srcs:
            self.tensor[s] = pmap
        self.pmap[ll] = pmap

    def _plan_concat(self, ll: int) -> None:
        """Output processors for the inputs of concatenation `ll` that have none yet:
        consecutive, in the concatenation's order, around inputs already placed (seed
        004: a layer reading several inputs reads them as one tensor on its processors).
        Leaves them unplanned when that is impossible (the caller then reports it)."""
        srcs = inputs_of(self.net, ll)
        passes, width = multipass(self.net.layers[ll].input_channels)
        if passes > 1 or all(s in self.tensor for s in srcs) or INPUT in srcs:
            return
        chans = [self.channels_of(s) for s in srcs]
        placed = [(k, self.tensor[s]) for k, s in enumerate(srcs) if s in self.tensor]
        if placed:
            k, pmap = placed[0]
            start = ffs(pmap) - sum(chans[:k])
            if start < 0 or start + width > PROCESSORS:
                return
            for j, m in placed:
                if m != _block(start + sum(chans[:j]), chans[j]):
                    return
        else:
            # among the blocks where the kernels land lowest, the highest: a concatenated
            # skip lives long, so it keeps clear of the low processors most layers use
            cands = [_block(s, width)
                     for s in range(0, PROCESSORS - width + 1, PROCESSORS_PER_MEMORY)]
            best = min(self.kernel_cost(ll, m) for m in cands)
            start = max(ffs(m) for m in cands if self.kernel_cost(ll, m) == best)
        for s, c in zip(srcs, chans, strict=True):
            self.tensor.setdefault(s, _block(start, c))
            start += c

    def _map_concat(self, ll: int, srcs: tuple[int, ...], passes: int, width: int) -> None:
        chans = [self.channels_of(s) for s in srcs]
        if passes == 1:
            self._plan_concat(ll)
            if any(s in self.tensor for s in srcs):
                maps = [self.tensor.get(s, 0) for s in srcs]
                if 0 in maps or any(ffs(b) != ffs(a) + popcount(a)
                                    for a, b in zip(maps, maps[1:], strict=False)):
                    raise _fail(self.net, ll, "map.concat",
                                "the concatenated inputs are already placed on processors "
                                "that are not consecutive", "concatenate layer outputs "
                                "that nothing else reads, or write a sidecar")
                pmap = 0
                for m in maps:
                    pmap |= m
            else:
                pmap = self.choose(ll, width, None)
                start = ffs(pmap)
                for s, c in zip(srcs, chans, strict=True):
                    self.tensor[s] = _block(start, c)
                    start += c
        else:
            if any(multipass(c)[1] != width or c % width for c in chans):
                raise _fail(self.net, ll, "map.concat",
                            f"multi-pass concatenation of {chans} channels needs every input "
                            f"to fill whole passes of {width} channels",
                            "concatenate inputs whose channel counts are multiples of the "
                            "per-pass processor count")
            known = [self.tensor[s] for s in srcs if s in self.tensor]
            # a part a pass-through copy writes stays on the copy's input processors
            prefer = next((p for p in map(self._prefer, srcs) if p is not None), None)
            pmap = known[0] if known else self.choose(ll, width, prefer)
            for s in srcs:
                if self.tensor.setdefault(s, pmap) != pmap:
                    raise _fail(self.net, ll, "map.concat",
                                "the concatenated inputs sit on different processors",
                                "write a sidecar for this network")
        self.pmap[ll] = pmap

    # --- data memory ------------------------------------------------------------------
    def groups(self) -> tuple[list[_Group], dict[int, int], dict[int, int]]:
        """Allocation groups; member -> group index; member -> position in group."""
        net, n = self.net, self.n
        last = last_use(net)
        owner: dict[int, int] = {}
        pos: dict[int, int] = {}
        out: list[_Group] = []

        def size_of(src: int) -> int:
            if src == INPUT:
                return input_bytes(net, 0, self.big_data)
            return output_bytes(net.layers[src])

        def lanes_of(src: int) -> int:
            if src == INPUT:
                return lanes(self.tensor[INPUT], self.big_data)
            return lanes(self.tensor[src], net.layers[src].output_width != 8)

        def dies(src: int) -> int:
            return last[src]

        for ll, lay in enumerate(net.layers):
            srcs = inputs_of(net, ll)
            if len(srcs) < 2:
                continue
            if DATA_BUFFER in srcs:
                raise _fail(net, ll, "map.data-buffer",
                            "combining the data buffer with other data is not placed "
                            "automatically", "read the buffer alone (a Conv1d over it), "
                            "or write a sidecar")
            if INPUT in srcs:
                raise _fail(net, ll, "map.eltwise" if lay.eltwise else "map.concat",
                            "combining the network input with layer outputs is not placed "
                            "automatically", "copy the input with a passthrough layer first")
            if any(s in owner for s in srcs):
                raise _fail(net, ll, "map.shared-operand",
                            "an input of this layer is also combined by another layer; its "
                            "output cannot be laid out for both",
                            "copy it with a passthrough layer (seed 004, Residual "
                            "Connections)")
            member = max(size_of(s) for s in srcs)
            if lay.eltwise != ELTWISE_NONE:
                layout, size = "interleave", member * len(srcs)
            elif multipass(lay.input_channels)[0] > 1:
                # More than 64 channels are read pass by pass from each pixel's
                # consecutive words, so the parts are written interleaved, one word per
                # pixel each, with a write gap (seed 004 `write_gap`: "... or to
                # concatenate multiple inputs to form data with more than 64 channels").
                # A part of several passes would need its words spread further apart.
                width = multipass(lay.input_channels)[1]
                if any(s == INPUT or net.layers[s].output_channels != width
                       for s in srcs):
                    raise _fail(net, ll, "map.concat",
                                f"this concatenation of more than 64 channels joins parts "
                                f"that are not {width} channels each (one pass), which "
                                "the automatic mapping cannot interleave",
                                "concatenate parts of equal channel count, or write a "
                                "sidecar with write_gap")
                layout, size = "interleave", member * len(srcs)
            else:
                layout, size = "lanes", member
            lane = 0
            for s in srcs:
                lane |= lanes_of(s)
            gi = len(out)
            parts = tuple((lanes_of(s), s) for s in srcs) if layout == "lanes" else ()
            out.append(_Group(srcs, lane, size, 0, min(srcs), max(dies(s) for s in srcs),
                              layout, member, parts))
            for k, s in enumerate(srcs):
                owner[s] = gi
                pos[s] = k
        if self.buffer is not None:
            # Live before the first inference and after the last: it meets everything
            # in its lanes (born before the input, dies after the outputs).
            buf = net.data_buffer
            owner[DATA_BUFFER] = len(out)
            pos[DATA_BUFFER] = 0
            out.append(_Group((DATA_BUFFER,), self.buffer.processors, 4 * buf.length, 0,
                              DATA_BUFFER, n + 1, "buffer"))
        for src in [INPUT, *range(n)]:
            if src in owner or src in self.buffer_writers:
                continue
            below = output_ignore(net.layers[src]) if src >= 0 else 0
            owner[src] = len(out)
            pos[src] = 0
            size, born, die = size_of(src) + below, src, n if src == n - 1 else dies(src)
            lane = lanes_of(src)
            if self.stream and src < self.stream:
                size, born, die = self._stream_group(src, size, die)
                # the vendor checks streaming buffers by memory instance
                lane = lanes(self.tensor[src], True)
            out.append(_Group((src,), lane, size, below, born, die, "single"))
        self._check_gapped_reads(out)
        return out, owner, pos

    def _check_gapped_reads(self, groups: list[_Group]) -> None:
        """A member of an interleaved group that another layer also reads: that layer
        reads it in place, skipping the other members' words, where the device can
        (`read_gap`, legalize.facts.reads_gapped); otherwise it needs a copy."""
        net = self.net
        for g in groups:
            if g.layout != "interleave":
                continue
            for ll in range(self.n):
                srcs = inputs_of(net, ll)
                if len(srcs) == 1 and srcs[0] in g.members \
                        and not reads_gapped(net, ll, srcs[0], self.facts):
                    raise _fail(net, ll, "map.shared-operand",
                                f"the output of `{net.layers[srcs[0]].name}` is written "
                                "with gaps (an element-wise operand, or part of a "
                                "concatenation of more than 64 channels) and is also read "
                                "directly here", "insert a passthrough layer that copies it "
                                "(seed 004, Residual Connections)")

    def _stream_group(self, src: int, size: int, die: int) -> tuple[int, int, int]:
        """(size, born, dies) of a buffer written while the first layers stream.

        They all run at once, so every such buffer is live from the start to the end of
        the streaming part. The input and each streaming output but the last are
        circular buffers of the reader's rollover; when a layer's input and output share
        processors the vendor also keeps its own rollover clear past either end. One
        word more than the data: the vendor's range tests include both ends.
        """
        k = self.stream
        words = [self.rollover[src + 1] or 0] if src < k - 1 else [(size + 3) // 4]
        if src >= 0 and self.pmap[src] & self.tensor[src]:
            words.append(self.rollover[src] or 0)
        die = max(die, k - 1) if src < k - 1 else die
        return 4 * max(words) + 4, INPUT, die

    def _in_place(self, grp: _Group, placed: list[tuple[_Group, int]]
                  ) -> tuple[int, _Group] | None:
        """(margin, input group) when `grp`, a layer's output, may overwrite its input."""
        if not self.overlap or self.stream or grp.layout != "single" \
                or len(grp.members) != 1 or grp.members[0] < 0:
            return None
        ll = grp.members[0]
        srcs = inputs_of(self.net, ll)
        margin = in_place_margin(self.net, ll, srcs == (INPUT,) and self.big_data)
        if margin is None:
            return None
        source = next((o for o, _ in placed if o.members == srcs and o.layout == "single"),
                      None)
        return None if source is None else (margin, source)

    def _reader_margin(self, grp: _Group) -> int:
        """Bytes below `grp` (a layer output) its only reader would write over it."""
        if not self.overlap or self.stream or grp.layout != "single" \
                or len(grp.members) != 1:
            return 0
        src = grp.members[0]
        readers = [ll for ll in range(self.n) if src in inputs_of(self.net, ll)]
        if len(readers) != 1:
            return 0
        margin = in_place_margin(self.net, readers[0], src == INPUT and self.big_data)
        return margin or 0

    def skeleton(self) -> Placement:
        """The processor choice with streaming flags and no offsets (for rollovers)."""
        n = self.n
        return Placement(network=self.net, device=self.facts, final_layer=n - 1,
                         layers=tuple(LayerPlacement(
                             processor_map=self.pmap[ll], output_processor_map=self.tensor[ll],
                             in_offset=0, out_offset=0, streaming=ll < self.stream,
                             next_sequence=ll + 1 if ll < n - 1 else -1,
                             prev_sequence=ll - 1) for ll in range(n)))

    def allocate(self) -> tuple[list[_Group], list[int]]:
        groups, _, _ = self.groups()
        placed: list[tuple[_Group, int]] = []
        offsets = []
        for g in sorted(range(len(groups)), key=lambda i: (groups[i].born, i)):
            grp = groups[g]
            hint = None
            if len(grp.members) == 1 and grp.members[0] >= 0:
                hint = self.hints.get(grp.members[0], {}).get("out_offset")
            margin = self._in_place(grp, placed)
            if grp.layout == "buffer":
                hint = self.buffer.offset
            cands = sorted({0, *(off + o.size for o, off in placed)}) if hint is None \
                else [hint - grp.below]
            if margin is not None and hint is None:
                cands = sorted({*cands, *(max(off - margin[0], 0) & ~3
                                          for o, off in placed if o is margin[1])})
            reach = self._reader_margin(grp)
            if reach and hint is None:
                # its reader will write over it from `reach` bytes below: leave room there
                cands = sorted({c + reach for c in cands}) + cands
            for start in cands:
                start = (start + 3) & ~3
                end = start + grp.size
                if end > self.facts.data_instance_bytes:
                    continue
                clash = any(off < end and start < off + o.size and grp.meets(o)
                            and not (margin is not None and o is margin[1]
                                     and start + margin[0] <= off)
                            for o, off in placed)
                if not clash:
                    break
            else:
                who = grp.members[0]
                raise _fail(self.net, who, "map.data-memory",
                            f"{grp.size} bytes per memory instance find no free room in "
                            f"the {self.facts.data_instance_bytes:#x}-byte data memory next to the "
                            "data still needed", "reduce the data sizes, or write a sidecar "
                            "that places (or streams) the first layers")
            placed.append((grp, start))
            offsets.append((g, start))
        by_group = dict(offsets)
        return groups, [by_group[i] for i in range(len(groups))]


def auto_place(network: Network, device: Device,
               partial: Hints | None = None, *,
               stream_layers: int | None = None, fifo: bool = False,
               decision: HwDecision | None = None) -> Placement:
    """The placement of `auto_map` (see there)."""
    return auto_map(network, device, partial, stream_layers=stream_layers, fifo=fifo,
                    decision=decision).placement


def auto_map(network: Network, device: Device,
             partial: Hints | None = None, *,
             stream_layers: int | None = None, fifo: bool = False,
             decision: HwDecision | None = None) -> HwNetwork:
    """Place `network` on `device` without a sidecar (pure function): the lowered
    network of the placement, its hardware view derived once, when the placement was
    examined, and its kernel and bias memory allocated once, by the check.

    `partial` fixes some decisions: {layer name (or index): {"processors": mask,
    "output_processors": mask, "out_offset": bytes}}, as a partial sidecar states them.
    `stream_layers` makes exactly that many leading layers stream (None: stream only
    when the data does not fit, as few layers as needed). Raises
    Ai8xError when the network does not fit. When the first layers stream, the input
    must be loaded through the FIFO (`placement.layers[0].streaming`). `decision`: the
    conversion's hardware choices (options.decide_conversion), under which every
    candidate placement is examined; its FIFO input (the user's --fifo) puts the input
    on the FIFO processors even when nothing streams. Without it, the default options'
    choices, with --fifo when `fifo` is set.
    """
    if decision is None:
        decision = default_decision(device, fifo=fifo)
    fifo = decision.plain.fifo
    if not network.layers:
        raise Ai8xError("map.empty", "network", "the network has no layers",
                        "convert a model with at least one layer")
    if len(network.layers) > device.max_layers:
        raise _fail(network, device.max_layers, "map.layers",
                    f"{len(network.layers)} layers, {device.name} runs at most "
                    f"{device.max_layers}", "merge layers or use a MAX78002")
    hints = _hints_of(network, partial)
    if fifo:
        # The FIFOs write fixed processors (seed 000, "FIFOs"): HWC channels go to
        # 16q .. 16q + 3 of FIFO q; an input placed elsewhere could not be fed.
        fifo_input_channels(network, device)
        first = dict(hints.get(0, {}))
        first.setdefault("processors", _fifo_map(network.input_shape[0]))
        hints = {**hints, 0: first}
    if stream_layers:
        return _stream(network, device, hints, None, decision, only=stream_layers)
    mapper = _Mapper(network, device, hints, fifo=fifo)
    mapper.map_processors()
    try:
        groups, offsets = _allocate_moving_outputs(mapper)
    except Ai8xError as err:
        if err.code != "map.data-memory":
            raise
        fitted = None
        if not mapper.big_data and not fifo:
            # CHW input takes a quarter of the memory of HWC: retry with it.
            chw = _Mapper(network, device, hints, chw=True)
            chw.map_processors()
            if chw.big_data:
                try:
                    fitted = chw, *_allocate_moving_outputs(chw)
                except Ai8xError as err2:
                    if err2.code != "map.data-memory":
                        raise
        if fitted is None:
            # Layers writing over their own input (the vendor's U-Net sidecars,
            # --overlap-data), in HWC, then in CHW.
            for chw in (False,) if fifo else (False, True):
                over = _Mapper(network, device, hints, chw=chw, overlap=True, fifo=fifo)
                over.map_processors()
                if chw and not over.big_data:
                    continue
                try:
                    fitted = over, *_allocate_moving_outputs(over)
                    break
                except Ai8xError as err3:
                    if err3.code != "map.data-memory":
                        raise
                    if not chw:
                        err = err3  # it got further: name the layer that still fails
        if fitted is None:
            return _stream(network, device, hints, err, decision)
        mapper, groups, offsets = fitted
    hw, diags = checked(examine(_assemble(mapper, groups, offsets), decision))
    if hw is None:
        raise Ai8xError.many(diags)
    return hw


def _assemble(mapper: _Mapper, groups: list[_Group], offsets: list[int]) -> Placement:
    """The Placement of an allocated mapping (offsets from the group layout)."""
    network, facts = mapper.net, mapper.facts
    _, owner, pos = mapper.groups()
    n = len(network.layers)
    out_off: dict[int, int] = {}
    gap = [0] * n
    for src, gi in owner.items():
        g, base = groups[gi], offsets[gi] + groups[gi].below
        k = pos[src]
        if g.layout == "interleave":
            off = base + 4 * k
            if src >= 0:
                gap[src] = len(g.members) - 1
        elif g.layout == "sequential":
            off = base + sum(output_bytes(network.layers[s]) for s in g.members[:k])
        else:
            off = base
        out_off[src] = off
    for src, position in mapper.buffer_writers.items():
        out_off[src] = mapper.buffer.offset + 4 * position
    layers = []
    outputs = set(output_layers(network))
    for ll, lay in enumerate(network.layers):
        srcs = inputs_of(network, ll)
        default = (ll - 1,) if ll > 0 else (INPUT,)
        seqs = None if tuple(srcs) == default and lay.in_sequences in (None, default) \
            else tuple(srcs)
        first_src = srcs[0]
        # A layer reads where its (first) input was written: for a concatenation laid
        # out in sequence that is the group's start (its first member), and a layer
        # reading one member alone (a U-Net skip's next encoder stage) reads that
        # member's own place. Element-wise operands are read interleaved from the start;
        # a layer reading one interleaved member alone reads it at its own place,
        # skipping the other members' words (`read_gap`, seed 000/004).
        in_offset = out_off[first_src]
        if first_src == DATA_BUFFER:
            # the shift layer reads from position k on (and writes position 0)
            in_offset += 4 * lay.buffer_shift
        gi = owner[first_src]
        skip = 0
        if groups[gi].layout == "interleave":
            if len(srcs) == 1:
                skip = len(groups[gi].members) - 1
            else:
                in_offset = offsets[gi] + groups[gi].below
        layers.append(LayerPlacement(
            processor_map=mapper.pmap[ll], output_processor_map=mapper.tensor[ll],
            in_offset=in_offset, out_offset=out_off[ll], write_gap=gap[ll],
            big_data=mapper.big_data and ll == 0, output_layer=ll in outputs,
            streaming=ll < mapper.stream,
            next_sequence=ll + 1 if ll < n - 1 else -1, prev_sequence=ll - 1,
            in_sequences=seqs, input_skip=skip,
            buffer_shift=lay.buffer_shift or None, buffer_insert=lay.buffer_insert or None))
    placement = Placement(network=network, device=facts, layers=tuple(layers),
                          final_layer=n - 1, data_buffer=mapper.buffer)
    _check_passthrough_maps(placement, mapper)
    return placement


def _buffer_channels_fit(network: Network, device: Device) -> Diagnostic | None:
    """The data buffer keeps one channel per processor (seed 000, Rolling Buffers: its
    `processors` hold one channel each), so it holds at most as many channels as the
    device has processors."""
    buf = network.data_buffer
    if buf is None or buf.channels <= PROCESSORS:
        return None
    return Diagnostic("map.data-buffer", f"data buffer `{buf.name}`",
                      f"{buf.channels} channels, the buffer holds one per processor and "
                      f"{device.name} has {PROCESSORS}",
                      f"reduce the channels written into the buffer to at most {PROCESSORS}")


def _buffer_length_fits(network: Network, device: Device) -> Diagnostic | None:
    """Each of the data buffer's positions takes one word of its processors' data memory
    (seed 000, Rolling Buffers), so the buffer holds at most one memory instance's words
    and leaves nothing there for the other layers' data."""
    buf = network.data_buffer
    if buf is None or 4 * buf.length < device.data_instance_bytes:
        return None
    return Diagnostic("map.data-buffer", f"data buffer `{buf.name}`",
                      f"{buf.length} positions need {4 * buf.length} bytes per processor, "
                      f"{device.name}'s data memory has {device.data_instance_bytes} per "
                      "instance", "keep fewer positions in the buffer")


_BUFFER_RULES = (_buffer_channels_fit, _buffer_length_fits)


def place_data_buffer(network: Network, device: Device) -> BufferPlacement | None:
    """Where the network's data buffer lives (None: it has none). Refuses a buffer that
    breaks a limit (Ai8xError naming the buffer, the limit and the fix).

    The highest processors, from an instance boundary, so the buffer's lanes stay clear
    of the layers' data packed from processor 0; its positions end at the top of data
    memory (the vendor's placement, seed 000 Rolling Buffers: offset 0x8000 - 4 * 15 for
    15 positions on MAX78000), where the first-fit allocation of the other data reaches
    last."""
    buf = network.data_buffer
    if buf is None:
        return None
    diags = [d for rule in _BUFFER_RULES if (d := rule(network, device)) is not None]
    if diags:
        raise Ai8xError.many(diags)
    start = PROCESSORS - -(-buf.channels // PROCESSORS_PER_MEMORY) * PROCESSORS_PER_MEMORY
    return BufferPlacement(processors=_block(start, buf.channels),
                           offset=device.data_instance_bytes - 4 * buf.length)


def _buffer_writers(network: Network) -> dict[int, int]:
    """Per layer writing into the data buffer, the position it writes at (0 for the shift
    layer, length - k for the layer inserting k positions)."""
    buf = network.data_buffer
    if buf is None:
        return {}
    out = {}
    for ll, lay in enumerate(network.layers):
        if lay.buffer_shift:
            out[ll] = 0
        elif lay.buffer_insert:
            out[ll] = buf.length - lay.buffer_insert
    return out


def fifo_input_channels(network: Network, device: Device) -> None:
    """Input loaded through the FIFOs (--fifo, --fast-fifo) has at most as many
    channels as the four FIFOs carry: four HWC channels each, FIFO q writing processors
    16q .. 16q + 3 (seed 000, "FIFOs"); a fifth FIFO, and the processors it would write,
    do not exist. Load a wider input from memory (drop --fifo), or give the first layer
    fewer input channels."""
    channels = network.input_shape[0]
    if channels > device.fifo_channels_hwc:
        raise _fail(network, -1, "map.fifo-channels",
                    f"{channels} input channels through the FIFOs; the {device.name}'s "
                    f"four FIFOs carry at most {device.fifo_channels_hwc} (HWC, four per "
                    "FIFO)", "drop --fifo (the input is then loaded from memory), or give "
                    f"the first layer at most {device.fifo_channels_hwc} input channels")


def _fifo_map(channels: int) -> int:
    """HWC input through the FIFOs: four channels per FIFO, FIFO q writing processors
    16q .. 16q + 3 (seed 000, "FIFOs")."""
    out = 0
    for c in range(channels):
        quad, slot = divmod(c, PROCESSORS_PER_MEMORY)
        out |= 1 << (PROCESSORS_PER_QUADRANT * quad + slot)
    return out


def _stream_limit(network: Network, facts: Device) -> tuple[int, str]:
    """How many leading layers may stream, and why not more (seed 000 "Streaming Mode":
    consecutive layers, at most the device's count, no flattening, frames below 2^21,
    pass-through only where the device streams it; the FIFOs take 16 HWC channels)."""
    dev = facts
    first = network.layers[0]
    if network.data_buffer is not None:
        return 0, "a network with a data buffer is not streamed automatically"
    if first.operator.one_d:
        return 0, "1-D data is not streamed automatically"
    if network.input_shape[0] > dev.fifo_channels_hwc or first.operands != 1 \
            or inputs_of(network, 0) != (INPUT,):
        return 0, (f"the FIFOs that feed a streaming network take at most "
                   f"{dev.fifo_channels_hwc} input channels in one operand")
    readers: dict[int, set[int]] = {}
    for ll in range(len(network.layers)):
        for src in inputs_of(network, ll):
            readers.setdefault(src, set()).add(ll)
    limit, why = 0, ""
    if len(network.layers) > dev.max_stream_layers:
        why = f"at most {dev.max_stream_layers} layers stream on {facts.name}"
    for ll, lay in enumerate(network.layers[:dev.max_stream_layers]):
        frame = lay.input_dim[0] * lay.input_dim[1] * multipass(lay.input_channels)[0]
        if lay.flatten or lay.operator.one_d or lay.dilation[0] > 1:
            why = f"layer `{lay.name}` (flattening, 1-D or dilated) cannot stream"
        elif lay.operator.passthrough and not dev.stream_passthrough:
            why = f"pass-through layer `{lay.name}` cannot stream on {facts.name}"
        elif frame >= dev.stream_frame_max:
            why = f"layer `{lay.name}`'s frame of {frame} exceeds the streaming limit"
        elif readers.get(ll - 1 if ll else INPUT, set()) != {ll} \
                or inputs_of(network, ll) != ((ll - 1,) if ll else (INPUT,)):
            # a circular buffer holds only the rows its one reader still needs
            why = f"layer `{lay.name}` reads or shares data a streaming layer keeps " \
                "in a circular buffer"
        else:
            limit = ll + 1
            continue
        break
    return limit, why


def _stream(network: Network, facts: Device, hints: dict[int, dict[str, int]],
            err: Ai8xError | None, decision: HwDecision, only: int | None = None
            ) -> HwNetwork:
    """Stream the fewest leading layers that make the data fit (or exactly `only`).
    Each count examines two placements under the streaming choices, each derived once:
    the processor choice without offsets (the register limits and the rollovers that
    size the circular buffers do not depend on offsets) and the allocated placement."""
    dev = facts
    limit, why = _stream_limit(network, facts)
    first_hint = dict(hints.get(0, {}))
    first_hint.setdefault("processors", _fifo_map(network.input_shape[0]))
    stream_hints = {**hints, 0: first_hint}
    last, tried = err, 0
    if only is not None and only > limit:
        where = f"layer `{network.layers[min(only, len(network.layers)) - 1].name}`"
        raise Ai8xError("map.streaming", where,
                        f"{only} leading layers cannot stream, at most {limit} can"
                        + (f" ({why})" if why else ""), "stream fewer layers")
    for k in range(1, limit + 1) if only is None else (only,):
        tried = k
        final = network.layers[k - 1]
        # a 1x1 convolution streams as a 3x3 one with padding 1 (hw.runs_1x1_as_3x3)
        padding = (1, 1) if runs_1x1_as_3x3(facts, final, k - 1, True) else final.padding
        if not dev.stream_nonpadded_final and 0 in padding:
            last = _fail(network, k - 1, "map.streaming", "the last streaming layer must "
                         f"be padded on {facts.name}", "pad it, or stream another count")
            continue
        mapper = _Mapper(network, facts, stream_hints, stream=k)
        mapper.map_processors()
        skeleton = examine(mapper.skeleton(), decision.streaming)
        limits = stream_register_diagnostics(skeleton)
        if limits:
            last = Ai8xError.many(limits)
            continue
        mapper.rollover = skeleton.rollover
        try:
            groups, offsets = _allocate_moving_outputs(mapper)
            placement = _assemble(mapper, groups, offsets)
        except Ai8xError as exc:
            if exc.code != "map.data-memory":
                raise
            last = exc
            continue
        hw, diags = checked(examine(placement, decision.streaming))
        if hw is not None:
            return hw
        last = Ai8xError.many(diags)
    if last is None:  # only when asked for 0 layers, which auto_place never does
        raise Ai8xError("map.streaming", "network", "no layer to stream", "stream layers")
    d = last.diagnostics[0]
    if only is not None:
        message = f"{d.message} (with the first {only} layer(s) streaming)"
    elif tried:
        message = f"{d.message} (with the first {tried} layer(s) streaming; fewer do not " \
            "fit" + (f", more cannot stream: {why})" if why else ")")
    else:
        message = f"{d.message}; streaming is not possible: {why}"
    raise Ai8xError(d.code, d.where, message,
                    "reduce the input size or the first layers' channel counts, or write a "
                    "sidecar with `streaming: true` for the first layers")


def _allocate_moving_outputs(mapper: _Mapper) -> tuple[list[_Group], list[int]]:
    """Allocate data memory; when an unread output finds no room, try its other
    processor blocks (an output in other byte lanes may share offsets with live data)."""
    while True:
        try:
            return mapper.allocate()
        except Ai8xError as err:
            movable = [s for s in mapper.free_outputs
                       if f"`{mapper.net.layers[s].name}`" in err.diagnostics[0].where]
            if not movable:
                raise
            src = movable[0]
            width = popcount(mapper.tensor[src])
            nxt = ffs(mapper.tensor[src]) + PROCESSORS_PER_MEMORY
            if nxt + width > PROCESSORS:
                raise
            mapper.tensor[src] = _block(nxt, width)


def _check_passthrough_maps(placement: Placement,
                            mapper: _Mapper | None = None) -> None:
    """A passthrough layer writes, per quadrant, the same number of processors packed
    (vendor rule); report a mapping that cannot satisfy it, saying which reader needs
    the data elsewhere and why."""
    network = placement.network
    diags = []
    for ll, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        if lay.operator.has_weights:
            continue
        for g in range(QUADRANTS):
            inp = (pl.processor_map >> (PROCESSORS_PER_QUADRANT * g)) & 0xFFFF
            outp = (pl.output_processor_map >> (PROCESSORS_PER_QUADRANT * g)) & 0xFFFF
            if outp:
                outp >>= ffs(outp)
            if outp != (1 << popcount(inp)) - 1:
                diags.append(_passthrough_diagnostic(placement, ll, mapper))
                break
    if diags:
        raise Ai8xError.many(diags)


def _procs(pmap: int) -> str:
    lo, hi = ffs(pmap), pmap.bit_length() - 1
    return f"processors {lo}-{hi}" if popcount(pmap) == hi - lo + 1 \
        else f"processor map {pmap:#x}"


def _passthrough_diagnostic(placement: Placement, ll: int,
                            mapper: _Mapper | None) -> Diagnostic:
    """Why pass-through layer ll cannot write where it reads: the reader that needs its
    output on other processors, and (when the mapper knows) the kernel memory that
    made it move."""
    network = placement.network
    lay = network.layers[ll]
    what = "element-wise pass-through layer" if lay.eltwise != ELTWISE_NONE \
        else "pass-through layer"
    here = placement.layers[ll].processor_map
    readers = [k for k in range(len(network.layers)) if ll in inputs_of(network, k)
               and placement.layers[k].processor_map != here]
    message = (f"the {what} `{lay.name}` must write its output on the processors it reads "
               f"({_procs(here)}), ")
    hint = "write a sidecar that maps this layer and its readers"
    if not readers:
        return Diagnostic("map.passthrough", f"layer `{lay.name}`",
                          message + "but its output was placed elsewhere", hint)
    k = readers[0]
    reader = network.layers[k]
    message += f"and layer `{reader.name}` reads it on {_procs(placement.layers[k].processor_map)}"
    if mapper is not None and k in mapper.moved:
        cols = mapper.columns(k)
        before = [network.layers[j].name for j in range(k)
                  if mapper.pmap[j] & here and mapper.columns(j)]
        shown = ", ".join(f"`{n}`" for n in before[:4]) + (" ..." if len(before) > 4 else "")
        message += (f": its kernels ({cols} columns per processor) do not fit in the "
                    f"kernel memory those processors have left beside the layers mapped "
                    f"there before it ({shown})")
        hint = (f"give `{reader.name}` fewer kernel columns (fewer channels, smaller "
                f"kernels, lower --weight-bits, or pooling before a flattening linear "
                f"layer), or write a sidecar that maps `{lay.name}` and its readers")
    return Diagnostic("map.passthrough", f"layer `{lay.name}`", message, hint)


__all__ = ["auto_map", "auto_place", "place_kernels"]
