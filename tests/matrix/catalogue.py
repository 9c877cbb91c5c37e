"""The layer x exporter matrix (issue 34, item 6): its rows (layer kinds), its columns
(exporters and their settings) and the cells no model exists for, with the reason.

Plain Python, no imports beyond the standard library: the generators (each in its own
environment: torch, tensorflow + tf2onnx, Brevitas) and the tests read it alike.

A row is one layer kind, in a model of a few layers around it (tiny: 3x8x8 images or
8x8 sequences, a few channels). A column is one exporter with its settings. A cell is
the model of a row written by a column's tool: `models/<column>/<row>.onnx`, with the
source's own outputs on the held-out inputs in `models/<source>.npz` (one set per
source model: the three torch exports share the torch module's outputs).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models"
DATA = HERE / "data.npz"  # calibration and held-out inputs, NCHW / NCL (float32)
EXPECTED = HERE / "expected.json"
SEED = 34
HELD_OUT = 8  # held-out samples each cell's source outputs are stored for
CALIBRATION = 64


@dataclass(frozen=True)
class Row:
    name: str
    kind: str  # "img": (3, 8, 8) images; "seq": (8, 8) sequences (channels, length)
    what: str  # the layer under test, as the README table says it
    device: str = "MAX78000"


@dataclass(frozen=True)
class Column:
    name: str
    family: str  # torch, keras, tflite, ort, brevitas: the generator that writes it
    what: str  # exporter and settings, as the README table says it
    quantized: bool  # the source holds integers (scales in the file)
    exact: bool = False  # power-of-two scales: the conversion must equal the source
    source: str = ""  # the set of source outputs it shares (default: its own name)

    @property
    def outputs(self) -> Path:
        """The source's outputs on the held-out inputs, one array per row."""
        return MODELS / f"{self.source or self.name}.npz"


ROWS = (
    Row("conv2d_3x3", "img", "Conv2d 3x3, padding 1 (`same`), ReLU"),
    Row("conv2d_valid", "img", "Conv2d 3x3, no padding (`valid`)"),
    Row("conv2d_1x1", "img", "Conv2d 1x1"),
    Row("conv2d_stride2", "img", "Conv2d 3x3 stride 2 (`same`)"),
    Row("conv2d_dilation2", "img", "Conv2d 3x3 dilation 2"),
    Row("conv2d_groups", "img", "Conv2d 3x3, 2 groups"),
    Row("conv2d_depthwise", "img", "depthwise Conv2d 3x3", "MAX78002"),
    Row("conv2d_nobias", "img", "Conv2d without bias"),
    Row("conv2d_5x5", "img", "Conv2d 5x5, padding 2 (`same`)"),
    Row("conv1d", "seq", "Conv1d 3, padding 1 (`same`), ReLU"),
    Row("conv1d_valid", "seq", "Conv1d 3, no padding (`valid`)"),
    Row("conv1d_stride2", "seq", "Conv1d 3 stride 2"),
    Row("conv1d_dilation2", "seq", "Conv1d 3 dilation 2"),
    Row("conv1d_depthwise", "seq", "depthwise Conv1d 3", "MAX78002"),
    Row("conv1d_k9", "seq", "Conv1d 9, padding 4 (`same`)"),
    Row("convtranspose2d", "img", "ConvTranspose2d 3x3 stride 2 (2x up)"),
    Row("maxpool2d", "img", "MaxPool2d 2"),
    Row("avgpool2d", "img", "AvgPool2d 2"),
    Row("maxpool1d", "seq", "MaxPool1d 2"),
    Row("avgpool1d", "seq", "AvgPool1d 2"),
    Row("global_avgpool2d", "img", "global average pooling 2-D"),
    Row("global_maxpool2d", "img", "global max pooling 2-D"),
    Row("global_avgpool1d", "seq", "global average pooling 1-D (AdaptiveAvgPool1d(1))"),
    Row("adaptive_avgpool2d", "img", "adaptive average pooling 8x8 -> 4x4"),
    Row("flatten_linear", "img", "flatten + linear"),
    Row("mlp", "img", "flatten, linear, ReLU, linear"),
    Row("add", "img", "residual add"),
    Row("sub", "img", "element-wise sub"),
    Row("mul", "img", "element-wise mul"),
    Row("xor", "img", "element-wise xor"),
    Row("or", "img", "element-wise or"),
    Row("concat", "img", "channel concat"),
    Row("relu6", "img", "ReLU6"),
    Row("abs", "img", "Abs"),
    Row("no_activation", "img", "two convolutions, no activation"),
    Row("bn_fused", "img", "Conv, BatchNorm, ReLU (foldable)"),
    Row("bn_unfused", "img", "BatchNorm after pooling (not after a conv)"),
    Row("input_norm", "img", "input normalization (x - mean) / std"),
    Row("upsample2d", "img", "nearest 2x upsampling 2-D"),
    Row("upsample1d", "seq", "nearest 2x upsampling 1-D"),
)

