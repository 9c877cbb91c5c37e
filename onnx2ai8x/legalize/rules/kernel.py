"""Operator, kernel and convolution-geometry rules: operator kind, kernel sizes,
padding, stride, dilation, groups, output padding.

A rule's docstring is the user-facing reason (see the package docstring).
"""
from __future__ import annotations

from ...network import Op
from ..facts import CONVOLUTIONS, NOT_1D, in_passes, is_1d
from .base import Rule, diag, dims, only, op_word


def operator_kind(layer, network, device):
    """The operator must be Conv1d, Conv2d, ConvTranspose2d, Linear or pass-through.

    Seed: "The hardware supports 1D and 2D convolution layers, 2D transposed convolution
    layers (upsampling), element-wise addition, subtraction, binary OR, binary XOR as well
    as fully connected layers (Linear)".
    """
    if not isinstance(layer.operator, Op):  # Layer made every known code an Op
        return diag("operator-kind", layer.name,
                    f"operator code {layer.operator} is not a hardware operator",
                    "use Conv1d, Conv2d, ConvTranspose2d (stride 2), Linear or a "
                    "pooling/element-wise-only layer")
    return None


def conv2d_kernel(layer, network, device):
    """Conv2d kernels must be 1x1 or 3x3.

    Seed: "Conv2d: Kernel sizes must be 1x1 or 3x3."
    """
    if tuple(layer.kernel_size) not in device.conv2d_kernels:
        k = layer.kernel_size
        return diag("conv2d-kernel", layer.name,
                    f"Conv2d kernel {k[0]}x{k[1]} is not supported (1x1 or 3x3 only)",
                    "stack 3x3 layers for a larger receptive field; emulate 2x2 with a "
                    "3x3 kernel whose last row and column are zero")
    return None


def conv1d_kernel(layer, network, device):
    """Conv1d kernel lengths must be 1 through 9.

    Seed: "Conv1d: Kernel lengths must be 1 through 9."
    """
    if not (1 <= layer.kernel_size[0] <= device.conv1d_kernel_max
            and layer.kernel_size[1] == 1):
        return diag("conv1d-kernel", layer.name,
                    f"Conv1d kernel length {layer.kernel_size[0]} is not supported "
                    f"(1 to {device.conv1d_kernel_max})",
                    "split the kernel into stacked Conv1d layers of length <= 9")
    return None


def convtranspose2d_kernel(layer, network, device):
    """ConvTranspose2d kernels must be 3x3.

    Seed: "ConvTranspose2d: Kernel sizes must be 3x3."
    """
    if tuple(layer.kernel_size) not in device.convtranspose2d_kernels:
        k = layer.kernel_size
        return diag("convtranspose2d-kernel", layer.name,
                    f"ConvTranspose2d kernel {k[0]}x{k[1]} is not supported (3x3 only)",
                    "use kernel_size=3, stride=2, padding=1, output_padding=1")
    return None


def linear_kernel(layer, network, device):
    """Linear layers are 1x1 convolutions on 1x1 data (after flattening, if any).

    Seed: "fully connected layers (Linear), which are implemented using 1x1 convolutions
    on 1x1 data".
    """
    if tuple(layer.kernel_size) != (1, 1) or tuple(layer.padding) != (0, 0):
        return diag("linear-kernel", layer.name,
                    "a Linear layer must have a 1x1 kernel and no padding",
                    "write the layer as a plain Linear (MatMul) on flattened data")
    if not layer.flatten and tuple(layer.pooled_dim) != (1, 1):
        d = layer.pooled_dim
        return diag("linear-kernel", layer.name,
                    f"a Linear layer needs 1x1 input data, got {d[0]}x{d[1]} without "
                    "flattening",
                    "flatten the input (Flatten before the MatMul) or pool it to 1x1")
    return None


def padding(layer, network, device):
    """Convolution padding can be 0, 1 or 2 (zeros); Conv1d pads only along its length.

    Seed: "Padding can be 0, 1, or 2. Padding always uses zeros."
    """
    ph, pw = layer.padding
    bad = ph not in device.paddings or pw not in device.paddings
    if layer.operator.one_d and pw != 0:
        bad = True
    if bad:
        return diag("padding", layer.name,
                    f"{op_word(layer)} padding {dims(layer.padding, is_1d(layer))} is not "
                    f"supported (0, 1 or 2 on each side)",
                    "use padding 0, 1 or 2; for more, add a pass-through layer that "
                    "writes the data into a larger, zero-filled buffer or crop the input")
    return None


