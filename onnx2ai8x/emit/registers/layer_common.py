"""Per-layer quantities several register groups share (computed once per layer)."""
from __future__ import annotations

from dataclasses import dataclass

from ...devices import Device
from ...map.hw import HwView, ffs, fls, popcount
from ...network import Op
from .writes import WeightMemoryMap


def calcx4_index(k: int, device: Device) -> int:
    """Kernel column `k` as calcx4 addresses it: round-robin over the four kernel-memory
    instances, first in the large instances, then in the small ones of the extended
    processors (seed 000, "Kernel memory"; only MAX78002 has calcx4)."""
    small, large = device.kernel_words_small, device.kernel_words_large
    if k < small:
        return (k % 4) * (small // 4) + k // 4
    k -= small
    return (k % 4) * ((large - small) // 4) + k // 4 + small


@dataclass(frozen=True)
class LayerContext:
    """Shared per-layer values (see each field)."""

    ll: int
    hw_layer: int  # register slot (after inserted reset layers)
    local_source: bool  # output written through each quadrant's own write pointer
    tscnt_max: int  # time slots - 1 (passthrough / depthwise output packing)
    flatten_prod: int  # pooled pixels x passes - 1 when flattening, else 0
    in_exp: int  # input-expansion field of layer control 2
    quant: int  # weight bits as the mask counter steps them
    mask_count: int  # kl: last kernel (in bits x kernels) relative to the offset
    mask_offset: int  # koffs: start of the layer's kernels in mask memory (x8)
    oned_sad: int  # kernel start within a 9-byte column (1-D kernels share columns)


def _local_source(hw: HwView, ll: int) -> bool:
    """Non-uniform output gaps need per-quadrant write pointers (vendor: local_source)."""
    dev = hw.dev
    pl = hw.placement.layers[ll]
    for group in hw.groups_used:
        gmap = pl.output_processor_map & dev.quadrant_bits(group)
        if popcount(gmap) > 1:
            gap_max, gap_min = 0, dev.processors
            p = ffs(gmap)
            while p < fls(gmap):
                gap = ffs(gmap & ~((1 << (p + 1)) - 1)) - p - 1
                gap_min, gap_max = min(gap, gap_min), max(gap, gap_max)
                p += gap + 1
            if gap_min != gap_max or (gap_max > 0 and hw.layers[ll].operator.passthrough):
                return True
    return False


def _tscnt_max(hw: HwView, ll: int) -> int:
    dev = hw.dev
    lay = hw.network.layers[ll]
    pmap = hw.placement.layers[ll].processor_map
    width = lay.output_width
    best = 0
    for group in hw.groups_used:
        pop = popcount(dev.in_quadrant(pmap, group))
        if hw.layers[ll].operator.passthrough:
            if pop:
                best = max(best, (pop * width // 8 - 1) // 4)
        elif lay.conv_groups > 1:
            if hw.layers[ll].broadcast:
                best = max(best, (min(pop - 1, 3) + 1) * (width // 8) - 1)
            else:
                best = max(best, (pop * width + 7) // 8 - 1)
    return best


def layer_context(hw: HwView, mem: WeightMemoryMap, ll: int) -> LayerContext:
    lay = hw.network.layers[ll]
    pl = hw.placement.layers[ll]
    h = hw.layers[ll]
    flatten_prod = 0
    if lay.flatten:
        flatten_prod = h.in_expand * h.pooled_dim[0] * h.pooled_dim[1] - 1
        in_exp = flatten_prod & 0x0F  # the rest goes to the post-processing register
    elif h.operator == Op.NONE and h.emulate_eltwise:
        in_exp = 0
    else:
        in_exp = h.in_expand - 1
    quant = abs(lay.quantization) if not pl.bypass else 8
    kl = koffs = oned_sad = 0
    if h.operator.has_weights:
        kc = mem.kernel_count[ll] if not pl.bypass else lay.output_channels // lay.conv_groups
        kl = (kc - 1) * quant
        if ll == hw.start_layer and h.calcx4:
            kl = (kl + quant + 3) // 4 - quant
        # Mask offsets count 9-byte columns; 1-D kernels pack several per column.
        koffs, oned_sad = divmod(9 * mem.kernel_offset[ll], h.kernel_size[0] * h.kernel_size[1])
        if h.calcx4:
            koffs = calcx4_index(koffs, hw.dev)
        koffs *= 8
    return LayerContext(ll=ll, hw_layer=hw.hw_index(ll), local_source=_local_source(hw, ll),
                        tscnt_max=_tscnt_max(hw, ll), flatten_prod=flatten_prod,
                        in_exp=in_exp, quant=quant, mask_count=kl, mask_offset=koffs,
                        oned_sad=oned_sad)
