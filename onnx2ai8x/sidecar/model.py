"""Records of a parsed sidecar (the vendor's YAML network description).

Values are the sidecar's statements with the language's per-layer defaults applied
(seed 004, "Per-Layer Configuration"); what depends on other layers, the weights or the
input (channels, dimensions, default offsets and processor maps, final output shift) is
left to `onnx2ai8x.sidecar.resolve`. `None` means "not given, derive it".
"""
from __future__ import annotations

import json
from dataclasses import dataclass

Pair = tuple[int, int]

# in_sequences / next_sequence targets that are not layers
INPUT = -1  # "input" / -1: the network's input data
DATA_BUFFER = -2  # the global `data_buffer` (rolling buffer) by its name
STOP = -1  # next_sequence "stop"


@dataclass(frozen=True)
class SidecarLayer:
    """One entry of `layers`, in execution-sequence order (index = position)."""

    index: int  # position after sorting by `sequence` (the vendor's layer number)
    yaml_index: int  # position in the file's `layers` list (for messages)
    name: str | None
    processors: int
    output_processors: int | None
    in_offset: int | None
    out_offset: int
    out_offset_given: bool
    output_width: int
    big_data: bool  # data_format CHW/big
    operator: int  # onnx2ai8x.network.OP_*
    operator_given: bool
    eltwise: int  # onnx2ai8x.network.ELTWISE_*
    operands: int
    padding: Pair
    pad_given: bool
    dilation: Pair
    conv_groups: int
    pool_first: bool
    activation: int | None
    quantization: int | None  # 1, 2, 4, 8, -1 (binary); None: from the checkpoint
    output_shift: int | None  # None: from the checkpoint (implicit shift added later)
    kernel_size: Pair
    kernel_given: bool
    stride: Pair
    pool: Pair
    pooling: bool
    pool_average: bool
    pool_stride: Pair
    pool_dilation: Pair
    in_channels: int | None
    in_dim: Pair | None
    in_crop: Pair
    in_sequences: tuple[int, ...] | None  # names resolved; -1 input, -2 data buffer
    out_channels: int | None
    streaming: bool
    flatten: bool
    write_gap: int
    read_gap: int  # `read_gap` / `in_skip`
    in_channel_skip: int
    bias_group: tuple[int, ...] | None
    output: bool
    weight_source: int | None
    buffer_shift: int | None
    buffer_insert: int | None
    next_sequence: int | None  # -1 stop, None: the next layer
    simulated_sequence: int | None
    snoop_sequence: int | None
    bypass: bool
    calcx4: bool
    readahead: bool
    tcalc: bool | None
    output_padding: Pair
    raw: str  # the layer's YAML mapping as canonical JSON (for ai8x.sidecar metadata)

    @property
    def label(self) -> str:
        """How messages name the layer: `layer 3 (conv3)` or `layer 3`."""
        return f"layer {self.index}" + (f" ({self.name})" if self.name else "")

    def mapping(self) -> dict:
        return json.loads(self.raw)


@dataclass(frozen=True)
class Unload:
    """One `unload` item: a custom region copied out by cnn_unload()."""

    processors: int
    channels: int
    dim: Pair
    offset: int
    width: int
    write_gap: int


@dataclass(frozen=True)
class DataBuffer:
    """The global rolling `data_buffer`."""

    name: str
    processors: int
    channels: int
    dim: Pair
    offset: int
    width: int


@dataclass(frozen=True)
class Sidecar:
    """A whole parsed sidecar."""

    source: str  # file path or "<string>"
    arch: str
    dataset: str
    layers: tuple[SidecarLayer, ...]
    output_map: int | None = None
    unload: tuple[Unload, ...] | None = None
    data_buffer: tuple[DataBuffer, ...] | None = None
    snoop: tuple[int, ...] | None = None  # MAX78002 snoop register values, as given
    bias: tuple[int, ...] | None = None  # test-only global bias
    weights: str | None = None  # test-only global weights, as JSON

    def where(self, layer: SidecarLayer | int | None = None, key: str | None = None) -> str:
        text = self.source
        if layer is not None:
            lay = self.layers[layer] if isinstance(layer, int) else layer
            text += f": {lay.label}"
        if key:
            text += f", `{key}`"
        return text
