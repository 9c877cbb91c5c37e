"""A small hand-built network and placement for emission unit tests (no golden data)."""
from __future__ import annotations

import numpy as np

from onnx2ai8x.emit.registers import WeightMemoryMap
from onnx2ai8x.network import ACT_RELU, OP_CONV2D, Layer, Network
from onnx2ai8x.placement import LayerPlacement, Placement


def one_conv(device: str = "MAX78000", *, streaming: bool = False, big_data: bool = False,
             channels: int = 4, height: int = 8, width: int = 8) -> Placement:
    """One 3x3 convolution, pad 1, ReLU, `channels` in and out, HWC input at offset 0."""
    rng = np.random.default_rng(0)
    layer = Layer(name="conv", operator=OP_CONV2D, input_channels=channels,
                  output_channels=channels, input_dim=(height, width),
                  pooled_dim=(height, width), output_dim=(height, width),
                  kernel_size=(3, 3), padding=(1, 1), activation=ACT_RELU,
                  weights=rng.integers(-128, 128, (channels, channels, 3, 3)),
                  bias=None)
    net = Network(layers=(layer,), input_shape=(channels, height, width), device=device,
                  name="synthetic")
    mask = (1 << channels) - 1
    place = LayerPlacement(processor_map=mask, output_processor_map=mask, in_offset=0,
                           out_offset=0x2000, streaming=streaming, big_data=big_data,
                           output_layer=True)
    return Placement(network=net, device=device, layers=(place,), final_layer=0)


def no_bias_memory(placement: Placement) -> WeightMemoryMap:
    n = len(placement.layers)
    return WeightMemoryMap(kernel_offset=(0,) * n, kernel_count=(4,) * n,
                           kernel_out_channels=(4,) * n, bias_offsets=((),) * n,
                           bias_group=(None,) * n)
