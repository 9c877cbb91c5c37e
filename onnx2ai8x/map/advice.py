"""Placements that are allowed but that the hardware may not run as computed (warnings,
not errors): the user is told, the project is still written, as the vendor's tool does.
"""
from __future__ import annotations

import numpy as np

from ..errors import Diagnostic
from ..network import Network
from ..placement import Placement


def _warning(d: Diagnostic) -> str:
    return d.render().replace("error[", "warning[", 1)


def streaming_bias(network: Network, placement: Placement) -> tuple[str, ...]:
    """Streaming layers with a non-zero bias on a device whose streaming bias is not
    reliable.

    Seed 000 (MAX78000 limits, "Streaming mode"): "For streaming layers, bias values may
    not be added correctly in all cases." The vendor's tool warns for the same layers
    (a bias with a non-zero value, not a grouped convolution; izer/kbias.py, devices
    without SUPPORT_STREAM_BIAS); the MAX78002 adds it correctly (Device.stream_bias).
    """
    if placement.device.stream_bias:
        return ()
    found = []
    for index, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        bias = lay.bias_hw if lay.bias_hw is not None else lay.bias
        if not pl.streaming or bias is None or not np.any(np.asarray(bias) != 0) or \
                lay.conv_groups > 1:
            continue
        found.append(_warning(Diagnostic(
            "map.streaming-bias", f"layer {index} ({lay.name})",
            f"the layer streams and adds a bias; on the {placement.device.name} a "
            "streaming layer's bias may not be added correctly in all cases (the known "
            "answer here assumes it is)",
            "check the output on the board, or train the layer without a bias "
            "(bias=False) or with a smaller input that needs no streaming")))
    return tuple(found)
