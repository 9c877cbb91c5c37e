"""Size and shape rules: channels, data dimensions, dimension arithmetic, flattening.

A rule's docstring is the user-facing reason (see the package docstring).
"""
from __future__ import annotations

from ...network import Op
from ..facts import output_shape, pixels, pooled_shape, pools
from .base import Rule, diag, op_word


def channels(layer, network, device):
    """A layer has at most 1024 input and 1024 output channels.

    Seed: "The number of input channels must not exceed 1024 per layer." / "The number of
    output channels must not exceed 1024 per layer." (The MAX78002 guide says 2048; the
    vendor tool and the 16-pass register field limit both devices to 1024.)
    """
    out = []
    for what, n in (("input", layer.input_channels), ("output", layer.output_channels)):
        if n < 1 or n > device.max_channels:
            out.append(diag("channels", layer.name,
                            f"{n} {what} channels (1 to {device.max_channels} per layer)",
                            "split the layer into several layers with fewer channels "
                            "and concatenate their outputs"))
    return out


def dimensions(layer, network, device):
    """Rows and columns of input and output data are limited (1024 / 2048).

    Seed: "The maximum dimension (number of rows or columns) for input or output data is
    1023" (2047 on MAX78002); the vendor tool accepts up to 1024 (2048).
    """
    out = []
    for what, dim in (("input", layer.input_dim), ("pooled", layer.pooled_dim),
                      ("output", layer.output_dim)):
        if min(dim) < 1:
            out.append(diag("dimensions", layer.name,
                            f"{what} dimension {dim[0]}x{dim[1]} is empty",
                            "reduce pooling/stride or enlarge the input"))
        elif max(dim) > device.max_dim:
            out.append(diag("dimensions", layer.name,
                            f"{what} dimension {dim[0]}x{dim[1]} exceeds {device.max_dim} "
                            f"rows/columns",
                            "fold the data into more channels (data folding) or downscale "
                            "the input"))
    return out


def shape_consistency(layer, network, device):
    """Pooled and output dimensions must follow from the input dimensions.

    The pooling unit's and convolution's output sizes (vendor tool arithmetic); a
    mismatch means the model's shapes cannot be produced by this hardware layer.
    """
    if min(layer.input_dim) < 1:
        return None
    want_pool = pooled_shape(layer)
    if tuple(layer.pooled_dim) != want_pool:
        return diag("shape-consistency", layer.name,
                    f"pooled dimensions {tuple(layer.pooled_dim)} do not follow from input "
                    f"{tuple(layer.input_dim)} with pool {tuple(layer.pool)} stride "
                    f"{tuple(layer.pool_stride)} (hardware gives {want_pool})",
                    "pooling has no padding and no ceil mode on this hardware; crop the "
                    "input or change the pooling")
    want_out = output_shape(layer)
    if want_out is not None and tuple(layer.output_dim) != want_out:
        return diag("shape-consistency", layer.name,
                    f"output dimensions {tuple(layer.output_dim)} do not follow from pooled "
                    f"{tuple(layer.pooled_dim)} (hardware gives {want_out})",
                    "check the layer's padding, kernel and stride")
    return None


def flatten(layer, network, device):
    """Flattening: C*H*W <= 16,384, H*W <= 256, no pooling, Linear layers only.

    Seed: "When "flattening" two-dimensional data, the input dimensions (CxHxW) must
    satisfy CxHxW <= 16,384, and HxW <= 256. Pooling cannot be used at the same time as
    flattening."
    """
    if not layer.flatten:
        return None
    out = []
    hw = pixels(layer.pooled_dim)
    if layer.operator != Op.LINEAR:
        out.append(diag("flatten", layer.name,
                        f"flattening is only available for Linear layers, not {op_word(layer)}",
                        "flatten directly before a Linear (MatMul) layer"))
    if hw > device.flatten_pixels_max:
        out.append(diag("flatten", layer.name,
                        f"flattening {layer.pooled_dim[0]}x{layer.pooled_dim[1]} = {hw} "
                        f"pixels (H*W must be <= {device.flatten_pixels_max})",
                        "pool or convolve the data down to at most 16x16 before the Linear"))
    if layer.input_channels * hw > device.flatten_inputs_max:
        out.append(diag("flatten", layer.name,
                        f"flattening {layer.input_channels}x{layer.pooled_dim[0]}x"
                        f"{layer.pooled_dim[1]} = {layer.input_channels * hw} values "
                        f"(C*H*W must be <= {device.flatten_inputs_max})",
                        "reduce channels or dimensions before the Linear layer"))
    if pools(layer):
        out.append(diag("flatten", layer.name,
                        "pooling cannot be combined with flattening in one layer",
                        "pool in the previous layer (or a pooling-only layer)"))
    return out


RULES: tuple[Rule, ...] = (
    Rule("channels", channels),
    Rule("dimensions", dimensions),
    Rule("shape-consistency", shape_consistency),
    Rule("flatten", flatten),
)
