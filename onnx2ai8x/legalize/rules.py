"""One named rule per hardware limit.

Each rule is `(layer, network, device) -> Diagnostic | iterable of Diagnostic | None`.
Layer rules get every layer whose operator they declare (`applies_to`) in turn; network
rules (scope "network") get `layer=None` and look at the whole network. A rule's
docstring is the user-facing reason; its first line is what the README table shows. The
quoted seed sentences are from the vendor guide, sections "Limitations of MAX78000
Networks" and "Limitations of MAX78002 Networks" (seed 000), unless another section is
named.

`index` below is the layer's position in `network.layers` (execution order).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from ..devices import Device
from ..errors import Diagnostic
from ..network import (
    ACT_ABS,
    ACT_NONE,
    ACT_RELU,
    ELTWISE_ADD,
    ELTWISE_NAMES,
    ELTWISE_OR,
    ELTWISE_SUB,
    ELTWISE_XOR,
    Layer,
    Network,
    Op,
)
from .facts import (
    CONVOLUTIONS,
    NOT_1D,
    WEIGHTED,
    ceil_div,
    consumers,
    in_passes,
    is_1d,
    is_eltwise,
    kernel_taps,
    out_passes,
    output_shape,
    pixels,
    pooled_shape,
    pools,
    producers,
    same_weights,
    weight_bits,
)

Result = Diagnostic | Iterable[Diagnostic] | None
RuleFn = Callable[[Layer | None, Network, Device], Result]


@dataclass(frozen=True)
class Rule:
    """A named check; `scope` is "layer" (called per layer) or "network" (once).

    `applies_to` is the set of operators a layer rule checks; None: every layer, also
    one whose operator code is no operator (such a layer gets only these rules).
    """

    name: str
    fn: RuleFn
    scope: str = "layer"
    applies_to: frozenset[Op] | None = None

    def applies(self, layer: Layer) -> bool:
        return self.applies_to is None or layer.operator in self.applies_to

    @property
    def reason(self) -> str:
        return (self.fn.__doc__ or "").strip().splitlines()[0]

    @property
    def code(self) -> str:
        return f"limit.{self.name}"


def _only(*ops: Op) -> frozenset[Op]:
    return frozenset(ops)


def _diag(rule: str, where: str, message: str, hint: str) -> Diagnostic:
    return Diagnostic(f"limit.{rule}", where, message, hint)


def _index(layer: Layer, network: Network) -> int:
    for i, lay in enumerate(network.layers):
        if lay is layer:
            return i
    return next(i for i, lay in enumerate(network.layers) if lay.name == layer.name)


def _op(layer: Layer) -> str:
    return layer.operator.word if isinstance(layer.operator, Op) else str(layer.operator)


def _dims(pair: tuple[int, int], one_d: bool) -> str:
    return f"{pair[0]}" if one_d else f"{pair[0]}x{pair[1]}"


# --------------------------------------------------------------------------- operators


def operator_kind(layer, network, device):
    """The operator must be Conv1d, Conv2d, ConvTranspose2d, Linear or pass-through.

    Seed: "The hardware supports 1D and 2D convolution layers, 2D transposed convolution
    layers (upsampling), element-wise addition, subtraction, binary OR, binary XOR as well
    as fully connected layers (Linear)".
    """
    if not isinstance(layer.operator, Op):  # Layer made every known code an Op
        return _diag("operator-kind", layer.name,
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
        return _diag("conv2d-kernel", layer.name,
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
        return _diag("conv1d-kernel", layer.name,
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
        return _diag("convtranspose2d-kernel", layer.name,
                     f"ConvTranspose2d kernel {k[0]}x{k[1]} is not supported (3x3 only)",
                     "use kernel_size=3, stride=2, padding=1, output_padding=1")
    return None


def linear_kernel(layer, network, device):
    """Linear layers are 1x1 convolutions on 1x1 data (after flattening, if any).

    Seed: "fully connected layers (Linear), which are implemented using 1x1 convolutions
    on 1x1 data".
    """
    if tuple(layer.kernel_size) != (1, 1) or tuple(layer.padding) != (0, 0):
        return _diag("linear-kernel", layer.name,
                     "a Linear layer must have a 1x1 kernel and no padding",
                     "write the layer as a plain Linear (MatMul) on flattened data")
    if not layer.flatten and tuple(layer.pooled_dim) != (1, 1):
        d = layer.pooled_dim
        return _diag("linear-kernel", layer.name,
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
        return _diag("padding", layer.name,
                     f"{_op(layer)} padding {_dims(layer.padding, is_1d(layer))} is not "
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
        return _diag("padding-kernel", layer.name,
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
        return _diag("stride", layer.name,
                     f"{_op(layer)} stride {s[0]}x{s[1]} is not supported "
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
        return _diag("conv2d-dilation", layer.name,
                     f"{_op(layer)} dilation {d[0]}x{d[1]} is not supported "
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
        return _diag("conv1d-dilation", layer.name,
                     f"Conv1d dilation {d} is outside 1..{device.conv1d_dilation_max}", fix)
    if k == 1:
        return _diag("conv1d-dilation", layer.name,
                     "Conv1d dilation > 1 needs a kernel longer than 1", fix)
    if (k - 1) * d < device.conv1d_stretch_limit:
        return None
    if k > device.conv1d_dilated_kernel_max:
        return _diag("conv1d-dilation", layer.name,
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
        return _diag("conv1d-dilation", layer.name,
                     f"Conv1d dilation {d} cannot be combined with {', '.join(extra)}",
                     "move the pooling/element-wise operation to its own layer and use "
                     "padding 0 with large dilations")
    return None


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
        return _diag("groups", layer.name,
                     f"groups={g} does not divide {layer.input_channels} input and "
                     f"{layer.output_channels} output channels", "use groups=1")
    if not device.depthwise:
        return _diag("groups", layer.name,
                     f"grouped/depthwise convolution (groups={g}) is not supported on "
                     f"{device.name}",
                     "use groups=1, or target MAX78002 for depthwise convolutions")
    if g != layer.input_channels or g != layer.output_channels:
        return _diag("groups", layer.name,
                     f"groups={g} must equal the input and output channels "
                     f"({layer.input_channels} in, {layer.output_channels} out)",
                     "use groups=1 or a depthwise convolution (groups = in = out channels)")
    if layer.operator not in CONVOLUTIONS or layer.flatten:
        return _diag("groups", layer.name,
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
        return _diag("output-padding", layer.name,
                     f"{_op(layer)} output padding {op[0]}x{op[1]} is not supported",
                     "ConvTranspose2d needs output_padding=1; other operators none")
    return None


# --------------------------------------------------------------------------- pooling


def pool_size(layer, network, device):
    """Pooling kernels are 1 through 16 in each dimension (1-D: 1 through 16).

    Seed: "For 2D pooling, supported pooling kernel sizes are 1x1 through 16x16, including
    non-square kernels. 1D pooling supports kernel sizes from 1 through 16."
    """
    ph, pw = layer.pool
    bad = not (1 <= ph <= device.pool_max and 1 <= pw <= device.pool_max)
    if is_1d(layer) and pw != 1:
        bad = True
    if bad:
        return _diag("pool-size", layer.name,
                     f"pooling kernel {_dims(layer.pool, is_1d(layer))} is not supported "
                     f"(1 to {device.pool_max} per dimension)",
                     "pool in two consecutive layers (e.g. 32 = 16 then 2)")
    return None


def pool_stride(layer, network, device):
    """Pooling strides are 1 through 16, the same in both dimensions for 2-D pooling.

    Seed: "Pooling strides can be 1 through 16. For 2D pooling, the stride is the same for
    both dimensions."
    """
    sh, sw = layer.pool_stride
    if not (1 <= sh <= device.pool_stride_max and 1 <= sw <= device.pool_stride_max):
        return _diag("pool-stride", layer.name,
                     f"pooling stride {_dims(layer.pool_stride, is_1d(layer))} is not "
                     f"supported (1 to {device.pool_stride_max})",
                     "split the downsampling over two layers")
    if not is_1d(layer) and sh != sw:
        return _diag("pool-stride", layer.name,
                     f"pooling stride {sh}x{sw} is not square",
                     "use the same pooling stride in both dimensions")
    return None


def pool_dilation(layer, network, device):
    """Pooling dilation must be 1 (MAX78000) or 1 to 16 (MAX78002).

    Seed (MAX78000): "Dilation must be 1." Seed (MAX78002): "Dilation is supported from 1
    to 16, independently for both dimensions."
    """
    d = layer.pool_dilation
    if not all(1 <= v <= device.pool_dilation_max for v in d):
        return _diag("pool-dilation", layer.name,
                     f"pooling dilation {_dims(d, is_1d(layer))} is not supported on "
                     f"{device.name} (1 to {device.pool_dilation_max})",
                     "use pooling dilation 1" if device.pool_dilation_max == 1
                     else f"use pooling dilation <= {device.pool_dilation_max}")
    return None


def pool_channels(layer, network, device):
    """Pooling more than 64 channels needs a convolution in the same layer (MAX78000).

    Seed: "Pooling more than 64 channels requires the use of a "fused" convolution in the
    same layer, unless the pooled dimensions are 1x1."
    """
    if layer.pool != (1, 1) and in_passes(layer, device) > device.pool_passes_max and \
            tuple(layer.pooled_dim) != (1, 1):
        return _diag("pool-channels", layer.name,
                     f"a pooling-only layer pools {layer.input_channels} channels "
                     f"(more than {device.channels_per_pass * device.pool_passes_max})",
                     "fuse the pooling into the following convolution, or split the "
                     "channels over several layers")
    return None


def pool_last_operands(layer, network, device):
    """Pooling after an element-wise operation supports at most 2 operands.

    Vendor tool: "pool last" (pool_first false) is limited to two element-wise operands.
    """
    if not layer.pool_first and layer.operands > device.pool_last_operands_max and \
            layer.pool != (1, 1):
        return _diag("pool-last-operands", layer.name,
                     f"pooling after a {layer.operands}-operand element-wise operation is "
                     f"not supported (at most {device.pool_last_operands_max} operands)",
                     "pool before the element-wise operation, or pool in the next layer")
    return None


# --------------------------------------------------------------------------- sizes


def channels(layer, network, device):
    """A layer has at most 1024 input and 1024 output channels.

    Seed: "The number of input channels must not exceed 1024 per layer." / "The number of
    output channels must not exceed 1024 per layer." (The MAX78002 guide says 2048; the
    vendor tool and the 16-pass register field limit both devices to 1024.)
    """
    out = []
    for what, n in (("input", layer.input_channels), ("output", layer.output_channels)):
        if n < 1 or n > device.max_channels:
            out.append(_diag("channels", layer.name,
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
            out.append(_diag("dimensions", layer.name,
                             f"{what} dimension {dim[0]}x{dim[1]} is empty",
                             "reduce pooling/stride or enlarge the input"))
        elif max(dim) > device.max_dim:
            out.append(_diag("dimensions", layer.name,
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
        return _diag("shape-consistency", layer.name,
                     f"pooled dimensions {tuple(layer.pooled_dim)} do not follow from input "
                     f"{tuple(layer.input_dim)} with pool {tuple(layer.pool)} stride "
                     f"{tuple(layer.pool_stride)} (hardware gives {want_pool})",
                     "pooling has no padding and no ceil mode on this hardware; crop the "
                     "input or change the pooling")
    want_out = output_shape(layer)
    if want_out is not None and tuple(layer.output_dim) != want_out:
        return _diag("shape-consistency", layer.name,
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
        out.append(_diag("flatten", layer.name,
                         f"flattening is only available for Linear layers, not {_op(layer)}",
                         "flatten directly before a Linear (MatMul) layer"))
    if hw > device.flatten_pixels_max:
        out.append(_diag("flatten", layer.name,
                         f"flattening {layer.pooled_dim[0]}x{layer.pooled_dim[1]} = {hw} "
                         f"pixels (H*W must be <= {device.flatten_pixels_max})",
                         "pool or convolve the data down to at most 16x16 before the Linear"))
    if layer.input_channels * hw > device.flatten_inputs_max:
        out.append(_diag("flatten", layer.name,
                         f"flattening {layer.input_channels}x{layer.pooled_dim[0]}x"
                         f"{layer.pooled_dim[1]} = {layer.input_channels * hw} values "
                         f"(C*H*W must be <= {device.flatten_inputs_max})",
                         "reduce channels or dimensions before the Linear layer"))
    if pools(layer):
        out.append(_diag("flatten", layer.name,
                         "pooling cannot be combined with flattening in one layer",
                         "pool in the previous layer (or a pooling-only layer)"))
    return out


# --------------------------------------------------------------------------- element-wise


def eltwise_kind(layer, network, device):
    """Element-wise operations are add, sub, bitwise xor and bitwise or.

    Seed: "Supported element-wise operations are add, sub, bitwise xor, and bitwise or."
    """
    if is_eltwise(layer) and layer.eltwise not in (ELTWISE_ADD, ELTWISE_SUB, ELTWISE_OR,
                                                   ELTWISE_XOR):
        name = ELTWISE_NAMES.get(layer.eltwise, str(layer.eltwise))
        return _diag("eltwise-kind", layer.name,
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
            return _diag("eltwise-operands", layer.name,
                         f"element-wise operation with {n} operands (2 to "
                         f"{device.eltwise_operands_max})",
                         "chain several element-wise layers of at most 16 operands")
    elif n != 1:
        return _diag("eltwise-operands", layer.name,
                     f"{n} operands without an element-wise operation",
                     "give the layer an element-wise operation or a single input")
    return None


def eltwise_conv1d(layer, network, device):
    """Element-wise operations cannot be fused with Conv1d.

    Seed: "Element-wise operators can be chained in-flight with pooling and 2D
    convolution"; the vendor tool rejects element-wise operations with Conv1d.
    """
    if layer.operands > 1:
        return _diag("eltwise-conv1d", layer.name,
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
        return _diag("eltwise-multipass", layer.name,
                     f"a {ops}-operand element-wise operation on {layer.input_channels} "
                     "channels fused with a convolution that adds a bias",
                     "train the convolution without bias, or do the element-wise operation "
                     "in a separate pass-through layer")
    if passes <= 1:
        return None
    if device.eltwise_multipass_emulated and ops * passes != ops + passes and \
            (layer.operator != Op.NONE or pools(layer)):
        return _diag("eltwise-multipass", layer.name,
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


# --------------------------------------------------------------------------- graph


def connectivity(layer, network, device):
    """Each layer reads the network input or earlier layers, with matching channels/sizes.

    Seed ("Multiple Arguments", "Layer Concatenation"): element-wise operands have equal
    shapes; concatenated inputs have equal dimensions and their channels add up.
    """
    index = _index(layer, network)
    srcs = producers(network, index)
    out = []
    shapes = []
    for s in srcs:
        if s < -1 or s >= index:
            out.append(_diag("connectivity", layer.name,
                             f"reads layer index {s}, which does not run before it",
                             "order the layers so that producers come first"))
            return out
        if s == -1:
            shape = network.input_shape
            ch = int(shape[0])
            px = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            src_name = "the network input"
        else:
            src = network.layers[s]
            ch, px, src_name = src.output_channels, pixels(src.output_dim), src.name
        shapes.append((ch, px, src_name))
    if not shapes:
        return out
    want_px = pixels(layer.input_dim)
    if layer.operands > 1 and len(srcs) == 1:
        # One producer for several operands: the operands lie one after the other in its
        # output, as more channels (the network input: 2 x 4 channels for two 4-channel
        # operands) or more pixels (a 20x20 output read as two 20x10 operands).
        ch, px, src_name = shapes[0]
        want = layer.operands * layer.input_channels * want_px
        if ch * px != want:
            out.append(_diag("connectivity", layer.name,
                             f"{src_name} provides {ch}x{px} values, {layer.operands} operands "
                             f"of {layer.input_channels}x{layer.input_dim[0]}x"
                             f"{layer.input_dim[1]} need {want}",
                             "give each element-wise operand its own input"))
        return out
    for _ch, px, src_name in shapes:
        if px != want_px:
            out.append(_diag("connectivity", layer.name,
                             f"{src_name} produces {px} pixels per channel, the layer reads "
                             f"{layer.input_dim[0]}x{layer.input_dim[1]} = {want_px}",
                             "reshape only between equal pixel counts"))
    if layer.operands > 1:
        if len(srcs) not in (1, layer.operands):
            out.append(_diag("connectivity", layer.name,
                             f"{layer.operands} operands but {len(srcs)} input layers",
                             "give each element-wise operand its own input"))
        for ch, _, src_name in shapes:
            if len(srcs) == layer.operands and ch != layer.input_channels:
                out.append(_diag("connectivity", layer.name,
                                 f"element-wise operand {src_name} has {ch} channels, the "
                                 f"layer {layer.input_channels}",
                                 "all element-wise operands need the same channel count"))
    else:
        total = sum(ch for ch, _, _ in shapes)
        if total != layer.input_channels:
            out.append(_diag("connectivity", layer.name,
                             f"its inputs provide {total} channels, the layer reads "
                             f"{layer.input_channels}",
                             "make the layer's input channels equal the producers' output "
                             "channels"))
    return out


def concat_alignment(layer, network, device):
    """Concatenated inputs other than the last must have a multiple of 4 channels.

    Seed: "Since the internal network format is HWC in groups of four channels, output
    concatenation only works properly when all components of the concatenation other than
    the last have multiples of four channels."
    """
    if layer.operands > 1:
        return None
    index = _index(layer, network)
    srcs = producers(network, index)
    if len(srcs) < 2:
        return None
    out = []
    for s in srcs[:-1]:
        ch = network.input_shape[0] if s == -1 else network.layers[s].output_channels
        name = "the network input" if s == -1 else network.layers[s].name
        if int(ch) % 4:
            out.append(_diag("concat-alignment", layer.name,
                             f"concatenated input {name} has {ch} channels, not a multiple "
                             f"of 4",
                             "pad that producer to a multiple of 4 output channels, or put "
                             "it last in the concatenation"))
    return out


# --------------------------------------------------------------------------- numerics


def activation(layer, network, device):
    """Activations are ReLU and Abs (or none); pass-through layers have none.

    Seed: "The supported activation functions are ReLU and Abs, and a limited subset of
    Linear." Vendor tool: "Pass-through layers must not use activation."
    """
    if layer.activation not in (ACT_NONE, ACT_RELU, ACT_ABS):
        return _diag("activation", layer.name,
                     f"activation {layer.activation!r} is not supported",
                     "use ReLU, Abs or no activation")
    if layer.operator == Op.NONE and layer.activation is not ACT_NONE:
        return _diag("activation", layer.name,
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
        out.append(_diag("passthrough", layer.name,
                         "padding needs a convolution in the same layer",
                         "pad in the following convolution"))
    if layer.output_shift != 0:
        out.append(_diag("passthrough", layer.name,
                         f"output shift {layer.output_shift} needs a convolution",
                         "apply the scaling in a convolution"))
    if layer.output_width != 8:
        out.append(_diag("passthrough", layer.name,
                         f"{layer.output_width}-bit output needs a convolution",
                         "end the network with a convolution or Linear for 32-bit output"))
    return out


def output_width(layer, network, device):
    """32-bit output only on the final layer, without activation.

    Seed ("Softmax, and Data Unload in C" / sidecar `output_width`): 32-bit output is for
    the last layer; the vendor tool: "`output_width` must be 8 when activation is used".
    """
    w = layer.output_width
    if w not in device.output_widths:
        return _diag("output-width", layer.name, f"output width {w} (8 or 32 bits)",
                     "use 8-bit output, or 32-bit on the final layer")
    if w == 8:
        return None
    index = _index(layer, network)
    if consumers(network, index):
        return _diag("output-width", layer.name,
                     "32-bit output is only possible on a final (output) layer",
                     "keep 8-bit output for layers that feed other layers")
    if layer.activation is not ACT_NONE:
        return _diag("output-width", layer.name,
                     "32-bit output cannot be combined with an activation",
                     "remove the activation from the final layer (apply it on the host)")
    return None


def output_shift(layer, network, device):
    """The output shift (including the weight-width shift) is -15 to 15.

    Seed: "A programmable layer-specific shift operator is available at the output of a
    convolution"; the vendor tool limits the final shift to [-15, +15].
    """
    s = layer.output_shift
    if not device.output_shift_min <= s <= device.output_shift_max:
        implicit = 8 - weight_bits(layer) if layer.operator in WEIGHTED else 0
        return _diag("output-shift", layer.name,
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
        return _diag("weight-bits", layer.name,
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
        return _diag("weights-shape", layer.name, f"{_op(layer)} layer without weights",
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
        return _diag("weights-shape", layer.name,
                     f"weights of shape {tuple(w.shape)}, the layer needs {want}",
                     "re-export the model; the weights do not match the layer")
    q = layer.quantization
    if q not in (-1, 1, 2, 4, 8):
        return None  # no width to check against: weight_bits_rule names the width
    lo, hi = (-1, 1) if q == -1 else (-(1 << (q - 1)), (1 << (q - 1)) - 1)
    if w.size and (w.min() < lo or w.max() > hi):
        return _diag("weights-shape", layer.name,
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
        return _diag("bias-channels", layer.name,
                     f"{n} bias values for {layer.output_channels} output channels",
                     "give one bias value per output channel")
    if n > device.bias_bytes_per_instance:
        return _diag("bias-channels", layer.name,
                     f"bias on {n} output channels (at most "
                     f"{device.bias_bytes_per_instance} per layer on {device.name})",
                     "train the layer without bias, or split its output channels")
    if layer.bias_hw is not None:
        b = np.asarray(layer.bias_hw)
        if b.size and (b.min() < -128 or b.max() > 127):
            return _diag("bias-channels", layer.name,
                         f"bias values span [{int(b.min())}, {int(b.max())}], beyond 8 bits",
                         "quantize the bias to 8 bits (quantization-aware training)")
    return None


# --------------------------------------------------------------------------- network


def layer_count(layer, network, device):
    """At most 32 (MAX78000) or 128 (MAX78002) layers.

    Seed: "The number of layers must not exceed 32 (where pooling and element-wise
    operations do not add to the count when preceding a convolution)." (128 on MAX78002.)
    """
    n = len(network.layers)
    if n == 0:
        return _diag("layer-count", network.name, "the network has no layers",
                     "export a model with at least one convolution or Linear layer")
    if n > device.max_layers:
        return _diag("layer-count", network.layers[device.max_layers].name,
                     f"{n} hardware layers (at most {device.max_layers} on {device.name}); "
                     f"this is the first layer beyond the limit",
                     "merge layers (fuse pooling/element-wise into convolutions) or target "
                     "MAX78002")
    return None


def binary_mix(layer, network, device):
    """Binary (+1/-1) weights cannot be combined with 1-bit (0/-1) weights in one network.

    Seed (MAX78002): "two different flavors of 1-bit weights, either 0/-1 or +1/-1";
    the vendor tool selects one flavor for the whole network.
    """
    weighted = [lay for lay in network.layers if lay.operator in WEIGHTED]
    if any(lay.quantization == -1 for lay in weighted):
        return [_diag("binary-mix", lay.name,
                      "1-bit (0/-1) weights in a network that also uses binary (+1/-1) "
                      "weights", "use one 1-bit flavor throughout the network")
                for lay in weighted if lay.quantization == 1]
    return None


def weight_memory(layer, network, device):
    """All weights must fit the kernel memory (432 KiB / 2,340 KiB at 8 bits).

    Seed: "The weight memory supports up to 768 * 64 3x3 Q7 kernels ..., for a total of
    432 KiB of kernel memory. When using 1-, 2- or 4-bit weights, the capacity increases
    accordingly. When using more than 64 input or output channels, weight memory is
    shared, and effective capacity decreases proportionally." Identical weights of two
    layers are stored once (vendor izer/kdedup.py).
    """
    word_bits = device.kernel_bytes_per_word * 8
    out = []
    total = 0
    stored: list[Layer] = []
    for lay in network.layers:
        if lay.operator not in WEIGHTED or lay.weights is None:
            continue
        bits = weight_bits(lay)
        # A layer that repeats an earlier layer's weights (a shared head applied to each
        # pyramid level) reuses its kernels when it reads the same processors (vendor
        # izer/kdedup.py); the mapping places it so, and they are counted once.
        if not any(same_weights(lay, other) for other in stored):
            stored.append(lay)
            total += int(np.asarray(lay.weights).size) * bits
        if lay.flatten:
            continue
        # Every processor of a pass holds one kernel per output channel and pass
        # ("Layers and Weight Memory"); a depthwise layer one per pass.
        kernels = in_passes(lay, device) * (1 if lay.conv_groups > 1 else lay.output_channels)
        words = ceil_div(kernels * kernel_taps(lay) * bits, word_bits)
        if words > device.kernel_words_large:
            out.append(_diag("weight-memory", lay.name,
                             f"needs {words} kernel words per processor, a processor has at "
                             f"most {device.kernel_words_large}",
                             "reduce the channels or use fewer weight bits"))
    capacity = device.kernel_memory_bytes * 8
    if total > capacity:
        where = max((lay for lay in network.layers if lay.weights is not None),
                    key=lambda lay: int(np.asarray(lay.weights).size) * weight_bits(lay)).name
        out.append(_diag("weight-memory", where,
                         f"the network's weights need {ceil_div(total, 8 * 1024)} KiB, the "
                         f"kernel memory holds {device.kernel_memory_bytes // 1024} KiB "
                         f"(this is the largest layer)",
                         "use fewer channels, or 4/2/1-bit weights for the largest layers"))
    return out


def _stored_bias(lay: Layer) -> np.ndarray | None:
    """The 8-bit values a layer keeps in bias memory, or None: an all-zero bias is not
    stored (vendor tool: "All bias values are zero. Ignoring the input.")."""
    if lay.bias_hw is not None:
        values = np.asarray(lay.bias_hw, dtype=np.int64).reshape(-1)
    elif lay.bias is not None:
        values = np.floor_divide(np.asarray(lay.bias, dtype=np.int64), 128).reshape(-1)
    else:
        return None
    return values if np.any(values != 0) else None


def bias_memory(layer, network, device):
    """All biases must fit the four bias memories.

    Seed ("Bias Memories"): "There are four bias memory instances available". As the
    vendor tool stores them, all-zero biases take no space and layers with identical
    bias values share one copy (izer kbias/kdedup; map/bias.py allocates the same way).
    """
    stored: list[tuple[str, np.ndarray]] = []
    for lay in network.layers:
        values = _stored_bias(lay)
        if values is not None and not any(v.shape == values.shape and
                                          np.array_equal(v, values) for _, v in stored):
            stored.append((lay.name, values))
    total = sum(v.size for _, v in stored)
    capacity = device.bias_instances * device.bias_bytes_per_instance
    if total > capacity:
        return _diag("bias-memory", stored[-1][0],
                     f"the network stores {total} bias values, the bias memory holds "
                     f"{capacity}",
                     "train some layers without bias and without BatchNorm (folding a "
                     "BatchNorm gives its layer a bias), or use fewer output channels")
    return None


def _input_bytes(lay: Layer, index: int, device: Device, network: Network) -> tuple[int, bool]:
    """Bytes one data memory instance must hold for the layer's input, and whether the
    input can be CHW (one channel per instance: only the network input with few channels).
    """
    px = pixels(lay.input_dim)
    chw = index == 0 and lay.input_channels <= device.data_instances
    per_channel = px * in_passes(lay, device) * max(lay.operands, 1)
    return (per_channel if chw else 4 * per_channel), chw


def data_memory(layer, network, device):
    """Data that does not fit one memory instance needs streaming, in the first 8 layers.

    Seed: "When not using streaming mode, any data channel (input, intermediate, or output)
    must completely fit into one memory instance" (HWC: four channels per instance, 8,192
    pixels per channel on MAX78000, 20,480 on MAX78002; CHW input: 32,768 / 81,920).
    "Streaming is limited to 8 consecutive layers or fewer", "When using streaming mode,
    the product of any layer's input width, input height, and input channels divided by 64
    rounded up must not exceed 2^21", "limited to four FIFOs (up to 4 input channels in
    CHW and up to 16 channels in HWC format)", "The final streaming layer must use padding"
    (MAX78000), "Streaming layers must use convolution" (MAX78002).
    """
    layers = network.layers
    need = [_input_bytes(lay, i, device, network)[0] > device.data_instance_bytes
            for i, lay in enumerate(layers)]
    out = []
    if layers:
        last = layers[-1]
        size = pixels(last.output_dim) * out_passes(last, device) * 4 * last.output_width // 8
        if size > device.data_instance_bytes:
            out.append(_diag("data-memory", last.name,
                             f"the output ({last.output_channels}x{last.output_dim[0]}x"
                             f"{last.output_dim[1]}) needs {size} bytes per memory instance, "
                             f"an instance holds {device.data_instance_bytes}",
                             "reduce the output dimensions or channels of the final layer"))
    if not any(need):
        return out
    prefix = max(i for i, n in enumerate(need) if n) + 1  # layers that must stream
    hint = ("fold the input into more channels (data folding), downscale it, or pool "
            "earlier so that only the first layers see large data")
    if prefix > device.max_stream_layers:
        lay = layers[prefix - 1]
        nbytes = _input_bytes(lay, prefix - 1, device, network)[0]
        out.append(_diag("data-memory", lay.name,
                         f"input {lay.input_channels}x{lay.input_dim[0]}x{lay.input_dim[1]} "
                         f"needs {nbytes} bytes per memory instance "
                         f"(an instance holds {device.data_instance_bytes}) and streaming is "
                         f"limited to the first {device.max_stream_layers} layers", hint))
        return out
    first = layers[0]
    if first.input_channels > device.fifo_channels_hwc:
        out.append(_diag("data-memory", first.name,
                         f"streaming input with {first.input_channels} channels (the FIFOs "
                         f"take at most {device.fifo_channels_hwc} HWC / "
                         f"{device.fifo_channels_chw} CHW channels)", hint))
    for i in range(prefix):
        lay = layers[i]
        frame = pixels(lay.input_dim) * in_passes(lay, device)
        if frame >= device.stream_frame_max:
            out.append(_diag("data-memory", lay.name,
                             f"streaming frame {lay.input_dim[0]}x{lay.input_dim[1]}x"
                             f"{in_passes(lay, device)} passes = {frame} (must be below "
                             f"2^21)", hint))
        if lay.flatten or (lay.operator == Op.CONV1D and lay.dilation[0] > 1 and
                           (lay.kernel_size[0] - 1) * lay.dilation[0]
                           >= device.conv1d_stretch_limit):
            out.append(_diag("data-memory", lay.name,
                             "this layer must stream (its data is too large for one memory "
                             "instance) but flattening/large dilation cannot stream", hint))
        if not device.stream_passthrough and lay.operator == Op.NONE:
            out.append(_diag("data-memory", lay.name,
                             f"this layer must stream, and streaming layers on {device.name} "
                             "must use a convolution", "fuse it into a convolution"))
    if not device.stream_nonpadded_final:
        window = range(prefix - 1, min(device.max_stream_layers, len(layers)))
        if not any(max(layers[i].padding) > 0 and layers[i].operator in CONVOLUTIONS
                   for i in window):
            lay = layers[prefix - 1]
            out.append(_diag("data-memory", lay.name,
                             "the final streaming layer must use padding, and no layer that "
                             "could end the streaming part is padded",
                             "use padding 1 in this (or one of the next) convolutions"))
    return out


def _as_list(result: Result) -> list[Diagnostic]:
    if result is None:
        return []
    if isinstance(result, Diagnostic):
        return [result]
    return list(result)


RULES: tuple[Rule, ...] = (
    Rule("operator-kind", operator_kind),
    Rule("conv2d-kernel", conv2d_kernel, applies_to=_only(Op.CONV2D)),
    Rule("conv1d-kernel", conv1d_kernel, applies_to=_only(Op.CONV1D)),
    Rule("convtranspose2d-kernel", convtranspose2d_kernel,
         applies_to=_only(Op.CONVTRANSPOSE2D)),
    Rule("linear-kernel", linear_kernel, applies_to=_only(Op.LINEAR)),
    Rule("padding", padding, applies_to=CONVOLUTIONS),
    Rule("padding-kernel", padding_kernel),
    Rule("stride", stride),
    Rule("conv2d-dilation", conv2d_dilation, applies_to=NOT_1D),
    Rule("conv1d-dilation", conv1d_dilation, applies_to=_only(Op.CONV1D)),
    Rule("groups", groups),
    Rule("output-padding", output_padding),
    Rule("pool-size", pool_size),
    Rule("pool-stride", pool_stride),
    Rule("pool-dilation", pool_dilation),
    Rule("pool-channels", pool_channels, applies_to=_only(Op.NONE)),
    Rule("pool-last-operands", pool_last_operands),
    Rule("channels", channels),
    Rule("dimensions", dimensions),
    Rule("shape-consistency", shape_consistency),
    Rule("flatten", flatten),
    Rule("eltwise-kind", eltwise_kind),
    Rule("eltwise-operands", eltwise_operands),
    Rule("eltwise-conv1d", eltwise_conv1d, applies_to=_only(Op.CONV1D)),
    Rule("eltwise-multipass", eltwise_multipass),
    Rule("connectivity", connectivity),
    Rule("concat-alignment", concat_alignment),
    Rule("activation", activation),
    Rule("passthrough", passthrough, applies_to=_only(Op.NONE)),
    Rule("output-width", output_width),
    Rule("output-shift", output_shift),
    Rule("weight-bits", weight_bits_rule, applies_to=WEIGHTED),
    Rule("weights-shape", weights_shape, applies_to=WEIGHTED),
    Rule("bias-channels", bias_channels),
    Rule("layer-count", layer_count, "network"),
    Rule("binary-mix", binary_mix, "network"),
    Rule("weight-memory", weight_memory, "network"),
    Rule("bias-memory", bias_memory, "network"),
    Rule("data-memory", data_memory, "network"),
)


def check(network: Network, device: Device,
          rules: Iterable[Rule] = RULES) -> Iterator[Diagnostic]:
    """Every diagnostic of every rule, layer rules in layer order first."""
    rules = tuple(rules)
    for layer in network.layers:
        for rule in rules:
            if rule.scope == "layer" and rule.applies(layer):
                yield from _as_list(rule.fn(layer, network, device))
    for rule in rules:
        if rule.scope == "network":
            yield from _as_list(rule.fn(None, network, device))
