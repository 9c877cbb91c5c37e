"""The Network: hardware layers as the accelerator executes them.

Field names follow the vendor tool's resolved per-layer configuration (the `layers`
record of golden `case.json`), so a resolved Network can be compared with it directly.
Dimensions are `(H, W)` for 2-D data and `(L, 1)` for 1-D data, as the vendor tool holds
them.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Container
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np


class Op(IntEnum):
    """A hardware operator. The values are the vendor's operator codes (its resolved
    configuration, golden `case.json`), so an `Op` compares equal to the vendor's int.

    The traits below are what the stages ask of an operator; a new operator is a new
    member plus its row in `_TRAITS`.
    """

    NONE = 0  # pass-through: pooling and/or element-wise only, no weights
    CONV1D = 1
    CONV2D = 2
    CONVTRANSPOSE2D = 3
    LINEAR = 4

    @property
    def word(self) -> str:
        """The operator's name in reports, messages and the ONNX metadata."""
        return _TRAITS[self].word

    @property
    def sidecar_word(self) -> str:
        """The word the sidecar writer uses for `op:` (the vendor's YAML spelling)."""
        return _TRAITS[self].sidecar_word

    @property
    def passthrough(self) -> bool:
        """No convolution: the layer pools and/or combines operands only."""
        return not _TRAITS[self].has_weights

    @property
    def has_weights(self) -> bool:
        """The layer multiplies by weights held in kernel memory (every operator but
        pass-through)."""
        return _TRAITS[self].has_weights

    @property
    def convolution(self) -> bool:
        """A kernel slides over the data (Conv1d, Conv2d, ConvTranspose2d): padding and
        depthwise groups apply."""
        return _TRAITS[self].convolution

    @property
    def one_d(self) -> bool:
        """The operator works on 1-D (L, 1) data (Conv1d)."""
        return _TRAITS[self].one_d

    @property
    def transposed(self) -> bool:
        """A transposed convolution (upsampling, stride 2, weights stored (in, out))."""
        return _TRAITS[self].transposed


@dataclass(frozen=True)
class _OpTraits:
    word: str
    sidecar_word: str
    has_weights: bool
    convolution: bool
    one_d: bool = False
    transposed: bool = False


_TRAITS = {
    Op.NONE: _OpTraits("passthrough", "passthrough", has_weights=False, convolution=False),
    Op.CONV1D: _OpTraits("conv1d", "conv1d", has_weights=True, convolution=True, one_d=True),
    Op.CONV2D: _OpTraits("conv2d", "conv2d", has_weights=True, convolution=True),
    Op.CONVTRANSPOSE2D: _OpTraits("convtranspose2d", "convtranspose2d", has_weights=True,
                                  convolution=True, transposed=True),
    # The vendor's sidecars spell a fully connected layer `mlp`.
    Op.LINEAR: _OpTraits("linear", "mlp", has_weights=True, convolution=False),
}

# The vendor's code names, kept for callers that spell operators so (tests, builders).
OP_NONE, OP_CONV1D, OP_CONV2D = Op.NONE, Op.CONV1D, Op.CONV2D
OP_CONVTRANSPOSE2D, OP_LINEAR = Op.CONVTRANSPOSE2D, Op.LINEAR
OPERATOR_NAMES = {op: op.word for op in Op}
_OP_CODES = frozenset(int(op) for op in Op)

ACT_NONE = None
ACT_RELU = 1
ACT_ABS = 2
ACTIVATION_NAMES = {ACT_NONE: None, ACT_RELU: "ReLU", ACT_ABS: "Abs"}

ELTWISE_NONE = 0
ELTWISE_ADD = -1
ELTWISE_MUL = -2
ELTWISE_OR = -3
ELTWISE_SUB = -4
ELTWISE_XOR = -5
ELTWISE_NAMES = {ELTWISE_NONE: "none", ELTWISE_ADD: "add", ELTWISE_MUL: "mul",
                 ELTWISE_OR: "or", ELTWISE_SUB: "sub", ELTWISE_XOR: "xor"}


