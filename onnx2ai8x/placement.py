"""The Placement: where each hardware layer runs and where its data lives.

Field names follow the vendor tool's resolved configuration (golden `case.json`
`layers`), so a Placement can be compared with it, and built from it in tests.
Kernel-memory and bias-memory allocation are computed from the Placement once, by
`onnx2ai8x.map.weights.allocate_weights`, and carried in `Placement.weights`.
"""
from __future__ import annotations

from dataclasses import dataclass

from .devices import Device, get_device
from .network import Network


@dataclass(frozen=True)
class LayerPlacement:
    """Mapping decisions for one layer (sidecar keys, resolved)."""

    processor_map: int  # 64-bit mask of input processors
    output_processor_map: int  # 64-bit mask of output processors
    in_offset: int  # byte offset of the input in data memory
    out_offset: int  # byte offset of the output in data memory
    write_gap: int = 0
    streaming: bool = False
    big_data: bool = False  # CHW input (only the first layer can be CHW)
    bypass: bool = False
    output_layer: bool = False
    next_sequence: int = -1
    prev_sequence: int = -1
    in_sequences: tuple[int, ...] | None = None
    input_skip: int = 0
    input_channel_skip: int = 0
    input_crop: tuple[int, int] = (0, 0)
    read_ahead: bool = False
    buffer_shift: int | None = None
    buffer_insert: int | None = None
    bias_group_map: tuple[int, ...] | None = None
    simulated_sequence: int | None = None
    # MAX78002 "snoop"/conditional and other rarely used keys, as given in the sidecar.
    extra: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class BufferPlacement:
    """Where the network's data buffer (Network.data_buffer) lives: the sidecar's global
    `data_buffer` (seed 000, Rolling Buffers). One channel per processor of
    `processors` (in order), position p of every channel at byte `offset + 4 * p` of
    that processor's data memory; it stays there across inferences, so no other layer
    may write over it."""

    processors: int  # 64-bit mask
    offset: int  # byte offset of position 0


@dataclass(frozen=True, eq=False)
class Placement:
    """A Network placed on a device."""

    network: Network
    device: Device
    layers: tuple[LayerPlacement, ...]
    final_layer: int
    first_layer_used: int = 0
    # Kernel and bias memory (onnx2ai8x.map.weights.WeightMemory), attached once by the
    # mapper; read through onnx2ai8x.map.weights.weights_of.
    weights: object | None = None
    # Where Network.data_buffer lives (None: the network has no data buffer).
    data_buffer: BufferPlacement | None = None

    def __post_init__(self) -> None:
        # The device is resolved here, once: a name (MAX78000, AI85, ...) given by a
        # caller becomes the Device record every later stage reads; an unknown name is a
        # usage error.
        object.__setattr__(self, "device", get_device(self.device))
