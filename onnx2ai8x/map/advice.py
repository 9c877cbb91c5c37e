"""Placements that are allowed but that the hardware may not run as computed (warnings,
not errors): the user is told, the project is still written, as the vendor's tool does.
"""
from __future__ import annotations

import numpy as np

from ..errors import Diagnostic
from ..placement import Placement


def _warning(d: Diagnostic) -> str:
    return d.render().replace("error[", "warning[", 1)


def streaming_bias(placement: Placement) -> tuple[str, ...]:
    """Streaming layers with a non-zero bias on a device whose streaming bias is not
    reliable.

    Seed 000 (MAX78000 limits, "Streaming mode"): "For streaming layers, bias values may
    not be added correctly in all cases." The vendor's tool warns for the same layers
    (a bias with a non-zero value, not a grouped convolution; izer/kbias.py, devices
    without SUPPORT_STREAM_BIAS); the MAX78002 adds it correctly (Device.stream_bias).
    """
    network = placement.network
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


# --------------------------------------------------------------------------- energy hints
# The vendor tool's energy and performance hints (shown unless --ignore-energy-warning),
# as named warnings with the layer and a fix. They change nothing in the project.

def energy_hints(placement: Placement) -> tuple[str, ...]:
    """Layers that cost more energy than they need to.

    - A hidden layer (not the first) whose input channel count is not a multiple of 4:
      the accelerator moves data four channels (one 32-bit word) at a time, so the
      best energy per inference comes with multiples of 4.
    - A depthwise convolution whose output processors are not its input processors:
      the data moves across processors instead of staying put ("broadcast" mode, where
      each processor's output lands in its own memory), which costs time and energy.
    """
    network = placement.network
    found = []
    first = next((i for i, pl in enumerate(placement.layers) if pl.processor_map), 0)
    for index, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        where = f"layer {index} ({lay.name})"
        if index != first and lay.input_channels % 4:
            found.append(_warning(Diagnostic(
                "map.energy-channels", where,
                f"the layer reads {lay.input_channels} input channels, not a multiple of 4; "
                "the accelerator moves four channels per word, so the best energy per "
                "inference comes with multiples of 4",
                f"give the layer before it {lay.input_channels + (-lay.input_channels) % 4} "
                "output channels (the extra ones can be zero)")))
        if lay.conv_groups > 1 and pl.processor_map != pl.output_processor_map:
            found.append(_warning(Diagnostic(
                "map.energy-depthwise", where,
                "the depthwise convolution moves data across processors (input "
                f"{pl.processor_map:#018x}, output {pl.output_processor_map:#018x}), which "
                "costs time and energy",
                "place its output on its input processors (output_processor_map equal to "
                "processor_map, broadcast mode)")))
    return tuple(found)
