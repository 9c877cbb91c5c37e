"""Pooling rules: kernel size, stride, dilation, channels, pooling after element-wise.

A rule's docstring is the user-facing reason (see the package docstring).
"""
from __future__ import annotations

from ...network import Op
from ..facts import in_passes, is_1d
from .base import Rule, diag, dims, only


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
        return diag("pool-size", layer.name,
                    f"pooling kernel {dims(layer.pool, is_1d(layer))} is not supported "
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
        return diag("pool-stride", layer.name,
                    f"pooling stride {dims(layer.pool_stride, is_1d(layer))} is not "
                    f"supported (1 to {device.pool_stride_max})",
                    "split the downsampling over two layers")
    if not is_1d(layer) and sh != sw:
        return diag("pool-stride", layer.name,
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
        return diag("pool-dilation", layer.name,
                    f"pooling dilation {dims(d, is_1d(layer))} is not supported on "
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
        return diag("pool-channels", layer.name,
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
        return diag("pool-last-operands", layer.name,
                    f"pooling after a {layer.operands}-operand element-wise operation is "
                    f"not supported (at most {device.pool_last_operands_max} operands)",
                    "pool before the element-wise operation, or pool in the next layer")
    return None


def convtranspose2d_pool(layer, network, device):
    """A ConvTranspose2d layer does not pool or subsample its input.

    Vendor tool: it accepts pooling in a ConvTranspose2d layer (seed 000 lists
    FusedMaxPoolConvTranspose2d) and states the known answer of pool, then upsample,
    but for a transposed layer it leaves the pooling stride field of the stride register
    at 0 and counts the rows of the unpooled input: on MAX78000, pool strides 1 and 2
    give the same registers apart from the TRAM bound, with different known answers (an
    8x8 input pooled 2x2: 8x8 and 14x14 outputs). What the accelerator computes is
    known for neither, and no golden case pools in a transposed layer. A pooling layer
    of its own, then the transposed convolution, computes the same exactly.
    """
    if layer.pool == (1, 1) and tuple(layer.pool_stride) == (1, 1):
        return None
    pooling = ("pooling " + dims(layer.pool, False) if layer.pool != (1, 1)
               else "subsampling")
    return diag("convtranspose2d-pool", layer.name,
                f"{pooling} with stride {dims(layer.pool_stride, False)} in a "
                "ConvTranspose2d layer: the registers the vendor tool writes for it do not "
                "state the pooling stride, so what the accelerator computes is unknown",
                "pool in a layer of its own before the transposed convolution (sidecar: "
                "a passthrough layer with the pooling keys, then the convtranspose2d "
                "layer; ai8x_torch: ai8x.MaxPool2d or ai8x.AvgPool2d, then "
                "ai8x.ConvTranspose2d)")


RULES: tuple[Rule, ...] = (
    Rule("pool-size", pool_size),
    Rule("pool-stride", pool_stride),
    Rule("pool-dilation", pool_dilation),
    Rule("pool-channels", pool_channels, applies_to=only(Op.NONE)),
    Rule("pool-last-operands", pool_last_operands),
    Rule("convtranspose2d-pool", convtranspose2d_pool, applies_to=only(Op.CONVTRANSPOSE2D)),
)
