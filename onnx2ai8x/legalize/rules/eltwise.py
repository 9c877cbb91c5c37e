"""Element-wise rules: kind, operand count, fusion with Conv1d, multi-pass fusion.

A rule's docstring is the user-facing reason (see the package docstring).
"""
from __future__ import annotations

import numpy as np

from ...devices import Device
from ...network import ELTWISE_ADD, ELTWISE_NAMES, ELTWISE_OR, ELTWISE_SUB, ELTWISE_XOR, Layer, Op
from ..facts import in_passes, is_eltwise, pools
from .base import Rule, diag, only


def eltwise_kind(layer, network, device):
    """Element-wise operations are add, sub, bitwise xor and bitwise or.

    Seed: "Supported element-wise operations are add, sub, bitwise xor, and bitwise or."
    """
    if is_eltwise(layer) and layer.eltwise not in (ELTWISE_ADD, ELTWISE_SUB, ELTWISE_OR,
                                                   ELTWISE_XOR):
        name = ELTWISE_NAMES.get(layer.eltwise, str(layer.eltwise))
        return diag("eltwise-kind", layer.name,
                    f"element-wise `{name}` is not supported in hardware",
                    "use add, sub, or, xor; compute other operations on the host")
    return None


def eltwise_operands(layer, network, device):
    """Element-wise operators take 2 up to 16 inputs; other layers take one.

    Seed: "Element-wise operators support from 2 up to 16 inputs."
    """
    n = layer.operands
    if is_eltwise(layer):
        if not device.eltwise_operands_min <= n <= device.eltwise_operands_max:
            return diag("eltwise-operands", layer.name,
                        f"element-wise operation with {n} operands (2 to "
                        f"{device.eltwise_operands_max})",
                        "chain several element-wise layers of at most 16 operands")
    elif n != 1:
        return diag("eltwise-operands", layer.name,
                    f"{n} operands without an element-wise operation",
                    "give the layer an element-wise operation or a single input")
    return None


def eltwise_conv1d(layer, network, device):
    """Element-wise operations cannot be fused with Conv1d.

    Seed: "Element-wise operators can be chained in-flight with pooling and 2D
    convolution"; the vendor tool rejects element-wise operations with Conv1d.
    """
    if layer.operands > 1:
        return diag("eltwise-conv1d", layer.name,
                    "an element-wise operation cannot be fused with Conv1d",
                    "do the element-wise operation in its own (pass-through) layer")
    return None


def eltwise_multipass(layer, network, device):
    """Multi-pass element-wise with a convolution or pooling has limits (MAX78000/02).

    MAX78000 (vendor tool): with more than 64 channels, an element-wise operation fused
    with a convolution or pooling works only for 2 operands x 2 passes. Seed (MAX78002):
    "Element-wise operations can happen "in-flight" in the same layer as a convolution,
    except when the input is multi-pass (i.e., more than 64 channels), and a bias addition
    is also requested." The vendor tool refuses the bias with any element-wise operands
    (each operand is read in a pass of its own; izer max7800x.py checks `operands > 1`
    only), so a single-pass one is refused too: what it accepts is what was tested.
    """
    passes = in_passes(layer, device)
    ops = layer.operands
    if ops <= 1:
        return None
    if _eltwise_conv_bias(layer, device):
        return diag("eltwise-multipass", layer.name,
                    f"a {ops}-operand element-wise operation on {layer.input_channels} "
                    "channels fused with a convolution that adds a bias",
                    "train the convolution without bias, or do the element-wise operation "
                    "in a separate pass-through layer")
    if passes <= 1:
        return None
    if device.eltwise_multipass_emulated and ops * passes != ops + passes and \
            (layer.operator != Op.NONE or pools(layer)):
        return diag("eltwise-multipass", layer.name,
                    f"a {ops}-operand element-wise operation on {layer.input_channels} "
                    f"channels ({passes} passes) cannot be fused with a convolution or "
                    "pooling on this device",
                    "do the element-wise operation in a separate pass-through layer")
    return None


def _eltwise_conv_bias(layer: Layer, device: Device) -> bool:
    """An element-wise operation fused with a convolution that adds a bias, on a device
    without that fusion (MAX78002)."""
    return not device.eltwise_multipass_conv_bias and layer.operands > 1 and \
        layer.operator != Op.NONE and layer.bias is not None and \
        bool(np.any(np.asarray(layer.bias) != 0))


RULES: tuple[Rule, ...] = (
    Rule("eltwise-kind", eltwise_kind),
    Rule("eltwise-operands", eltwise_operands),
    Rule("eltwise-conv1d", eltwise_conv1d, applies_to=only(Op.CONV1D)),
    Rule("eltwise-multipass", eltwise_multipass),
)
