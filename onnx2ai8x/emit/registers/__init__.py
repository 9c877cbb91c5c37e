"""Register values of the CNN accelerator, computed per register group.

`register_program(placement, memory, options)` returns every register write of the
generated C per function (cnn_init, cnn_configure, cnn_start, cnn_stop, cnn_continue,
CNN_ISR). Modules: `device` (register map per device), `hwlayers` (what the hardware runs
per layer), `layer_geometry`, `layer_control`, `streaming` (per-layer registers),
`control` (quadrant control, start/stop/ISR, FIFO control).
"""
from .device import DeviceRegs, device_regs
from .hwlayers import HwNetwork, derive
from .program import RegisterProgram, register_program
from .writes import BIAS_ALL_GROUPS, WeightMemoryMap, Write

__all__ = ["BIAS_ALL_GROUPS", "DeviceRegs", "HwNetwork", "RegisterProgram", "WeightMemoryMap",
           "Write", "derive", "device_regs", "register_program"]
