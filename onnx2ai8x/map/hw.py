"""The hardware's view of a layer: what the accelerator actually runs, derived once from
a Placement, plus the rules every stage shares (passes per channel count, bit helpers).

The accelerator does not always run a layer in the shape the network states: a 1x1
convolution next to a streaming layer runs on the 3x3 kernel hardware, a dilated Conv1d
runs with a stretched kernel (or as a Conv2d), a transposed convolution uses flipped
padding, and channel counts above 64 need several passes (seed 000, "Multi-Pass",
"Streaming Mode", "Conv1d dilation" sections). The mapper's checks, the latency
estimate, the kernel packing and every register module read these values instead of
recomputing them; the device facts come from `onnx2ai8x.devices`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..devices import PROCESSORS, PROCESSORS_PER_MEMORY, Device

# a fact legalize's rules also ask (legalize sits below map); map's callers read it here
from ..legalize.facts import runs_1x1_as_3x3
from ..network import Network, Op
from ..options import HwChoices
from ..placement import Placement


def popcount(x: int) -> int:
    return bin(x).count("1")


def ffs(x: int) -> int:
    """Index of the lowest set bit (-1 for 0)."""
    return (x & -x).bit_length() - 1


def fls(x: int) -> int:
    """Index of the highest set bit (-1 for 0)."""
    return x.bit_length() - 1


def multipass(channels: int) -> tuple[int, int]:
    """(passes, processors per pass) for `channels` channels (seed 000, "Multi-Pass").

    One pass reads at most one channel per processor; beyond that the channels wrap in
    passes, and the per-pass count rounds up to a multiple of the processors sharing one
    data-memory instance so every pass fills whole memory words. No channels: one empty
    pass.
    """
    if channels <= 0:
        return 1, 0
    passes = -(-channels // PROCESSORS)
    per_pass = -(-channels // passes)
    if channels > PROCESSORS:
        per_pass = min(-(-per_pass // PROCESSORS_PER_MEMORY) * PROCESSORS_PER_MEMORY,
                       PROCESSORS)
    return passes, per_pass


def streams_1x1_as_3x3(placement: Placement, ll: int) -> bool:
    """Whether layer `ll` is a 1x1 convolution the accelerator must run on its 3x3 kernel
    hardware: streaming has no 1x1 path, so a 1x1 Conv2d or ConvTranspose2d that streams
    or reads a streaming layer's output runs as a 3x3 kernel holding the weight in its
    centre, with padding 1 (the same output size). Both parts do this (the vendor's
    EMULATE_1X1_STREAMING); the register values and the kernel packing (map/kernels.py)
    both read it from here. Streaming reaches the first `max_stream_layers` layers and
    the one after."""
    network = placement.network
    pl = placement.layers[ll]
    prev = pl.prev_sequence
    return runs_1x1_as_3x3(placement.device, network.layers[ll], ll,
                           pl.streaming or (prev >= 0 and placement.layers[prev].streaming))


@dataclass(frozen=True)
class HwLayer:
    """One layer as the hardware runs it (see module docstring)."""

    operator: int  # hardware operator (a dilated Conv1d may run as Conv2d)
    input_dim: tuple[int, int]
    pooled_dim: tuple[int, int]
    kernel_size: tuple[int, int]
    padding: tuple[int, int]
    in_expand: int  # input passes
    in_expand_thresh: int
    in_expand_invol: int
    out_expand: int  # output passes
    out_expand_thresh: int
    tram_max: int
    out_ignore: int
    out_pad: int
    broadcast: bool  # depthwise layer reading and writing the same processors
    emulate_eltwise: bool  # multi-pass element-wise emulated as a taller passthrough
    calcx4: bool
    tcalc: bool
    avgpool_reset: bool  # MAX78002: a reset layer is inserted before this one
    snoop_sequence: int | None


@dataclass(frozen=True)
class HwView:
    """The whole network as the hardware runs it, under the hardware choices."""

    network: Network
    placement: Placement
    dev: Device
    choices: HwChoices
    layers: tuple[HwLayer, ...]
    groups_used: tuple[int, ...]
    hw_add_layers: tuple[int, ...]  # reset layers inserted before each layer (cumulative)
    start_layer: int
    binary_weights: bool

    @property
    def pipeline(self) -> bool:
        return self.choices.pipeline

    @property
    def count(self) -> int:
        return len(self.placement.layers)

    @property
    def sum_hw_layers(self) -> int:
        return self.hw_add_layers[-1] if self.hw_add_layers else 0

    def hw_index(self, ll: int) -> int:
        return ll + self.hw_add_layers[ll]

    def hardware_order(self, order: list[int]) -> tuple[int, ...]:
        """Layers in `order` as the hardware layers the sequencer runs: a layer reached
        from its predecessor (or first) after its inserted reset layer, a layer reached
        by a jump directly (its next-layer field holds the layer's own index, as the
        vendor writes it)."""
        out: list[int] = []
        for k, ll in enumerate(order):
            if self.layers[ll].avgpool_reset and (k == 0 or order[k - 1] == ll - 1):
                out.append(self.hw_index(ll) - 1)
            out.append(self.hw_index(ll))
        return tuple(out)


def _extra(placement: Placement, ll: int, key: str, default: object = None) -> object:
    for k, v in placement.layers[ll].extra:
        if k == key:
            return v
    return default


def derive(placement: Placement, choices: HwChoices) -> HwView:
    """The hardware view of a placed network under the hardware choices (pure). A
    conversion derives it once per placement it examines (map/lowered.examine), under
    its own choices; the choices are carried, not read: the layers do not depend on
    them."""
    net = placement.network
    dev = placement.device
    layers = net.layers
    places = placement.layers
    count = len(places)
    first = placement.first_layer_used
    start_layer = 0
    prev_seq = [p.prev_sequence for p in places]

    kernel = [tuple(lay.kernel_size) for lay in layers]
    padding = [tuple(lay.padding) for lay in layers]
    # Streaming has no 1x1 path: such a convolution next to a streaming layer runs on the
    # 3x3 hardware with the weight in the centre and padding 1 (same output size); the
    # kernel packing (map/kernels.py) stores it so, by the same rule.
    for ll in range(count):
        if streams_1x1_as_3x3(placement, ll):
            kernel[ll] = (3, 3)
            padding[ll] = (1, 1)

    operands = [lay.operands for lay in layers]
    out: list[HwLayer] = []
    for ll in range(count):
        lay, pl = layers[ll], places[ll]
        op = lay.operator
        in_dim = tuple(lay.input_dim)
        pooled = tuple(lay.pooled_dim)
        ksize = kernel[ll]
        pad = padding[ll]
        out_ignore = out_pad = 0
        in_expand, in_thresh = multipass(lay.input_channels)
        out_expand, out_thresh = multipass(lay.output_channels)
        dil = lay.dilation[0]
        if dil > 1:
            k = lay.kernel_size[0]
            if (k - 1) * dil < dev.conv1d_stretch_limit:
                ksize = (k + (k - 1) * (dil - 1), 1)
            else:
                # Long dilation: Conv2d hardware, rows of `dilation` columns, pad 1.
                op = Op.CONV2D
                in_dim = ((lay.input_dim[0] + dil - 1) // dil, dil)
                pooled = in_dim
                pad = (1, 1)
                ksize = (3, 3)
                out_pad = in_dim[0] * in_dim[1] - lay.output_dim[0]
                if k == 3:
                    out_ignore = 4 * dil * out_expand
        if op.passthrough:
            tram_max = 1
        elif op == Op.CONVTRANSPOSE2D:
            # PyTorch's transposed-convolution padding is the complement of the hardware's.
            pad = (ksize[0] - 1 - pad[0], ksize[1] - 1 - pad[1])
            tram_max = max(0, (pooled[1] - 1) * lay.stride[1] + 1 + lay.output_padding[1]
                           + 2 * pad[1] - ksize[1]) + 1
        else:
            tram_max = max(0, pooled[1] + 2 * pad[1] - ksize[1]) + 1
        tcalc_given = _extra(placement, ll, "tcalc")
        tcalc = bool(tcalc_given) if tcalc_given is not None \
            else bool(pl.read_ahead and in_expand > 1)
        invol = (in_expand + 3) & ~3 if tcalc else in_expand
        broadcast = lay.conv_groups > 1 and pl.processor_map == pl.output_processor_map
        emulate = (dev.eltwise_multipass_emulated and lay.operands > 1 and in_expand > 1
                   and lay.operands * in_expand != lay.operands + in_expand)
        # The vendor indexes operands[prev_sequence] directly, so -1 means the last layer.
        avg_reset = (dev.passthrough_avgpool_after_eltwise and ll > 0
                     and operands[prev_seq[ll]] > 1 and lay.pool_average)
        snoop_seq = _extra(placement, ll, "snoop_sequence")
        out.append(HwLayer(
            operator=op, input_dim=in_dim, pooled_dim=pooled, kernel_size=ksize, padding=pad,
            in_expand=in_expand, in_expand_thresh=in_thresh, in_expand_invol=invol,
            out_expand=out_expand, out_expand_thresh=out_thresh, tram_max=tram_max,
            out_ignore=out_ignore, out_pad=out_pad, broadcast=broadcast,
            emulate_eltwise=emulate, calcx4=bool(_extra(placement, ll, "calcx4", False)),
            tcalc=tcalc, avgpool_reset=bool(avg_reset),
            snoop_sequence=None if snoop_seq is None else int(snoop_seq)))  # type: ignore[arg-type]

    used = 0
    for ll in range(first, count):
        used |= places[ll].processor_map
    used |= places[placement.final_layer].output_processor_map
    groups = tuple(g for g in range(dev.quadrants) if dev.in_quadrant(used, g))
    add, total = [], 0
    for ll in range(count):
        if out[ll].avgpool_reset:
            total += 1
        add.append(total)
    binary = any(layers[ll].quantization == -1 for ll in range(first, count))
    return HwView(network=net, placement=placement, dev=dev, choices=choices,
                  layers=tuple(out), groups_used=groups, hw_add_layers=tuple(add),
                  start_layer=start_layer, binary_weights=binary)


def first_equal(values: Sequence[np.ndarray | None],
                key: Callable[[int], object] | None = None) -> list[int | None]:
    """Per entry, the first earlier entry holding the same array (equal shape and
    values and, with `key`, the same key), or the entry itself; None for None. The
    kernel and bias allocators store such repeated weights once."""
    source: list[int | None] = []
    for ll, v in enumerate(values):
        if v is None:
            source.append(None)
            continue
        found = ll
        for j in range(ll):
            vj = values[j]
            if source[j] == j and vj is not None and vj.shape == v.shape \
                    and (key is None or key(j) == key(ll)) and np.array_equal(vj, v):
                found = j
                break
        source.append(found)
    return source
