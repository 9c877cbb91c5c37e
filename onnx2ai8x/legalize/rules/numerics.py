"""Numeric rules: activation, pass-through limits, output width and shift, weight bits
and values, bias.

A rule's docstring is the user-facing reason (see the package docstring).
"""
from __future__ import annotations

import numpy as np

from ...network import ACT_ABS, ACT_NONE, ACT_RELU, Op
from ..facts import WEIGHTED, consumers, pixels, weight_bits
from .base import Rule, diag, layer_index, only, op_word


def activation(layer, network, device):
    """Activations are ReLU and Abs (or none); pass-through layers have none.

    Seed: "The supported activation functions are ReLU and Abs, and a limited subset of
    Linear." Vendor tool: "Pass-through layers must not use activation."
    """
    if layer.activation not in (ACT_NONE, ACT_RELU, ACT_ABS):
        return diag("activation", layer.name,
                    f"activation {layer.activation!r} is not supported",
                    "use ReLU, Abs or no activation")
    if layer.operator == Op.NONE and layer.activation is not ACT_NONE:
        return diag("activation", layer.name,
                    "a layer without convolution cannot apply an activation",
                    "apply the activation in the previous convolution")
    return None


def passthrough(layer, network, device):
    """Layers without convolution have no padding, no output shift and 8-bit output.

    Vendor tool: "Padding must be zero for passthrough layers", "`output_shift` must be
    zero for passthrough layers", wide output requires a convolution.
    """
    out = []
    if tuple(layer.padding) != (0, 0):
        out.append(diag("passthrough", layer.name,
                        "padding needs a convolution in the same layer",
                        "pad in the following convolution"))
    if layer.output_shift != 0:
        out.append(diag("passthrough", layer.name,
                        f"output shift {layer.output_shift} needs a convolution",
                        "apply the scaling in a convolution"))
    if layer.output_width != 8:
        out.append(diag("passthrough", layer.name,
                        f"{layer.output_width}-bit output needs a convolution",
                        "end the network with a convolution or Linear for 32-bit output"))
    return out


def output_width(layer, network, device):
    """32-bit output only on the final layer, without activation, not depthwise.

    Seed ("Softmax, and Data Unload in C" / sidecar `output_width`): 32-bit output is for
    the last layer; the vendor tool: "`output_width` must be 8 when activation is used".
    """
    w = layer.output_width
    if w not in device.output_widths:
        return diag("output-width", layer.name, f"output width {w} (8 or 32 bits)",
                    "use 8-bit output, or 32-bit on the final layer")
    if w == 8:
        return None
    index = layer_index(layer, network)
    if consumers(network, index):
        return diag("output-width", layer.name,
                    "32-bit output is only possible on a final (output) layer",
                    "keep 8-bit output for layers that feed other layers")
    if layer.activation is not ACT_NONE:
        return diag("output-width", layer.name,
                    "32-bit output cannot be combined with an activation",
                    "remove the activation from the final layer (apply it on the host)")
    if layer.conv_groups > 1:
        # No seed section, golden case or vendor suite configuration has a depthwise
        # layer with 32-bit output; the vendor tool stops on it (its time-slot count
        # overflows 4 bits without broadcast) and, with broadcast, its project fails
        # (random differential, MAX78002). Refused until a case shows the hardware.
        return diag("output-width", layer.name,
                    "32-bit output is not supported on a depthwise convolution",
                    "end the network with a 1x1 convolution or Linear for 32-bit output, "
                    "or keep 8-bit output")
    return None


def output_shift(layer, network, device):
    """The output shift (including the weight-width shift) is -15 to 15.

    Seed: "A programmable layer-specific shift operator is available at the output of a
    convolution"; the vendor tool limits the final shift to [-15, +15].
    """
    s = layer.output_shift
    if not device.output_shift_min <= s <= device.output_shift_max:
        implicit = 8 - weight_bits(layer) if layer.operator in WEIGHTED else 0
        return diag("output-shift", layer.name,
                    f"output shift {s} (including {implicit} for "
                    f"{weight_bits(layer)}-bit weights) is outside "
                    f"[{device.output_shift_min}, {device.output_shift_max}]",
                    "retrain with a different weight scale (quantization-aware training "
                    "keeps the shift in range)")
    return None


