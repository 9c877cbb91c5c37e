"""Derived facts about a layer that several rules need (pure functions, no state)."""
from __future__ import annotations

import numpy as np

from ..devices import Device
from ..network import (
    ELTWISE_NONE,
    Layer,
    Network,
    Op,
)

# Operator sets for the rules' `applies_to` and checks, from the operators' traits.
# Legalize is where a layer may still carry an unknown operator code (a plain int, for
# operator-kind to name), so the facts below and the rules for every layer compare
# with members or test membership instead of asking an Op's traits.
CONVOLUTIONS = frozenset(op for op in Op if op.convolution)
WEIGHTED = frozenset(op for op in Op if op.has_weights)
NOT_1D = frozenset(op for op in Op if not op.one_d)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def producers(network: Network, index: int) -> tuple[int, ...]:
    """The layers feeding layer `index` (-1: the network input); the previous one if unset."""
    layer = network.layers[index]
    if layer.in_sequences is not None:
        return tuple(layer.in_sequences)
    return (index - 1,)


def consumers(network: Network, index: int) -> tuple[int, ...]:
    return tuple(j for j in range(len(network.layers)) if index in producers(network, j))


def is_1d(layer: Layer) -> bool:
    """1-D data: Conv1d, or a layer without convolution on (L, 1) data."""
    if layer.operator == Op.CONV1D:
        return True
    return layer.operator == Op.NONE and layer.input_dim[1] == 1 and layer.output_dim[1] == 1


def is_eltwise(layer: Layer) -> bool:
    return layer.eltwise != ELTWISE_NONE


def pools(layer: Layer) -> bool:
    """Pooling (or a stride-only pool) is active in this layer."""
    return layer.pool != (1, 1) or layer.pool_stride != (1, 1)


def in_passes(layer: Layer, device: Device) -> int:
    """Input passes: each pass reads at most one channel per processor."""
    return max(1, ceil_div(layer.input_channels, device.channels_per_pass))


def reads_gapped(network: Network, reader: int, src: int, device: Device) -> bool:
    """Can layer `reader` read the output of layer `src` where it lies when `src` is
    written with a gap (an element-wise operand, or one part of a concatenation of more
    than 64 channels, both written interleaved, one word per pixel each)?

    Only with `read_gap` (seed 000/004: "On MAX78002 only, when multi-pass is not used
    ... allows a layer to directly consume data produced by a layer with `write_gap`
    without the need for intermediate layers"): `src` must be the reader's only input,
    read in one pass with the dimensions it was written with (a flattening layer reads
    its input as passes of one pixel each, so it is left out).
    """
    lay = network.layers[reader]
    return device.read_gap and src >= 0 and producers(network, reader) == (src,) \
        and lay.operands == 1 and not lay.flatten and in_passes(lay, device) == 1 \
        and tuple(lay.input_dim) == tuple(network.layers[src].output_dim)


def out_passes(layer: Layer, device: Device) -> int:
    return max(1, ceil_div(layer.output_channels, device.channels_per_pass))


def kernel_taps(layer: Layer) -> int:
    """Weights per kernel as the hardware stores it (1x1 linear, k for Conv1d)."""
    if layer.operator == Op.CONV1D:
        return layer.kernel_size[0]
    return layer.kernel_size[0] * layer.kernel_size[1]


def same_weights(a: Layer, b: Layer) -> bool:
    """The two layers store identical kernels (operator, kernel, weight bits, values)."""
    if a.weights is None or b.weights is None:
        return False
    wa, wb = np.asarray(a.weights), np.asarray(b.weights)
    return a.operator == b.operator and a.kernel_size == b.kernel_size \
        and a.quantization == b.quantization and a.conv_groups == b.conv_groups \
        and wa.shape == wb.shape and bool(np.array_equal(wa, wb))


def weight_bits(layer: Layer) -> int:
    """Bits per stored weight (binary weights take one bit)."""
    return abs(layer.quantization) if layer.quantization else 8


def pixels(dim: tuple[int, int]) -> int:
    return dim[0] * dim[1]


def output_shape(layer: Layer) -> tuple[int, int] | None:
    """The output dimensions the hardware produces from `pooled_dim` (None: not defined)."""
    ph, pw = layer.pooled_dim
    if layer.flatten:
        return (1, 1)
    if layer.operator == Op.NONE:
        return (ph, pw)
    kh, kw = layer.kernel_size
    (dh, dw), (padh, padw) = layer.dilation, layer.padding
    (sh, sw) = layer.stride
    if layer.operator == Op.CONVTRANSPOSE2D:
        oph, opw = layer.output_padding
        return ((ph - 1) * sh - 2 * padh + dh * (kh - 1) + oph + 1,
                (pw - 1) * sw - 2 * padw + dw * (kw - 1) + opw + 1)
    oh = (ph - dh * (kh - 1) - 1 + 2 * padh) // sh + 1
    if layer.operator == Op.CONV1D:
        return (oh, 1)
    return (oh, (pw - dw * (kw - 1) - 1 + 2 * padw) // sw + 1)


def pooled_shape(layer: Layer) -> tuple[int, int]:
    """Pooled dimensions with the tool's arithmetic (izer: (in + s - k - d + 1) // s)."""
    def one(size: int, k: int, s: int, d: int) -> int:
        return (size + s - k - d + 1) // s

    h = one(layer.input_dim[0], layer.pool[0], layer.pool_stride[0], layer.pool_dilation[0])
    if is_1d(layer):
        return (h, 1)
    return (h, one(layer.input_dim[1], layer.pool[1], layer.pool_stride[1],
                   layer.pool_dilation[1]))


def runs_1x1_as_3x3(device: Device, layer: Layer, ll: int, near_streaming: bool) -> bool:
    """streams_1x1_as_3x3 before a placement exists: `near_streaming` says whether layer
    `ll` streams or reads a streaming layer's output (the automatic mapper knows which
    layers it streams before it has a Placement)."""
    if not device.emulate_1x1_streaming or ll > device.max_stream_layers:
        return False
    return bool(near_streaming) and tuple(layer.kernel_size) == (1, 1) \
        and layer.operator in (Op.CONV2D, Op.CONVTRANSPOSE2D)
