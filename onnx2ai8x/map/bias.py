"""Bias memory: which quadrant holds each layer's bias values, and at which offset.

Each quadrant has its own bias memory of 8-bit values (seed 000, "Bias": 512 bytes per
quadrant on MAX78000, 2048 on MAX78002). A regular layer keeps all its bias values in one
quadrant; depthwise layers keep each value in the quadrant of the processor that uses
it. The allocation follows the vendor tool (izer/kbias.py) so registers and bias loads
match: depthwise layers first, in layer order; then the regular layers by first-fit
descending (MAX78000: flattened layers first; then layers bound to one quadrant; then
larger before smaller, ties in layer order), each into the allowed quadrant with the
least bias memory used so far. Layers with identical bias values share them
(izer/kdedup.py). All-zero biases are not stored.

`allocate_bias(placement) -> BiasAllocation`, per layer (as `placement.layers`):

- `group[ll]`: the quadrant holding the layer's bias, `ALL_GROUPS` for a depthwise layer
  (every quadrant it reads from holds its own part), or None (no bias);
- `offsets[ll][q]`: byte offset of the layer's bias in quadrant `q`'s bias memory
  (None where the quadrant holds none of it);
- `memory[q]`: the bytes to load into quadrant `q`'s bias memory (empty: unused).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..devices import Device
from ..errors import Ai8xError
from ..placement import Placement
from .hw import ffs, first_equal, fls, multipass

ALL_GROUPS = -1
_UNSET = None


@dataclass(frozen=True)
class BiasAllocation:
    """Bias memory placement (fields: see the module docstring)."""

    device: Device
    group: tuple[int | None, ...]
    offsets: tuple[tuple[int | None, ...], ...]
    memory: tuple[tuple[int, ...], ...]

    def address(self, quadrant: int) -> int:
        return self.device.bias_address(quadrant)


def _extra(placement: Placement, ll: int, key: str, default=None):
    for k, v in placement.layers[ll].extra:
        if k == key:
            return v
    return default


def layer_bias(placement: Placement, ll: int) -> np.ndarray | None:
    """The 8-bit bias values of a layer as stored in bias memory, or None."""
    network = placement.network
    lay = network.layers[ll]
    if placement.layers[ll].bypass and lay.weights is None:
        return None
    if lay.bias_hw is not None:
        return np.asarray(lay.bias_hw, dtype=np.int64).reshape(-1)
    if lay.bias is not None:
        # The accumulator value is the stored byte scaled by 2^(weight bits - 1) / 2^7.
        return np.floor_divide(np.asarray(lay.bias, dtype=np.int64),
                               placement.device.bias_div).reshape(-1)
    return None


def groups_used(placement: Placement) -> list[int]:
    """Quadrants with processors used by any layer (or the final layer's output)."""
    used = 0
    for pl in placement.layers[placement.first_layer_used:]:
        used |= pl.processor_map
    used |= placement.layers[placement.final_layer].output_processor_map
    return [q for q in range(placement.device.quadrants)
            if placement.device.in_quadrant(used, q)]


def allocate_bias(placement: Placement) -> BiasAllocation:
    """Place every layer's bias in bias memory (see the module docstring)."""
    network = placement.network
    bmem = placement.device
    quadrants = bmem.quadrants
    size = bmem.bias_bytes_per_instance
    layers = len(placement.layers)
    values = [layer_bias(placement, ll) for ll in range(layers)]
    source = first_equal(values)  # identical bias values are stored once
    stored = [v if source[ll] == ll else None for ll, v in enumerate(values)]
    quads = groups_used(placement)
    start = placement.first_layer_used

    cells: list[list[int | None]] = [[_UNSET] * size for _ in range(quadrants)]
    used = [0] * quadrants
    offsets: list[list[int | None]] = [[None] * quadrants for _ in range(layers)]
    group: list[int | None] = [None] * layers
    regular: list[tuple[int, list[int], int, bool]] = []

    for ll in range(start, layers):
        b = stored[ll]
        if b is None:
            continue
        lay = network.layers[ll]
        pl = placement.layers[ll]
        if b.size != lay.output_channels:
            raise Ai8xError("map.bias", lay.name,
                            f"{b.size} bias values for {lay.output_channels} output channels",
                            "give one bias value per output channel")
        if not np.any(b != 0):
            continue  # an all-zero bias is left out (the vendor does the same)
        out_expand, out_thresh = multipass(lay.output_channels)
        if _extra(placement, ll, "quad", False):
            # Quad fan-out (--fast-fifo-quad): quadrant q computes output channels q,
            # q + 4, ... and reads their bias from its own memory (izer/kbias.py, Qupac).
            group[ll] = ALL_GROUPS
            for q in range(quadrants):
                offsets[ll][q] = used[q] if bmem.in_quadrant(pl.processor_map, q) else None
            for i, value in enumerate(b):
                q = i % 4
                if used[q] >= size:
                    raise Ai8xError("map.bias", lay.name,
                                    f"bias memory of quadrant {q} exhausted ({size} bytes)",
                                    "drop biases or move layers to other quadrants")
                cells[q][used[q]] = int(value) & 0xFF
                used[q] += 1
            continue
        if lay.conv_groups == 1:
            first_out = ffs(pl.output_processor_map) % bmem.processors_per_memory
            blen = lay.output_channels + first_out * out_expand
            if ll == 0 and pl.streaming and not bmem.stream_bias:
                blen += 1  # MAX78000: a streaming first layer skips the first bias byte
            allowed = quads if pl.bias_group_map is None else list(pl.bias_group_map)
            regular.append((ll, allowed, blen, lay.flatten))
            continue
        group[ll] = ALL_GROUPS
        _place_depthwise(bmem, cells, used, offsets, ll, b, pl.processor_map,
                         pl.processor_map == pl.output_processor_map, out_expand, out_thresh,
                         lay.name)

    def priority(entry: tuple[int, list[int], int, bool]) -> int:
        if bmem.bias_flatten_first and entry[3]:
            return -1
        if len(entry[1]) == 1:
            return 0
        return size - entry[2]

    for ll, allowed, blen, _ in sorted(regular, key=priority):
        lay = network.layers[ll]
        if not bool(_extra(placement, ll, "calcx4", False)):
            q = min(allowed, key=lambda t: used[t])
        else:
            q = min(allowed, key=lambda t: (used[t] + 3) & ~3)
            used[q] = (used[q] + 3) & ~3  # calcx4 reads four bias bytes at a time
        if used[q] + blen > size:
            raise Ai8xError("map.bias", lay.name,
                            f"bias memory exhausted: {blen} bytes needed, quadrant {q} has "
                            f"{size - used[q]} of {size} left",
                            "allow more quadrants (`bias_quadrant`), or drop biases")
        group[ll] = q
        offsets[ll] = [used[q]] * quadrants
        used[q] += blen

    for ll, _, _, _ in regular:
        lay = network.layers[ll]
        pl = placement.layers[ll]
        b = stored[ll]
        q = group[ll]
        assert b is not None and q is not None and offsets[ll][q] is not None
        base = offsets[ll][q]
        target = (ffs(pl.output_processor_map) % bmem.processors_per_memory
                  * multipass(lay.output_channels)[0])
        if ll == 0 and pl.streaming and not bmem.stream_bias:
            cells[q][base] = 0
            target += 1
        for i in range(lay.output_channels):
            cells[q][base + target + i] = int(b[i]) & 0xFF

    # Layers sharing another layer's bias take its placement.
    for ll in range(layers):
        src = source[ll]
        if src is not None and src != ll:
            offsets[ll] = list(offsets[src])
            group[ll] = group[src]

    memory = tuple(tuple(0 if v is None else v for v in cells[q][:used[q]])
                   for q in range(quadrants))
    return BiasAllocation(device=placement.device, group=tuple(group),
                          offsets=tuple(tuple(o) for o in offsets), memory=memory)


def _place_depthwise(bmem: Device, cells: list[list[int | None]], used: list[int],
                     offsets: list[list[int | None]], ll: int, b: np.ndarray, pmap: int,
                     broadcast: bool, out_expand: int, out_thresh: int, name: str) -> None:
    """Depthwise bias: each value in the quadrant of the processor computing its channel,
    in processor order (broadcast layers: transposed within each quad of four)."""
    hole = np.iinfo(np.int64).min

    def add(q: int, val: int | None) -> None:
        if used[q] >= bmem.bias_bytes_per_instance:
            raise Ai8xError("map.bias", name,
                            f"bias memory of quadrant {q} exhausted "
                            f"({bmem.bias_bytes_per_instance} bytes)",
                            "drop biases or move layers to other quadrants")
        if val is not None and val != hole:
            cells[q][used[q]] = int(val) & 0xFF
        used[q] += 1

    quads_read = 0
    for q in range(bmem.quadrants):
        if bmem.in_quadrant(pmap, q):
            if broadcast:
                used[q] = (used[q] + 3) & ~3  # all quadrants read in parallel
            offsets[ll][q] = used[q]
            quads_read += 1
        else:
            offsets[ll][q] = None

    map_used = pmap
    if not broadcast:
        # The first gap of the first quadrant moves to the end of that quadrant.
        first = ffs(map_used)
        fq, shift = divmod(first, bmem.processors_per_quadrant)
        qmask = bmem.quadrant_bits(fq)
        map_used &= ~qmask
        map_used |= (pmap & qmask) >> shift
    start_proc, last_proc = ffs(map_used), fls(map_used)
    _check_last_quadrant(bmem, broadcast, out_expand, quads_read, last_proc, name)
    if broadcast:
        last_proc = ((last_proc + 16) & ~0x0F) - 1
    if broadcast or quads_read > 1:
        start_proc &= ~0xFFFF

    padded = b.astype(np.int64)
    leftover = out_expand * out_thresh - padded.size
    if leftover:
        padded = np.append(padded, np.full(leftover, hole, dtype=np.int64))
    padded = padded.reshape(out_expand, -1)
    for proc in range(start_proc, last_proc + 1):
        if not map_used >> proc & 1:
            # The vendor inserts at the absolute processor index.
            padded = np.insert(padded, proc, np.full(out_expand, hole, dtype=np.int64), axis=1)

    q = 0
    for expand in range(out_expand):
        for p in range(start_proc, last_proc + 1):
            q = p // bmem.processors_per_quadrant
            src = (p & ~0x0F) + (p % 4) * 4 + (p % 16) // 4 if broadcast else p
            k = src - start_proc
            add(q, int(padded[expand][k]) if k < padded.shape[1] else None)
    while used[q] > 0 and cells[q][used[q] - 1] is None:
        used[q] -= 1


def _check_last_quadrant(bmem: Device, broadcast: bool, passes: int, quadrants: int,
                         last: int, name: str) -> None:
    """Refuse a depthwise layer without broadcast over several passes and quadrants whose
    last processor is not its quadrant's last: its bias cannot be laid out for a known
    read. The vendor lays each quadrant's part out pass by pass, as many bytes a pass as
    the quadrant spans up to the layer's last processor (izer/kbias.py: 16 in full
    quadrants, 4 in a last quadrant ending at processor 51), while the layer's one
    time-slot count (ONED bits 0-3, the same in every quadrant) is 16. The model steps
    by the count, and the vendor's known answer, computed from the bias values, needs
    the vendor's layout: random 1200 on the MAX78002 (96 channels on processors 4-51)
    fails in one channel of the last quadrant's second pass. No golden case or vendor
    suite configuration has such a layer (theirs with partial last quadrants use
    broadcast), so which step the hardware takes is unknown."""
    span = last % bmem.processors_per_quadrant + 1
    if broadcast or passes < 2 or quadrants < 2 or span == bmem.processors_per_quadrant:
        return
    raise Ai8xError(
        "map.bias", name,
        f"a depthwise layer with bias over {passes} passes, without broadcast (output "
        f"processors other than its input processors), ends at processor {last}, not at "
        f"its quadrant's last: its bias layout ({span} bytes a pass in that quadrant) "
        f"does not follow its time-slot count, and no case shows what the hardware reads",
        "write the output to the input processors (broadcast), end the layer's processors "
        "at a quadrant's last processor (15, 31, 47 or 63), or give it no more channels "
        "than processors (one pass)")
