"""Data sections of the generated C: kernel stream, bias loads and input loads.

Pure functions returning plain values that the project writer lays out:

- `kernel_stream(network, placement, kernels)` -> `[(address, [words])]`: the `KERNELS`
  macro (kernel memory writes, address of each run and its 32-bit words);
- `bias_loads(network, placement, bias)` -> `[(address, [bytes])]`: one
  `memcpy_8to32` per bias-memory run;
- `input_loads(network, placement, sample)` -> `[(address, [words])]`: one `memcpy32`
  per data-memory run of the sample input (not used when the input comes from FIFOs).

Also the data-memory geometry per device (`data_memory(device)`), shared with
`onnx2ai8x.emit.unload`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Ai8xError

MAX_PROCESSORS = 64
PROCESSORS_PER_QUADRANT = 16
PROCESSORS_PER_INSTANCE = 4  # four processors share one data-memory instance (HWC word)


@dataclass(frozen=True)
class DataMemory:
    """Data-memory address arithmetic of one device (seed 000, "Data memory").

    `base`: absolute address of quadrant 0, processor 0; `quadrant_stride`: bytes between
    quadrants; `instance_words`: 32-bit words between the memory instances of two
    neighbouring processor quads (MAX78002 leaves a hole after each instance).
    """

    device: str
    base: int
    quadrant_stride: int
    instance_words: int

    def quad_word(self, processor: int) -> int:
        """Word index of the data-memory instance serving `processor`'s quad.

        The vendor combines the two parts with a bitwise or; they never overlap.
        """
        quad = processor & ~(PROCESSORS_PER_INSTANCE - 1)
        return ((quad % PROCESSORS_PER_QUADRANT) * self.instance_words
                | (quad // PROCESSORS_PER_QUADRANT) * self.quadrant_stride // 4)


_DATA_MEMORY = {
    "MAX78000": DataMemory("MAX78000", 0x50400000, 0x400000, 2048),
    "MAX78002": DataMemory("MAX78002", 0x51800000, 0x1000000, 8192),
}


def data_memory(device: str) -> DataMemory:
    try:
        return _DATA_MEMORY[device]
    except KeyError:
        raise Ai8xError("emit.device", device, f"no data-memory layout for device `{device}`",
                        "use --device MAX78000 or --device MAX78002") from None


def ffs(value: int) -> int:
    """Index of the lowest set bit (value > 0)."""
    return (value & -value).bit_length() - 1


def popcount(value: int) -> int:
    return bin(value).count("1")


def output_expansion(channels: int) -> tuple[int, int]:
    """(passes, channels per pass) of a layer's output.

    More than 64 channels take several passes; each pass but the last uses a multiple
    of four processors (one data-memory word holds four channels; seed 000,
    "Channels > 64").
    """
    passes = -(-channels // MAX_PROCESSORS)
    per_pass = -(-channels // passes)
    if channels > MAX_PROCESSORS:
        per_pass = min(-(-per_pass // PROCESSORS_PER_INSTANCE) * PROCESSORS_PER_INSTANCE,
                       MAX_PROCESSORS)
    return passes, per_pass
