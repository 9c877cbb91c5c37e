"""The Placement: where each hardware layer runs and where its data lives.

Field names follow the vendor tool's resolved configuration (golden `case.json`
`layers`), so a Placement can be compared with it, and built from it in tests.
Kernel-memory and bias-memory allocation are computed from the Placement once, by
`onnx2ai8x.map.weights.allocate_weights`, and carried with it by the lowered network
(`onnx2ai8x.map.lowered.HwNetwork`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

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
    # Where Network.data_buffer lives (None: the network has no data buffer).
    data_buffer: BufferPlacement | None = None

    def __post_init__(self) -> None:
        # The device is resolved here, once: a name (MAX78000, AI85, ...) given by a
        # caller becomes the Device record every later stage reads; an unknown name is a
        # usage error.
        object.__setattr__(self, "device", get_device(self.device))


def layer_sequence(placement: Placement, start: int = 0) -> list[int]:
    """Layer indices in the order the sequencer runs them from layer `start`: each
    layer's `simulated_sequence` where a sidecar states the path the known answer
    assumes (seed 004, snoop units), else its `next_sequence`, until the end (-1) or a
    layer already run. The cycle estimate walks it from layer 0, the known answer from
    the first layer used."""
    return sequence_walk(placement.layers, start)


class Sequenced(Protocol):
    """A layer with the sequencer's two links (PlacedLayer, sidecar.resolve's layers)."""

    @property
    def simulated_sequence(self) -> int | None: ...

    @property
    def next_sequence(self) -> int | None: ...


def sequence_walk(layers: Sequence[Sequenced], start: int = 0, *,
                  stated: bool = True) -> list[int]:
    """`layer_sequence` over any layers with `simulated_sequence` and `next_sequence`
    (a placement's, or a resolved sidecar's before there is a placement); with
    `stated=False` the sequencer's own order, `simulated_sequence` ignored."""
    order: list[int] = []
    ll = start
    count = len(layers)
    while 0 <= ll < count and ll not in order:
        order.append(ll)
        lay = layers[ll]
        nxt = lay.simulated_sequence if stated and lay.simulated_sequence is not None \
            else lay.next_sequence
        if nxt is None or nxt == -1:
            break
        ll = int(nxt)
    return order