COLUMNS = (
    Column("torch_dynamo", "torch", "torch.onnx.export, dynamo (torch 2.13's default, "
           "opset 20)", False, source="torch"),
    Column("torch_ts13", "torch", "torch.onnx.export, TorchScript, opset 13", False,
           source="torch"),
    Column("torch_ts", "torch", "torch.onnx.export, TorchScript, its default opset (20)", False,
           source="torch"),
    Column("keras", "keras", "Keras 3 -> tf2onnx (default, NHWC)", False,
           source="keras"),
    Column("keras_nchw", "keras", "Keras 3 -> tf2onnx --inputs-as-nchw", False,
           source="keras"),
    Column("tflite_float_io", "tflite", "TFLite int8, float I/O -> tf2onnx --tflite", True),
    Column("tflite_int8_io", "tflite", "TFLite int8, int8 I/O -> tf2onnx --tflite", True),
    Column("ort_qdq_tensor_asym", "ort", "onnxruntime QDQ, per tensor, uint8 asymmetric",
           True),
    Column("ort_qdq_tensor_sym", "ort", "onnxruntime QDQ, per tensor, int8 symmetric", True),
    Column("ort_qdq_channel_asym", "ort", "onnxruntime QDQ, per channel, uint8 asymmetric",
           True),
    Column("ort_qdq_channel_sym", "ort", "onnxruntime QDQ, per channel, int8 symmetric",
           True),
    Column("ort_qop_tensor_asym", "ort", "onnxruntime QOperator, per tensor, uint8 "
           "asymmetric", True),
    Column("ort_qop_tensor_sym", "ort", "onnxruntime QOperator, per tensor, int8 symmetric",
           True),
    Column("ort_qop_channel_asym", "ort", "onnxruntime QOperator, per channel, uint8 "
           "asymmetric", True),
    Column("ort_qop_channel_sym", "ort", "onnxruntime QOperator, per channel, int8 "
           "symmetric", True),
    Column("brevitas_qcdq", "brevitas", "Brevitas QCDQ, power-of-two scales", True, True,
           "brevitas"),
    Column("brevitas_qonnx", "brevitas", "Brevitas QONNX, power-of-two scales", True, True,
           "brevitas"),
)

_NO_BITWISE_FLOAT = ("bitwise operations are defined on integers only: a float model "
                     "cannot write them (ai8x_torch's Xor/Or modules export them)")
_KERAS_NO_BITWISE = "Keras has no bitwise layer on float tensors"
_BREVITAS_NO_BITWISE = "Brevitas quantizes float arithmetic: no bitwise layers"

# (column family, row) -> why no model exists: the framework cannot express the layer.
NOT_EXPRESSIBLE = {
    ("torch", "xor"): _NO_BITWISE_FLOAT,
    ("torch", "or"): _NO_BITWISE_FLOAT,
    ("ort", "xor"): _NO_BITWISE_FLOAT,
    ("ort", "or"): _NO_BITWISE_FLOAT,
    ("keras", "xor"): _KERAS_NO_BITWISE,
    ("keras", "or"): _KERAS_NO_BITWISE,
    ("tflite", "xor"): _KERAS_NO_BITWISE,
    ("tflite", "or"): _KERAS_NO_BITWISE,
    ("brevitas", "xor"): _BREVITAS_NO_BITWISE,
    ("brevitas", "or"): _BREVITAS_NO_BITWISE,
    ("brevitas", "relu6"): "Brevitas' power-of-two activation quantizers have no clamp "
                           "at 6 (a QuantReLU's range is a power of two)",
}


def seed(row_name: str) -> int:
    """The seed a row's weights are drawn with: from its name, so that adding a row
    changes no other row's model."""
    return SEED + zlib.crc32(row_name.encode()) % 100_000


def row(name: str) -> Row:
    return next(r for r in ROWS if r.name == name)


def column(name: str) -> Column:
    return next(c for c in COLUMNS if c.name == name)


def not_expressible(col: Column, r: Row) -> str | None:
    """Why `col`'s tool cannot write row `r` (None: it can)."""
    return NOT_EXPRESSIBLE.get((col.family, r.name))


def model_path(col: str, r: str) -> Path:
    return MODELS / col / f"{r}.onnx"
