"""Cycle estimate of a placed network, the same estimate the vendor tool prints.

The accelerator's run time per layer follows from how it walks the data: for every
output row it reads the padded input rows through the TRAM, one pass per 64 input
channels (seed 000, "Multi-Pass"), reads each pooling window element (seed 000,
"Pooling"), and then writes the output channels one per clock per processor
(seed 000, "Processors"). Streaming layers start before their input is complete, and
the vendor's estimate simply inflates them by 1.5x (seed 000, "Streaming Mode").

The numbers below reproduce the vendor's estimate (izer/latency.py and the call site in
izer/backend/max7800x.py) so that an automatic mapping can be compared with a
hand-written one on the same scale. The vendor prints the estimate for MAX78000 only;
for MAX78002 the same equations are applied with that device's flags, which is a model,
not a measured figure.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..placement import Placement, layer_sequence
from .hw import HwView, ffs, fls, popcount
from .lowered import HwNetwork

STARTUP_CYCLES = 1  # the estimate starts with one cycle for the start command

@dataclass(frozen=True)
class LayerTiming:
    """The inputs of the per-layer frame equation (hardware view of one layer)."""

    input_channels: int
    input_dim: tuple[int, int]
    pool: tuple[int, int]
    pooled_dim: tuple[int, int]
    passes: int
    output_channels: int
    output_dim: tuple[int, int]
    kernel_size: tuple[int, int]
    padding: tuple[int, int]
    operands: int
    pool_first: bool
    passthrough: bool
    timeslots: int
    flatten: bool
    streaming: bool
    kernel_offset: int


def execution_order(placement: Placement) -> list[int]:
    """Layer indices in the order the accelerator runs them: the layer sequence from
    layer 0."""
    return layer_sequence(placement)


def kernel_count(placement: Placement, ll: int, passes_in: int,
                 passes_out: int, in_thresh: int) -> int:
    """Kernels the mask counter walks per processor for layer `ll` (izer/kernels.py).

    One kernel per output column (processor) between the first and last output
    processor, per output pass and per input pass; a first output processor that is not
    the first of its memory instance adds the skipped columns (seed 000, "Kernel memory").
    """
    network = placement.network
    lay = network.layers[ll]
    omap = placement.layers[ll].output_processor_map
    if omap == 0:
        return 0
    start_col = ffs(omap) % 4
    first = ffs(omap) - (start_col if passes_out > 1 else 0)
    in_exp = 1 if lay.flatten else passes_in
    if lay.conv_groups == 1:
        count = (1 + fls(omap) - first) * passes_out * in_exp + start_col * passes_out * in_exp
    else:
        count = in_exp + start_col * in_exp
    if lay.flatten:
        # A flattened linear layer holds one kernel row per (pixel, pass) per output.
        rows = lay.input_channels * lay.pooled_dim[0] * lay.pooled_dim[1] // in_thresh
        count = count * rows - (passes_out * popcount(omap) - lay.output_channels) * rows
    return count


def layer_timings(hw: HwView,
                  kernel_offsets: Sequence[int] | None = None) -> dict[int, LayerTiming]:
    """The frame-equation inputs of every executed layer (vendor's hardware view).

    What the hardware runs (1x1 kernels on the 3x3 path next to streaming, stretched
    dilated Conv1d, flipped transposed padding) is the hardware view (map/hw.py)."""
    placement, network = hw.placement, hw.network
    device = placement.device
    out: dict[int, LayerTiming] = {}
    for ll in execution_order(placement):
        lay, pl, h = network.layers[ll], placement.layers[ll], hw.layers[ll]
        op = h.operator
        pooled = h.pooled_dim
        out_dim = lay.output_dim if op == lay.operator else h.pooled_dim
        in_dim = h.input_dim
        if op.passthrough:
            out_chan = lay.output_channels
        else:
            count = kernel_count(placement, ll, h.in_expand, h.out_expand,
                                 h.in_expand_thresh)
            out_chan = count // h.in_expand
        if lay.flatten:
            px = pooled[0] * pooled[1]
            in_dim = (in_dim[0] * lay.pool[0], in_dim[1] * lay.pool[1])
            out_chan = count // (h.in_expand * px)
            out_dim = (out_dim[0] * pooled[0], out_dim[1] * pooled[1])
        if lay.operator.transposed:
            pooled = (pooled[0] * lay.stride[0], pooled[1] * lay.stride[1])
        pooling = lay.pool[0] > 1 or lay.pool[1] > 1
        passes = h.in_expand
        if device.two_pass_passthrough and op.passthrough and h.out_expand > 1 and pooling:
            passes = 2 * h.in_expand - 1
        # Passthrough time slots: output words per quadrant (izer/backend, "tscnt").
        slots = 0
        for g in hw.groups_used:
            pop = popcount(device.in_quadrant(pl.processor_map, g))
            if op.passthrough:
                if pop:
                    slots = max(slots, (pop * lay.output_width // 8 - 1) // 4)
            elif lay.conv_groups > 1:
                if h.broadcast:
                    slots = max(slots, (min(pop - 1, 3) + 1) * (lay.output_width // 8) - 1)
                else:
                    slots = max(slots, (pop * lay.output_width + 7) // 8 - 1)
        slots += 1
        hw_flatten = False
        if lay.flatten:
            slots *= pooled[0] * pooled[1]
            hw_flatten = h.in_expand * pooled[0] * pooled[1] - 1 >= 16
        koffs = 0 if kernel_offsets is None else int(kernel_offsets[ll])
        out[ll] = LayerTiming(
            input_channels=lay.input_channels, input_dim=in_dim, pool=lay.pool,
            pooled_dim=pooled, passes=passes, output_channels=out_chan, output_dim=out_dim,
            kernel_size=h.kernel_size, padding=h.padding, operands=lay.operands,
            pool_first=lay.pool_first, passthrough=op.passthrough, timeslots=slots,
            flatten=hw_flatten, streaming=pl.streaming, kernel_offset=koffs)
    return out


def frame_cycles(t: LayerTiming, kernoff_multiwrite: bool = True) -> int:
    """Cycles of one layer: the vendor's frame equation (izer/latency.py facts).

    Every input pixel costs a read and a TRAM write per pass (pooling reads every window
    element), every column a write state; padded rows cost only the pad reads; each output
    row then writes its channels.
    """
    rd, tram, wrt = 1, 1, 1
    kr, kc = t.kernel_size
    rpad, cpad = t.padding
    prow, pcol = t.pooled_dim
    orow, ocol = t.output_dim
    win = t.pool[0] * t.pool[1]
    meq_one = 1 if t.output_channels == 1 and t.passes == 1 else 0
    pre_read = 0
    if t.pool_first:
        pad_mp = t.passes * t.operands * (rd + tram)
        dat_mp = t.passes * t.operands * (win * rd + tram)
        mult = 1
    else:
        # Element-wise first, pooling after: the passes are walked per pixel.
        if kernoff_multiwrite and (t.passes > 1 or t.operands > 1):
            pre_read = ((prow + 2 * rpad - kc + 1) * cpad + (pcol + 2 * cpad - kr + 1) * rpad
                        - rpad * cpad) * t.kernel_offset
        pad_mp = t.passes * (rd + tram)
        dat_mp = t.passes * (t.operands * rd * win + tram)
        mult = t.passes
    col = 2 * cpad * (pad_mp + wrt)
    pad_row = col + mult * pcol * (pad_mp + wrt)
    row_no_conv = col + mult * pcol * (dat_mp + wrt)
    left = cpad * (pad_mp + wrt)
    right = pad_mp * cpad
    row_conv = left + mult * (kc - 1 - cpad) * (dat_mp + wrt) \
        + mult * (ocol - cpad) * dat_mp + right
    bottom_row = left + mult * (kc - 1 - cpad) * (pad_mp + wrt) \
        + mult * (ocol - cpad) * pad_mp + right
    if t.passthrough:
        out_row = t.passes * prow * pcol
        total = prow * pcol * (dat_mp + t.passes * t.timeslots)
    else:
        out_row = t.passes * ocol * t.output_channels + t.output_channels * meq_one
        total = (1 if t.flatten else 0) + pre_read + rpad * pad_row \
            + (kr - 1 - rpad) * row_no_conv \
            + (row_conv + out_row) * (prow - (kr - 1 - rpad)) \
            + rpad * (bottom_row + out_row)
    if t.streaming:
        total = (15 * total + 9) // 10  # the vendor's 1.5x streaming allowance
    return total


def estimate_cycles(hw: HwNetwork) -> list[int]:
    """[startup, cycles of each executed layer in execution order] (vendor estimate).

    The first kernel-memory column of each layer (from the kernel allocation) matters
    for multi-pass or element-wise layers that pool after the element-wise operation.
    """
    placement = hw.placement
    multi = placement.device.kernoff_multiwrite
    kernel_offsets = [int(x) for x in hw.weights.kernels.offset]
    timings = layer_timings(hw.view, kernel_offsets)
    return [STARTUP_CYCLES] + [frame_cycles(timings[ll], multi)
                               for ll in execution_order(placement)]
