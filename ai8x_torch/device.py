"""The target device and numeric mode the ai8x modules model.

The vendor's training module keeps the device in a module global that model files read
(`ai8x.dev.WEIGHT_INPUTS`, ...) and that `set_device` replaces. Model files written
against that API must run unchanged, so the same calls exist here, but the selection is
a `contextvars.ContextVar` holding an immutable `Device` record: nothing is mutated in
place, and a `with using_device(...)` block (or a thread) can select its own device.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, replace

from onnx2ai8x.errors import EXIT_USAGE, Ai8xError

# Device numbers the vendor's training scripts use, and their part numbers.
_PARTS = {84: "AI84", 85: "MAX78000", 87: "MAX78002"}
_NUMBERS = {"AI84": 84, "MAX78000": 85, "AI85": 85, "MAX78002": 87, "AI87": 87}


@dataclass(frozen=True)
class Device:
    """Implementation limits of one accelerator and the numeric mode.

    `simulate` selects the accelerator's integer arithmetic (inputs, weights and outputs
    are the integers the hardware holds); otherwise activations are scaled to [-1, 1) as
    in floating-point / quantization-aware training. `round_avg` rounds average pooling
    to nearest instead of truncating (vendor `--avg-pool-rounding`).
    """

    device: int
    simulate: bool = False
    round_avg: bool = False
    WEIGHT_BITS: int = 8
    DATA_BITS: int = 8
    ACTIVATION_BITS: int = 8
    # Accumulator bits a wide (32-bit) output keeps (seed 000, "Data Format").
    FULL_ACC_BITS: int = 30
    FC_ACTIVATION_BITS: int = 16
    WIDE_LAYER_RESOLUTION_BITS: int = 15
    # Input channels per processor pass and kernel memory depth (seed 000, "Limitations").
    WEIGHT_INPUTS: int = 256
    WEIGHT_DEPTH: int = 768
    MAX_AVG_POOL: int = 16

    @property
    def partnum(self) -> str:
        return _PARTS[self.device]

    def __str__(self) -> str:
        return {84: "DevAI84", 85: "DevAI85", 87: "DevAI87"}[self.device]


def make_device(device: int | str, simulate: bool = False, round_avg: bool = False) -> Device:
    """The `Device` record for a device number (84, 85, 87) or part name."""
    if isinstance(device, str):
        number = _NUMBERS.get(device.upper())
    else:
        number = int(device) if int(device) in _PARTS else None
    if number is None:
        raise Ai8xError("usage.device", f"device {device!r}", "unknown device",
                        "use 85 / 'MAX78000' or 87 / 'MAX78002'", exit_code=EXIT_USAGE)
    if number == 84:
        if round_avg:
            raise Ai8xError("usage.device", "AI84", "AI84 has no average-pool rounding",
                            "set round_avg=False", exit_code=EXIT_USAGE)
        return Device(84, simulate, round_avg, FULL_ACC_BITS=8, WIDE_LAYER_RESOLUTION_BITS=8,
                      WEIGHT_INPUTS=64, WEIGHT_DEPTH=128, MAX_AVG_POOL=4)
    if number == 87:
        return Device(87, simulate, round_avg, WEIGHT_DEPTH=5120)
    return Device(85, simulate, round_avg)


_DEFAULT = Device(85)
_CURRENT: contextvars.ContextVar[Device | None] = contextvars.ContextVar(
    "ai8x_torch_device", default=None)


def current_device() -> Device:
    """The device selected by `set_device` (MAX78000, floating point, by default)."""
    return _CURRENT.get() or _DEFAULT


def set_device(device: int | str, simulate: bool, round_avg: bool = False,
               verbose: bool = True) -> Device:
    """Select the device and numeric mode for the ai8x modules (vendor-compatible call).

    Modules read the selection when they run, so switching to `simulate=True` after a
    model was built takes effect on its next forward pass.
    """
    dev = make_device(device, simulate, round_avg)
    _CURRENT.set(dev)
    if verbose:
        print(f"Configuring device: {dev.partnum}, simulate={simulate}.")
    return dev


@contextlib.contextmanager
def using_device(device: int | str | Device, simulate: bool | None = None,
                 round_avg: bool | None = None) -> Iterator[Device]:
    """Select a device inside a `with` block only."""
    dev = device if isinstance(device, Device) else make_device(device)
    if simulate is not None:
        dev = replace(dev, simulate=simulate)
    if round_avg is not None:
        dev = replace(dev, round_avg=round_avg)
    token = _CURRENT.set(dev)
    try:
        yield dev
    finally:
        _CURRENT.reset(token)