def padding_kernel(layer, network, device):
    """Padding must be smaller than the kernel size.

    Vendor tool: padding greater than or equal to the kernel size is rejected (a 1x1
    convolution cannot be padded; a pass-through layer has no padding).
    """
    kh, kw = layer.kernel_size
    ph, pw = layer.padding
    if ph >= kh and ph > 0 or pw >= kw and pw > 0:
        return diag("padding-kernel", layer.name,
                    f"padding {ph}x{pw} is not smaller than the kernel {kh}x{kw}",
                    "use padding < kernel size (e.g. 3x3 with padding 1, 1x1 with "
                    "padding 0)")
    return None


def stride(layer, network, device):
    """Convolution stride is fixed to 1 (2 for ConvTranspose2d).

    Seed: "Stride is fixed to [1, 1]." / "Stride is fixed to 1." / ConvTranspose2d:
    "Stride is fixed to [2, 2]." A stride without pooling is done by the pooling unit
    (pool 1x1, stride > 1), which the importer already did if it was possible.
    """
    want = device.convtranspose2d_stride if layer.operator == Op.CONVTRANSPOSE2D else (1, 1)
    if tuple(layer.stride) != tuple(want):
        s = layer.stride
        return diag("stride", layer.name,
                    f"{op_word(layer)} stride {s[0]}x{s[1]} is not supported "
                    f"(fixed to {want[0]}x{want[1]})",
                    "use stride 1 and a pooling layer (MaxPool 1x1 with the stride, or a "
                    "real pooling) to downsample")
    return None


def conv2d_dilation(layer, network, device):
    """Conv2d, ConvTranspose2d and Linear dilation is fixed to 1.

    Seed (MAX78000): "Dilation is fixed to 1." The MAX78002 guide lists Conv2d dilation
    1 to 16, but the vendor tool (whose output this converter reproduces) implements
    dilation only for Conv1d.
    """
    if max(layer.dilation) > device.conv2d_dilation_max:
        d = layer.dilation
        return diag("conv2d-dilation", layer.name,
                    f"{op_word(layer)} dilation {d[0]}x{d[1]} is not supported "
                    f"(fixed to {device.conv2d_dilation_max})",
                    "use dilation 1; reach a wider receptive field by pooling or "
                    "stacking 3x3 layers")
    return None


def conv1d_dilation(layer, network, device):
    """Conv1d dilation: short kernels only, up to the device maximum.

    Seed: "Dilation can be 1 to 1023 [2047 on MAX78002] for kernel lengths 1, 2, or 3 and
    is fixed to 1 for kernels with length greater than 3." The vendor tool also accepts
    longer kernels when the dilated kernel still fits 9 taps ((k-1)*dilation < 9); a
    dilation beyond that runs on the 3x3 hardware, which needs kernel length >= 2, no
    pooling, no padding, one operand and no flattening.
    """
    k, d = layer.kernel_size[0], layer.dilation[0]
    if d == 1:
        return None
    fix = "use dilation 1, or a kernel of length 2 or 3 with the dilation"
    if d < 1 or d > device.conv1d_dilation_max:
        return diag("conv1d-dilation", layer.name,
                    f"Conv1d dilation {d} is outside 1..{device.conv1d_dilation_max}", fix)
    if k == 1:
        return diag("conv1d-dilation", layer.name,
                    "Conv1d dilation > 1 needs a kernel longer than 1", fix)
    if (k - 1) * d < device.conv1d_stretch_limit:
        return None
    if k > device.conv1d_dilated_kernel_max:
        return diag("conv1d-dilation", layer.name,
                    f"Conv1d kernel length {k} with dilation {d} is not supported (kernel "
                    f"length <= {device.conv1d_dilated_kernel_max} for (k-1)*dilation >= "
                    f"{device.conv1d_stretch_limit})", fix)
    extra = []
    if layer.pool[0] != 1:
        extra.append("pooling")
    if layer.padding[0] != 0:
        extra.append(f"padding {layer.padding[0]}")
    if layer.operands != 1:
        extra.append("element-wise operands")
    if layer.flatten:
        extra.append("flatten")
    if extra:
        return diag("conv1d-dilation", layer.name,
                    f"Conv1d dilation {d} cannot be combined with {', '.join(extra)}",
                    "move the pooling/element-wise operation to its own layer and use "
                    "padding 0 with large dilations")
    return None


