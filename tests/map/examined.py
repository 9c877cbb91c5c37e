"""A placement built or edited in a test, examined as a conversion with the given
converter options would examine it (map/lowered.examine under
options.decide_conversion): FIFO input when its first layer streams."""
from __future__ import annotations

from onnx2ai8x.map.lowered import HwPlacement, examine
from onnx2ai8x.options import EmitOptions, decide_conversion
from onnx2ai8x.placement import Placement


def examined(placement: Placement, options: EmitOptions | None = None) -> HwPlacement:
    return examine(placement, decide_conversion(options or EmitOptions(), placement.device))
