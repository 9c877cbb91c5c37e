"""Connectivity rules: what each layer reads, concatenation alignment.

A rule's docstring is the user-facing reason (see the package docstring).
"""
from __future__ import annotations

import numpy as np

from ...network import DATA_BUFFER, Op
from ..facts import pixels, producers
from .base import Rule, diag, layer_index


def connectivity(layer, network, device):
    """Each layer reads the network input or earlier layers, with matching channels/sizes.

    Seed ("Multiple Arguments", "Layer Concatenation"): element-wise operands have equal
    shapes; concatenated inputs have equal dimensions and their channels add up.
    """
    index = layer_index(layer, network)
    srcs = producers(network, index)
    out = []
    shapes = []
    for s in srcs:
        if s == DATA_BUFFER and network.data_buffer is not None:
            # a shift layer reads the positions after the ones it drops (seed 000,
            # Rolling Buffers)
            buf = network.data_buffer
            shapes.append((buf.channels, buf.length - layer.buffer_shift,
                           f"data buffer `{buf.name}`"))
            continue
        if s < -1 or s >= index:
            out.append(diag("connectivity", layer.name,
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
            out.append(diag("connectivity", layer.name,
                            f"{src_name} provides {ch}x{px} values, {layer.operands} operands "
                            f"of {layer.input_channels}x{layer.input_dim[0]}x"
                            f"{layer.input_dim[1]} need {want}",
                            "give each element-wise operand its own input"))
        return out
    for _ch, px, src_name in shapes:
        if px != want_px:
            out.append(diag("connectivity", layer.name,
                            f"{src_name} produces {px} pixels per channel, the layer reads "
                            f"{layer.input_dim[0]}x{layer.input_dim[1]} = {want_px}",
                            "reshape only between equal pixel counts"))
    if layer.operands > 1:
        if len(srcs) not in (1, layer.operands):
            out.append(diag("connectivity", layer.name,
                            f"{layer.operands} operands but {len(srcs)} input layers",
                            "give each element-wise operand its own input"))
        for ch, _, src_name in shapes:
            if len(srcs) == layer.operands and ch != layer.input_channels:
                out.append(diag("connectivity", layer.name,
                                f"element-wise operand {src_name} has {ch} channels, the "
                                f"layer {layer.input_channels}",
                                "all element-wise operands need the same channel count"))
    else:
        total = sum(ch for ch, _, _ in shapes)
        if total != layer.input_channels:
            out.append(diag("connectivity", layer.name,
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
    index = layer_index(layer, network)
    srcs = producers(network, index)
    if len(srcs) < 2:
        return None
    out = []
    for s in srcs[:-1]:
        ch = network.input_shape[0] if s == -1 else network.layers[s].output_channels
        name = "the network input" if s == -1 else network.layers[s].name
        if int(ch) % 4:
            out.append(diag("concat-alignment", layer.name,
                            f"concatenated input {name} has {ch} channels, not a multiple "
                            f"of 4",
                            "pad that producer to a multiple of 4 output channels, or put "
                            "it last in the concatenation"))
    return out


def data_buffer(layer, network, device):
    """Layers that shift, insert into or read the data buffer match the buffer.

    Seed 000 "Rolling Buffers": the network's buffer (global `data_buffer`) holds
    `channels` x `dim` positions; `buffer_shift: n` shifts it n places in a passthrough
    layer that reads it; `buffer_insert: n` adds the layer's output as its n newest
    positions, so the output has the buffer's channels and n positions.
    """
    reads = DATA_BUFFER in (layer.in_sequences or ())
    if not (reads or layer.buffer_shift or layer.buffer_insert):
        return None
    buf = network.data_buffer
    if buf is None:
        return diag("data-buffer", layer.name, "uses a data buffer, but the network has none",
                    "define the buffer (a sidecar's global `data_buffer`)")
    out = []
    k = layer.buffer_shift
    if k and not 0 < k < buf.length:
        out.append(diag("data-buffer", layer.name,
                        f"shifts {k} of the {buf.length} positions of `{buf.name}`",
                        f"shift 1 to {buf.length - 1} positions"))
    if k and (layer.operator != Op.NONE or layer.in_sequences != (DATA_BUFFER,)
              or layer.operands != 1 or layer.pool != (1, 1)):
        out.append(diag("data-buffer", layer.name,
                        "shifts the buffer, but is not a passthrough layer reading only it",
                        f"shift in a passthrough layer with `in_sequences: {buf.name}`"))
    k = layer.buffer_insert
    if k:
        ch, px = layer.output_channels, pixels(layer.output_dim)
        if ch != buf.channels or px != k or k >= buf.length:
            out.append(diag("data-buffer", layer.name,
                            f"inserts {ch} channels x {px} positions as {k} position(s) of "
                            f"`{buf.name}` ({buf.channels} channels x {buf.length})",
                            f"output {buf.channels} channels and as many positions as "
                            "`buffer_insert` says, fewer than the buffer holds"))
    return out


RULES: tuple[Rule, ...] = (
    Rule("connectivity", connectivity),
    Rule("concat-alignment", concat_alignment),
    Rule("data-buffer", data_buffer),
)
