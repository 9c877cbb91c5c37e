"""Device facts the sidecar checks need (vendor `izer/tornadocnn.py`, hardware chapters).

A small private table: the project-wide device model lives elsewhere; the resolver only
needs these few numbers and must not depend on a module another stage is still writing.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import EXIT_USAGE, Ai8xError


@dataclass(frozen=True)
class SidecarLimits:
    """The sidecar language's limits for one device (layer count, sequence numbers, ...)."""

    name: str
    max_layers: int
    max_proc: int  # processors (64-bit masks)
    p_shared: int  # processors sharing one data memory instance
    data_mem_bytes: int  # per processor group quadrant: offsets run 0 .. data_mem_bytes-1
    max_row_col: int
    binary_weights: bool  # quantization: binary (-1/+1 weights)
    link_layer: bool  # next_sequence may jump (layers need not run in order)
    depthwise: bool  # groups > 1


_DEVICES = {
    # MAX78000: 32 layers, 8 KiB x 4 bytes per memory instance (offset range 0..0x7fff).
    "MAX78000": SidecarLimits("MAX78000", 32, 64, 4, 0x8000, 1024, False, False, False),
    # MAX78002: 128 layers, 5120 words per instance (offset range 0..0x13fff).
    "MAX78002": SidecarLimits("MAX78002", 128, 64, 4, 0x14000, 2048, True, True, True),
}

_ALIASES = {"AI85": "MAX78000", "AI87": "MAX78002", "85": "MAX78000", "87": "MAX78002"}


def limits_for(device: str) -> SidecarLimits:
    key = str(device).upper()
    key = _ALIASES.get(key, key)
    try:
        return _DEVICES[key]
    except KeyError:
        raise Ai8xError("usage.device", str(device), "unknown device",
                        "use MAX78000 or MAX78002", exit_code=EXIT_USAGE) from None