def weight_bits_rule(layer, network, device):
    """Weights are 8, 4, 2 or 1 bit; binary (+1/-1) weights only on MAX78002.

    Seed: "When using 1-, 2- or 4-bit weights, the capacity increases accordingly. The
    hardware supports two different flavors of 1-bit weights, either 0/-1 or +1/-1"
    (MAX78002).
    """
    q = layer.quantization
    if q not in device.weight_bits:
        what = "binary (+1/-1)" if q == -1 else f"{q}-bit"
        return diag("weight-bits", layer.name,
                    f"{what} weights are not supported on {device.name}",
                    "use 8, 4, 2 or 1-bit weights" + ("" if device.binary_weights else
                                                    "; binary weights need MAX78002"))
    return None


def weights_shape(layer, network, device):
    """Weights have the layer's shape and fit the weight width.

    Seed ("Number Format", "Weights: Quantization-Aware Training"): the kernel memory
    holds `quantization`-bit two's complement values (binary: +1/-1).
    """
    w = layer.weights
    if w is None:
        return diag("weights-shape", layer.name, f"{op_word(layer)} layer without weights",
                    "export the layer's weights (an int8 initializer <layer>.weight)")
    w = np.asarray(w)
    g = max(layer.conv_groups, 1)
    kh, kw = layer.kernel_size
    if layer.operator == Op.CONV2D:
        want = (layer.output_channels, layer.input_channels // g, kh, kw)
    elif layer.operator == Op.CONV1D:
        want = (layer.output_channels, layer.input_channels // g, kh)
    elif layer.operator == Op.CONVTRANSPOSE2D:
        want = (layer.input_channels, layer.output_channels // g, kh, kw)
    else:
        n_in = layer.input_channels * (pixels(layer.pooled_dim) if layer.flatten else 1)
        want = (layer.output_channels, n_in)
    if tuple(w.shape) != want:
        return diag("weights-shape", layer.name,
                    f"weights of shape {tuple(w.shape)}, the layer needs {want}",
                    "re-export the model; the weights do not match the layer")
    q = layer.quantization
    if q not in (-1, 1, 2, 4, 8):
        return None  # no width to check against: weight_bits_rule names the width
    lo, hi = (-1, 1) if q == -1 else (-(1 << (q - 1)), (1 << (q - 1)) - 1)
    if w.size and (w.min() < lo or w.max() > hi):
        return diag("weights-shape", layer.name,
                    f"weights span [{int(w.min())}, {int(w.max())}], outside the "
                    f"{'binary' if q == -1 else f'{q}-bit'} range [{lo}, {hi}]",
                    "quantize the weights to the layer's weight width")
    return None


def bias_channels(layer, network, device):
    """Bias is supported for up to 512 (MAX78002: 2048) output channels per layer.

    Seed: "Bias is supported for up to 512 output channels per layer." ("Bias Memories":
    one bias memory instance per quadrant; a layer's bias sits in one instance.)
    """
    if layer.bias is None:
        return None
    n = int(np.asarray(layer.bias).size)
    if n != layer.output_channels:
        return diag("bias-channels", layer.name,
                    f"{n} bias values for {layer.output_channels} output channels",
                    "give one bias value per output channel")
    if n > device.bias_bytes_per_instance:
        return diag("bias-channels", layer.name,
                    f"bias on {n} output channels (at most "
                    f"{device.bias_bytes_per_instance} per layer on {device.name})",
                    "train the layer without bias, or split its output channels")
    if layer.bias_hw is not None:
        b = np.asarray(layer.bias_hw)
        if b.size and (b.min() < -128 or b.max() > 127):
            return diag("bias-channels", layer.name,
                        f"bias values span [{int(b.min())}, {int(b.max())}], beyond 8 bits",
                        "quantize the bias to 8 bits (quantization-aware training)")
    return None


RULES: tuple[Rule, ...] = (
    Rule("activation", activation),
    Rule("passthrough", passthrough, applies_to=only(Op.NONE)),
    Rule("output-width", output_width),
    Rule("output-shift", output_shift),
    Rule("weight-bits", weight_bits_rule, applies_to=WEIGHTED),
    Rule("weights-shape", weights_shape, applies_to=WEIGHTED),
    Rule("bias-channels", bias_channels),
)
