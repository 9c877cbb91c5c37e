"""The lowered network of a placement built in a test (map/lowered.lower), under the
hardware choices of the given converter options as decide_hardware makes them."""
from __future__ import annotations

from onnx2ai8x.map.lowered import HwNetwork, lower
from onnx2ai8x.options import EmitOptions, decide_hardware
from onnx2ai8x.placement import Placement


def lowered(placement: Placement, options: EmitOptions | None = None) -> HwNetwork:
    """`placement` lowered under `options` (default EmitOptions()): exactly the choices
    the options state, nothing implied from the mapping."""
    choices, _ = decide_hardware(options or EmitOptions(), placement.device)
    return lower(placement, choices)
