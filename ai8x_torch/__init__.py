"""ai8x_torch: the vendor training repository's `ai8x` module, numerically exact.

Drop-in use with an existing vendor model file::

    import sys, ai8x_torch
    sys.modules["ai8x"] = ai8x_torch

Same module names, arguments, parameter and buffer names, so vendor model files and
checkpoints work unchanged. With `set_device(85, simulate=True)` and quantized weights,
the layers compute the accelerator's integers exactly (see README.md in this package).
"""
from __future__ import annotations

from . import blocks
from .compat import (
    AvgPoolFloor,
    Clamp,
    DevAI84,
    DevAI85,
    DevAI87,
    Floor,
    Quantize,
    Round,
    Scaler,
    bayer_filter,
    onnx_export_prep,
    quantile,
    quantize_clamp,
    quantize_clamp_pool,
)
from .device import Device, current_device, make_device, set_device, using_device
from .modules import (
    FAMILIES,
    Abs,
    Add,
    BitwiseOr,
    BitwiseXor,
    Conv1d,
    Conv2d,
    ConvTranspose2d,
    Eltwise,
    Empty,
    Linear,
    QuantizationAwareModule,
    Sub,
    get_activation,
    hardware_params,
)
from .qat import (
    checkpoint_state_dict,
    fuse_bn_layers,
    initiate_qat,
    parse_qat_yaml,
    quantize_model,
    update_model,
    update_optimizer,
)
from .transforms import FusedSoftwareLinearReLU, SoftwareLinear, fold, normalize, unfold_batch

globals().update(FAMILIES)


def __getattr__(name: str):
    # `ai8x.dev` is the vendor's module global for the selected device; model files read
    # it (`ai8x.dev.WEIGHT_DEPTH`). Here it is the current selection, read on access.
    if name == "dev":
        return current_device()
    if name == "export_onnx":
        from .export import export_onnx

        return export_onnx
    raise AttributeError(f"module 'ai8x_torch' has no attribute {name!r}")


__all__ = [
    "AvgPoolFloor", "Clamp", "DevAI84", "DevAI85", "DevAI87", "Floor", "Quantize", "Round",
    "Scaler", "bayer_filter", "blocks", "onnx_export_prep", "quantile", "quantize_clamp",
    "quantize_clamp_pool",
    "Abs", "Add", "BitwiseOr", "BitwiseXor", "Conv1d", "Conv2d", "ConvTranspose2d", "Device",
    "Eltwise", "Empty", "FusedSoftwareLinearReLU", "Linear", "QuantizationAwareModule",
    "SoftwareLinear", "Sub", "checkpoint_state_dict", "current_device", "fold",
    "fuse_bn_layers", "get_activation",
    "hardware_params", "initiate_qat", "make_device", "normalize", "parse_qat_yaml",
    "quantize_model",
    "set_device", "unfold_batch", "update_model", "update_optimizer", "using_device",
    *sorted(FAMILIES),
]
