"""Register values of the CNN accelerator, computed per register group.

`register_program(hw)` (the lowered network, map/lowered.py) returns every register write of the
generated C per function (cnn_init, cnn_configure, cnn_start, cnn_stop, cnn_continue,
CNN_ISR). Modules: `layer_geometry`, `layer_control` (per-layer registers), `control`
(quadrant control, start/stop/ISR, FIFO control). The register layout of each device is
in `onnx2ai8x.devices`; what the hardware runs per layer, and the streaming values, in
`onnx2ai8x.map.hw` and `onnx2ai8x.map.streaming`.
"""
from .program import RegisterProgram, register_program
from .writes import BIAS_ALL_GROUPS, WeightMemoryMap, Write

__all__ = ["BIAS_ALL_GROUPS", "RegisterProgram", "WeightMemoryMap", "Write", "register_program"]
