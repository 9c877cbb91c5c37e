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
- `expected_output(network, placement, outputs, *, max_checklines=None)
  -> list[tuple[int, int, list[int]]]`: `(address, mask, words)` groups of
  `SAMPLE_OUTPUT`.
- `unload_plan(network, placement) -> list[tuple[int, int]]`: per
  `addr = (volatile uint32_t *) ADDRESS;` statement of `cnn_unload`, its address and the
  number of `*addr++` statements written after it (as text: a loop body counts once;
  the vendor's unrolling: loops of 8 statements for 32-bit outputs, of 1 for 8-bit).
- `unload_runs(network, placement) -> list[UnloadRun]`: the same, with everything
  needed to write the loops.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import Ai8xError
from ..map.hw import ffs, multipass, popcount
from ..network import Network
from ..placement import Placement

WIDE_UNROLL = 8  # vendor default --unroll-wide: reads per loop body for 32-bit output
NARROW_UNROLL = 1  # vendor default --unroll-8bit


def simulated_layers(placement: Placement) -> list[int]:
    """Layers in the order the known answer is computed: from the first layer used,
    following `simulated_sequence` where given and `next_sequence` otherwise."""
    order: list[int] = []
    ll = placement.first_layer_used
    count = len(placement.layers)
    while 0 <= ll < count and ll not in order:
        order.append(ll)
        pl = placement.layers[ll]
        nxt = pl.simulated_sequence if pl.simulated_sequence is not None else pl.next_sequence
        if nxt is None or nxt == -1:
            break
        ll = int(nxt)
    return order


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


def _check_entries(network: Network, placement: Placement, ll: int,
                   values: np.ndarray) -> list[tuple[int, int, str, int]]:
    """(mask, address, mask text, value) of each word the check compares, as the vendor
    lists them before sorting (its C prints the mask with as many hex digits as the
    checked bytes reach; ties at equal mask and address order by that text)."""
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


def expected_output(network: Network, placement: Placement, outputs: Sequence[np.ndarray],
                    *, max_checklines: int | None = None) -> list[tuple[int, int, list[int]]]:
    """`SAMPLE_OUTPUT` groups `(address, mask, words)`.

    `outputs[k]` is the reference output (C, H, W) / (C, L) of
    `known_answer_layers(placement)[k]` (a leading batch axis of 1 is allowed).
    Words are sorted by (mask, address) and grouped into runs of consecutive addresses
    with one mask, as the vendor's check loop reads them.
    """
    layers = known_answer_layers(placement)
    if len(outputs) != len(layers):
        raise Ai8xError("emit.output", network.name,
                        f"{len(outputs)} reference outputs for {len(layers)} output layers",
                        "pass one reference output per layer of known_answer_layers()")
    entries = []
    for ll, values in zip(layers, outputs, strict=True):
        entries.extend(_check_entries(network, placement, ll, values))
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


@dataclass(frozen=True)
class UnloadRun:
    """One run of reads in `cnn_unload`.

    `address`: absolute address loaded into `addr` before the run, or None when the
    pointer already points there; `stride`: bytes between reads (4: `*addr++`);
    `reads`: number of source words; `shifts`: the bytes taken from each word
    (8-bit unload; empty for a 32-bit unload); `unroll`: statements per loop body;
    `layer`: the layer unloaded; `out_start`: byte offset of the layer's first value in
    the output buffer (8-bit unload).
    """

    layer: int
    address: int | None
    stride: int
    reads: int
    shifts: tuple[int, ...]
    unroll: int
    out_start: int

    @property
    def statements(self) -> list[int]:
        """Read statements per emitted block: a loop body repeated, then the rest."""
        out = []
        remaining = self.reads
        while remaining > 0:
            loops = max(1, remaining // self.unroll)
            out.append(min(remaining, self.unroll))
            # The vendor subtracts a full loop even when fewer statements remained.
            remaining -= loops * self.unroll
        return out


def unload_runs(network: Network, placement: Placement) -> list[UnloadRun]:
    """The reads of `cnn_unload`, layer by layer (output layers in layer order)."""
    mem = placement.device
    outs = [ll for ll, pl in enumerate(placement.layers) if pl.output_layer]
    if not outs:
        outs = [placement.final_layer]
    # Any 8-bit output layer makes the whole unload byte-wise (words may be unaligned).
    wide = all(network.layers[ll].output_width != 8 for ll in outs)
    runs: list[UnloadRun] = []
    pointer = 0  # where the vendor believes `addr` points (see the bookkeeping below)
    written = 0
    for ll in outs:
        lay = network.layers[ll]
        pl = placement.layers[ll]
        chans, rows, cols = _output_shape(network, ll)
        out_size = lay.output_width // 8
        passes, per_pass = multipass(chans)
        width = passes * out_size
        pmap = pl.output_processor_map
        start = ffs(pmap) & ~(mem.processors_per_memory - 1)
        first_map = pmap >> start
        layer_map = first_map
        poffs = start
        sources: list = []
        c = 0
        while c < chans:
            if c % per_pass == 0:
                poffs = start
                layer_map = first_map
            expand = c // per_pass
            proc = poffs & ~(mem.processors_per_memory - 1)
            for doffs in range(rows * cols):
                this_map = layer_map
                # The vendor scales the instance base by the write gap here as well.
                offs = pl.out_offset + (mem.quad_word(proc) + doffs * width
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
            poffs += 4
            c += popcount(layer_map & 0x0F)
            layer_map >>= 4
        base = mem.sram_base
        if wide:
            idx = 0
            while idx < len(sources):
                delta = sources[idx + 1] - sources[idx] if idx + 1 < len(sources) else 4
                run = 0
                # Vendor quirk: the run test compares entries counted from the start of
                # the layer's list, not from the current position.
                while idx + run + 1 < len(sources) and \
                        sources[run + 1] - sources[run] == delta:
                    run += 1
                addr = base + sources[idx]
                new_addr = None
                if pointer == 0 or pointer != addr:
                    new_addr = pointer = addr
                r = UnloadRun(ll, new_addr, delta, run + 1, (), WIDE_UNROLL, written)
                runs.append(r)
                pointer = _advance_wide(pointer, run + 1)
                idx += run + 1
        else:
            idx = 0
            while idx < len(sources):
                read = sources[idx][0]
                shifts = []
                n_shift = 0
                while idx + n_shift < len(sources) and sources[idx + n_shift][0] == read:
                    shifts.append(sources[idx + n_shift][1])
                    n_shift += 1
                nxt = idx + n_shift
                delta = sources[nxt][0] - read if nxt < len(sources) else 4
                run = 0
                while idx + n_shift * (run + 1) < len(sources) and \
                        sources[idx + n_shift * (run + 1)][0] \
                        - sources[idx + n_shift * run][0] == delta:
                    run += 1
                addr = base + read
                new_addr = None
                if pointer == 0 or pointer != addr:
                    new_addr = pointer = addr
                runs.append(UnloadRun(ll, new_addr, delta, run + 1, tuple(shifts),
                                      NARROW_UNROLL, written))
                pointer = _advance_narrow(pointer, run + 1)
                idx += n_shift * (run + 1)
        written += chans * rows * cols * lay.output_width // 8
    return runs


def _advance_wide(pointer: int, reads: int) -> int:
    """The vendor's pointer bookkeeping after a 32-bit run: it adds the number of
    statements (a word count) to a byte address, so a following run at the next word is
    normally announced with a fresh `addr =` assignment."""
    remaining = reads
    while remaining > 0:
        loops = max(1, remaining // WIDE_UNROLL)
        remaining -= loops * WIDE_UNROLL
        pointer += loops * WIDE_UNROLL
    return pointer


def _advance_narrow(pointer: int, reads: int) -> int:
    """The vendor's pointer bookkeeping after an 8-bit run (in bytes)."""
    remaining = reads
    while remaining > 0:
        loops = max(1, remaining // NARROW_UNROLL)
        remaining -= loops * NARROW_UNROLL
        pointer += 4 * loops * NARROW_UNROLL
    return pointer


def unload_plan(network: Network, placement: Placement) -> list[tuple[int, int]]:
    """`(address, statements)` per `addr = ...` statement of `cnn_unload`: the
    `*addr++` statements written before the next assignment (a loop body counts once)."""
    plan: list[tuple[int, int]] = []
    for r in unload_runs(network, placement):
        if r.address is not None:
            plan.append((r.address, 0))
        if not plan:
            continue
        if r.stride == 4:
            plan[-1] = (plan[-1][0], plan[-1][1] + sum(r.statements))
    return plan
