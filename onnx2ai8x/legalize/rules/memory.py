"""Network-wide rules: layer count, one 1-bit weight flavour, weight, bias and data
memory.

A rule's docstring is the user-facing reason (see the package docstring).
"""
from __future__ import annotations

import numpy as np

from ...devices import Device
from ...network import Layer, Network, Op
from ..facts import (
    CONVOLUTIONS,
    WEIGHTED,
    ceil_div,
    in_passes,
    kernel_taps,
    out_passes,
    pixels,
    runs_1x1_as_3x3,
    same_weights,
    weight_bits,
)
from .base import Rule, diag


def layer_count(layer, network, device):
    """At most 32 (MAX78000) or 128 (MAX78002) layers.

    Seed: "The number of layers must not exceed 32 (where pooling and element-wise
    operations do not add to the count when preceding a convolution)." (128 on MAX78002.)
    """
    n = len(network.layers)
    if n == 0:
        return diag("layer-count", network.name, "the network has no layers",
                    "export a model with at least one convolution or Linear layer")
    if n > device.max_layers:
        return diag("layer-count", network.layers[device.max_layers].name,
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
        return [diag("binary-mix", lay.name,
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
            out.append(diag("weight-memory", lay.name,
                            f"needs {words} kernel words per processor, a processor has at "
                            f"most {device.kernel_words_large}",
                            "reduce the channels or use fewer weight bits"))
    capacity = device.kernel_memory_bytes * 8
    if total > capacity:
        where = max((lay for lay in network.layers if lay.weights is not None),
                    key=lambda lay: int(np.asarray(lay.weights).size) * weight_bits(lay)).name
        out.append(diag("weight-memory", where,
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
        return diag("bias-memory", stored[-1][0],
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
            out.append(diag("data-memory", last.name,
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
        out.append(diag("data-memory", lay.name,
                        f"input {lay.input_channels}x{lay.input_dim[0]}x{lay.input_dim[1]} "
                        f"needs {nbytes} bytes per memory instance "
                        f"(an instance holds {device.data_instance_bytes}) and streaming is "
                        f"limited to the first {device.max_stream_layers} layers", hint))
        return out
    first = layers[0]
    if first.input_channels > device.fifo_channels_hwc:
        out.append(diag("data-memory", first.name,
                        f"streaming input with {first.input_channels} channels (the FIFOs "
                        f"take at most {device.fifo_channels_hwc} HWC / "
                        f"{device.fifo_channels_chw} CHW channels)", hint))
    for i in range(prefix):
        lay = layers[i]
        frame = pixels(lay.input_dim) * in_passes(lay, device)
        if frame >= device.stream_frame_max:
            out.append(diag("data-memory", lay.name,
                            f"streaming frame {lay.input_dim[0]}x{lay.input_dim[1]}x"
                            f"{in_passes(lay, device)} passes = {frame} (must be below "
                            f"2^21)", hint))
        if lay.flatten or (lay.operator == Op.CONV1D and lay.dilation[0] > 1 and
                           (lay.kernel_size[0] - 1) * lay.dilation[0]
                           >= device.conv1d_stretch_limit):
            out.append(diag("data-memory", lay.name,
                            "this layer must stream (its data is too large for one memory "
                            "instance) but flattening/large dilation cannot stream", hint))
        if not device.stream_passthrough and lay.operator == Op.NONE:
            out.append(diag("data-memory", lay.name,
                            f"this layer must stream, and streaming layers on {device.name} "
                            "must use a convolution", "fuse it into a convolution"))
    if not device.stream_nonpadded_final:
        window = range(prefix - 1, min(device.max_stream_layers, len(layers)))
        # a streaming 1x1 convolution runs as a 3x3 one with padding 1 (map/hw.py)
        if not any((max(layers[i].padding) > 0 or runs_1x1_as_3x3(device, layers[i], i, True))
                   and layers[i].operator in CONVOLUTIONS for i in window):
            lay = layers[prefix - 1]
            out.append(diag("data-memory", lay.name,
                            "the final streaming layer must use padding, and no layer that "
                            "could end the streaming part is padded",
                            "use padding 1 in this (or one of the next) convolutions"))
    return out


RULES: tuple[Rule, ...] = (
    Rule("layer-count", layer_count, "network"),
    Rule("binary-mix", binary_mix, "network"),
    Rule("weight-memory", weight_memory, "network"),
    Rule("bias-memory", bias_memory, "network"),
    Rule("data-memory", data_memory, "network"),
)