def conv1d_multipass_padding(layer, network, device):
    """MAX78002 cannot pad a Conv1d that reads its input in more than one pass.

    The vendor tool's device fact SUPPORT_MULTIPASS_PADDED_CONV1D is false for MAX78002
    and it refuses such a layer ("This device does not support padded Conv1d with input
    expansion > 1"); MAX78000 runs it.
    """
    if device.multipass_padded_conv1d or layer.padding[0] == 0:
        return None
    passes = in_passes(layer, device)
    if passes == 1:
        return None
    return diag("conv1d-multipass-padding", layer.name,
                f"Conv1d padding {layer.padding[0]} with {layer.input_channels} input "
                f"channels ({passes} input passes) is not supported on {device.name}",
                f"use at most {device.channels_per_pass} input channels (reduce them "
                "with a 1x1 layer first), padding 0, or target MAX78000")


def groups(layer, network, device):
    """Groups must be 1, or equal to the channels (depthwise) where the device supports it.

    Seed (MAX78000): "Groups must be 1." / "Groups, and depthwise separable convolutions
    are not supported." Seed (MAX78002): "Groups can be 1, or the same as the number of
    input and output channels (depthwise separable convolution)."
    """
    g = layer.conv_groups
    if g == 1:
        return None
    if g < 1 or layer.input_channels % g or layer.output_channels % g:
        return diag("groups", layer.name,
                    f"groups={g} does not divide {layer.input_channels} input and "
                    f"{layer.output_channels} output channels", "use groups=1")
    depthwise = g == layer.input_channels == layer.output_channels
    if not device.depthwise:
        # MAX78002 takes a depthwise convolution only: the hint names it only for one
        # (a hint is a promise, issue 34)
        return diag("groups", layer.name,
                    f"grouped/depthwise convolution (groups={g}) is not supported on "
                    f"{device.name}",
                    "use groups=1, or target MAX78002, which runs depthwise convolutions"
                    if depthwise else "use groups=1 (of grouped convolutions, only "
                    "depthwise ones run, and on the other part)")
    if g != layer.input_channels or g != layer.output_channels:
        return diag("groups", layer.name,
                    f"groups={g} must equal the input and output channels "
                    f"({layer.input_channels} in, {layer.output_channels} out)",
                    "use groups=1 or a depthwise convolution (groups = in = out channels)")
    if layer.operator not in CONVOLUTIONS or layer.flatten:
        return diag("groups", layer.name,
                    f"groups={g} is only supported for convolutions without flattening",
                    "use groups=1")
    return None


def output_padding(layer, network, device):
    """ConvTranspose2d output padding is fixed to 1; other operators have none.

    Seed: "ConvTranspose2d: ... Output padding is fixed to 1."
    """
    op = tuple(layer.output_padding)
    if layer.operator == Op.CONVTRANSPOSE2D:
        ok = all(v in device.convtranspose2d_output_padding for v in op)
    else:
        ok = op == (0, 0)
    if not ok:
        return diag("output-padding", layer.name,
                    f"{op_word(layer)} output padding {op[0]}x{op[1]} is not supported",
                    "ConvTranspose2d needs output_padding=1; other operators none")
    return None


RULES: tuple[Rule, ...] = (
    Rule("operator-kind", operator_kind),
    Rule("conv2d-kernel", conv2d_kernel, applies_to=only(Op.CONV2D)),
    Rule("conv1d-kernel", conv1d_kernel, applies_to=only(Op.CONV1D)),
    Rule("convtranspose2d-kernel", convtranspose2d_kernel,
         applies_to=only(Op.CONVTRANSPOSE2D)),
    Rule("linear-kernel", linear_kernel, applies_to=only(Op.LINEAR)),
    Rule("padding", padding, applies_to=CONVOLUTIONS),
    Rule("padding-kernel", padding_kernel),
    Rule("stride", stride),
    Rule("conv2d-dilation", conv2d_dilation, applies_to=NOT_1D),
    Rule("conv1d-dilation", conv1d_dilation, applies_to=only(Op.CONV1D)),
    Rule("conv1d-multipass-padding", conv1d_multipass_padding, applies_to=only(Op.CONV1D)),
    Rule("groups", groups),
    Rule("output-padding", output_padding),
)