@dataclass(frozen=True, eq=False)
class Layer:
    """One hardware layer (pool -> element-wise -> conv/linear -> shift -> activation)."""

    name: str
    # An Op; an int that is no operator code stays as given, for legalize to name it.
    operator: Op | int
    input_channels: int
    output_channels: int
    input_dim: tuple[int, int]
    pooled_dim: tuple[int, int]
    output_dim: tuple[int, int]
    kernel_size: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    conv_groups: int = 1
    pool: tuple[int, int] = (1, 1)
    pool_stride: tuple[int, int] = (1, 1)
    pool_dilation: tuple[int, int] = (1, 1)
    pool_average: bool = False
    pool_first: bool = True
    eltwise: int = ELTWISE_NONE
    operands: int = 1
    activation: int | None = ACT_NONE
    output_shift: int = 0
    quantization: int = 8  # weight bits; -1 is binary (MAX78002); 0: the layer has no weights
    output_width: int = 8
    flatten: bool = False
    output_padding: tuple[int, int] = (0, 0)
    # Graph connectivity: indices of producing layers; -1 is the network input, -2
    # (DATA_BUFFER) the network's data buffer.
    in_sequences: tuple[int, ...] | None = None
    # Data buffer (Network.data_buffer): a pass-through layer reading the buffer with
    # buffer_shift = k moves its positions k.. down by k (the vendor's `buffer_shift`);
    # a layer with buffer_insert = k writes its k output positions into the buffer's
    # last k (`buffer_insert`). 0: neither.
    buffer_shift: int = 0
    buffer_insert: int = 0
    # Integer weights in PyTorch layout (out, in/groups, kh, kw) / (out, in/groups, k) /
    # linear (out, in) / ConvTranspose2d (in, out/groups, kh, kw) as the checkpoint stores
    # them (the builder flips the kernel); None for layers without weights.
    weights: np.ndarray | None = field(default=None, repr=False)
    # Value added to the accumulator per output channel (already scaled: the hardware's
    # 8-bit bias value * 128, whatever the weight width), or None.
    bias: np.ndarray | None = field(default=None, repr=False)
    # The hardware's 8-bit bias values as stored in bias memory, or None.
    bias_hw: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # Readers hand over the vendor's int codes; the stages ask the Op for its traits.
        if not isinstance(self.operator, Op) and self.operator in _OP_CODES:
            object.__setattr__(self, "operator", Op(self.operator))

    @property
    def operator_name(self) -> str:
        return Op(self.operator).word


DATA_BUFFER = -2  # in_sequences value of the data buffer (the vendor's code for it)


@dataclass(frozen=True)
class DataBuffer:
    """A rolling buffer in data memory that keeps its values from one inference to the
    next (seed 000 "Rolling Buffers", `data_buffer`): e.g. one frame's CNN result per
    inference, the last `length` frames read by a temporal convolution. It holds
    `channels` x `length` 1-D data, all zero before the first inference.

    One inference updates it the way the vendor's sidecars do (networks/
    ai85-kinetics-actiontcn.yaml): a pass-through layer with `buffer_shift` k drops the
    oldest k positions, a later layer with `buffer_insert` k appends its k output
    positions, and layers reading DATA_BUFFER after that see the updated buffer.
    """

    name: str
    channels: int
    length: int


@dataclass(frozen=True, eq=False)
class Network:
    """The hardware layers in execution order, with the input shape."""

    layers: tuple[Layer, ...]
    input_shape: tuple[int, ...]  # (C, H, W) or (C, L)
    device: str | None = None
    name: str = "network"
    # The layers whose results leave the accelerator (the model's graph outputs, the
    # vendor's `output: true` layers), in the model's output order. None: every layer no
    # other layer reads.
    outputs: tuple[int, ...] | None = None
    data_buffer: DataBuffer | None = None


def rewire_along(network: Network, order: list[int]) -> Network:
    """`network` with each layer reached by a jump in `order` (the layer order a
    sidecar's `simulated_sequence` states, seed 004) reading the layer it was reached
    from: what a layer reads by default is its predecessor's output, and after a jump
    that is the layer the sequencer ran before it."""
    layers = list(network.layers)
    for prev, ll in zip(order, order[1:], strict=False):
        lay = layers[ll]
        if prev != ll - 1 and lay.in_sequences in (None, (ll - 1,)):
            layers[ll] = dataclasses.replace(lay, in_sequences=(prev,))
    return dataclasses.replace(network, layers=tuple(layers))


def output_layers(network: Network) -> tuple[int, ...]:
    """The network's output layers: `network.outputs`, else the layers no other layer
    reads (in layer order)."""
    if network.outputs is not None:
        return tuple(network.outputs)
    used: set[int] = set()
    for i, lay in enumerate(network.layers):
        used.update(lay.in_sequences if lay.in_sequences is not None else (i - 1,))
        if lay.buffer_insert or lay.buffer_shift:
            used.add(i)  # its result goes into the data buffer
    return tuple(i for i in range(len(network.layers)) if i not in used)


def unique_name(base: str, taken: Container[str]) -> str:
    """`base`, or `base_1`, `base_2`, ... the first one not in `taken` (layer names must
    be unique: the sidecar and the report refer to layers by name)."""
    name, k = base, 1
    while name in taken:
        name = f"{base}_{k}"
        k += 1
    return name
