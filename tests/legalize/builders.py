"""Small Networks for the legalizer tests, built directly from onnx2ai8x.network.Layer."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from onnx2ai8x.network import (
    OP_CONV1D,
    OP_CONV2D,
    OP_CONVTRANSPOSE2D,
    OP_LINEAR,
    OP_NONE,
    Layer,
    Network,
)


def weights_for(layer: Layer, value: int = 1) -> np.ndarray | None:
    """Weights of the shape the layer's operator needs (PyTorch layout)."""
    g = layer.conv_groups
    kh, kw = layer.kernel_size
    if layer.operator == OP_CONV2D:
        shape = (layer.output_channels, layer.input_channels // g, kh, kw)
    elif layer.operator == OP_CONV1D:
        shape = (layer.output_channels, layer.input_channels // g, kh)
    elif layer.operator == OP_CONVTRANSPOSE2D:
        shape = (layer.input_channels, layer.output_channels // g, kh, kw)
    elif layer.operator == OP_LINEAR:
        n_in = layer.input_channels
        if layer.flatten:
            n_in *= layer.pooled_dim[0] * layer.pooled_dim[1]
        shape = (layer.output_channels, n_in)
    else:
        return None
    return np.full(shape, value, dtype=np.int64)


def with_weights(layer: Layer) -> Layer:
    return replace(layer, weights=weights_for(layer))


def conv2d(name: str = "conv", cin: int = 4, cout: int = 8, dim: int = 8, **kw) -> Layer:
    """A legal 3x3, pad 1 Conv2d on dim x dim data (fields overridable)."""
    fields = dict(name=name, operator=OP_CONV2D, input_channels=cin, output_channels=cout,
                  input_dim=(dim, dim), pooled_dim=(dim, dim), output_dim=(dim, dim),
                  kernel_size=(3, 3), padding=(1, 1))
    fields.update(kw)
    layer = Layer(**fields)
    return layer if "weights" in kw else with_weights(layer)


def conv1d(name: str = "conv1", cin: int = 4, cout: int = 8, length: int = 32, **kw) -> Layer:
    fields = dict(name=name, operator=OP_CONV1D, input_channels=cin, output_channels=cout,
                  input_dim=(length, 1), pooled_dim=(length, 1), output_dim=(length, 1),
                  kernel_size=(3, 1), padding=(1, 0))
    fields.update(kw)
    layer = Layer(**fields)
    return layer if "weights" in kw else with_weights(layer)


def passthrough(name: str = "pass", ch: int = 8, dim: int = 8, **kw) -> Layer:
    # quantization 0: a layer without weights has no weight width (as the vendor resolves)
    fields = dict(name=name, operator=OP_NONE, input_channels=ch, output_channels=ch,
                  input_dim=(dim, dim), pooled_dim=(dim, dim), output_dim=(dim, dim),
                  quantization=0)
    fields.update(kw)
    return Layer(**fields)


def linear(name: str = "fc", cin: int = 8, cout: int = 10, **kw) -> Layer:
    fields = dict(name=name, operator=OP_LINEAR, input_channels=cin, output_channels=cout,
                  input_dim=(1, 1), pooled_dim=(1, 1), output_dim=(1, 1))
    fields.update(kw)
    layer = Layer(**fields)
    return layer if "weights" in kw else with_weights(layer)


def convtranspose2d(name: str = "up", cin: int = 4, cout: int = 4, dim: int = 8,
                    **kw) -> Layer:
    fields = dict(name=name, operator=OP_CONVTRANSPOSE2D, input_channels=cin,
                  output_channels=cout, input_dim=(dim, dim), pooled_dim=(dim, dim),
                  output_dim=(2 * dim, 2 * dim), kernel_size=(3, 3), padding=(1, 1),
                  stride=(2, 2), output_padding=(1, 1))
    fields.update(kw)
    layer = Layer(**fields)
    return layer if "weights" in kw else with_weights(layer)


def network(*layers: Layer, input_shape: tuple[int, ...] | None = None,
            device: str | None = None) -> Network:
    """Layers in order; the input shape follows from the first layer unless given."""
    if input_shape is None:
        first = layers[0]
        if first.operator == OP_CONV1D:
            input_shape = (first.input_channels * first.operands, first.input_dim[0])
        else:
            input_shape = (first.input_channels * first.operands, *first.input_dim)
    return Network(layers=tuple(layers), input_shape=input_shape, device=device, name="t")
