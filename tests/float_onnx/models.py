"""Small float models, one per pattern the float front end groups into hardware layers.

Torch models are exported both ways (TorchScript-based and `dynamo=True`); tf2onnx-style
graphs (NHWC input + Transpose, MatMul + Add, Transpose + Reshape flatten) are built with
onnx.helper. Weights are random and seeded; BatchNorm statistics are non-trivial so the
fold is exercised.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


@dataclass(frozen=True)
class Pattern:
    name: str
    input_shape: tuple[int, ...]  # per sample, in the model's own layout
    single_layer: bool  # one hardware layer: SQNR >= 25 dB
    device: str = "MAX78000"
    torch: bool = True


PATTERNS = [
    Pattern("conv_bn_relu", (3, 8, 8), True),
    Pattern("conv_relu_maxpool", (3, 8, 8), False),
    Pattern("avgpool_conv", (4, 8, 8), True),
    Pattern("gap_linear", (4, 8, 8), False),
    Pattern("gemm", (16, 1, 1), True),
    Pattern("flatten_linear", (4, 4, 4), False),
    Pattern("reshape_linear", (4, 4, 4), False),
    Pattern("residual_add", (8, 8, 8), False),
    Pattern("concat", (4, 8, 8), False),
    Pattern("conv1d", (4, 32), True),
    Pattern("convtranspose2d", (8, 4, 4), True),
    Pattern("depthwise", (8, 8, 8), True, device="MAX78002"),
    Pattern("stride2", (4, 8, 8), False),
    Pattern("relu6_abs", (4, 8, 8), False),
    Pattern("residual_relu", (8, 8, 8), False),
    Pattern("pool_80_channels", (3, 4, 4), False),
    Pattern("resnet", (3, 16, 16), False),
    Pattern("matmul_add", (16,), True, torch=False),
    Pattern("nhwc_transpose", (8, 8, 3), False, torch=False),
    Pattern("nhwc_rescaling", (8, 8, 3), False, torch=False),
]


def _torch_module(name: str):
    import torch
    from torch import nn

    torch.manual_seed(13)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if name == "conv_bn_relu":
                self.c = nn.Conv2d(3, 8, 3, padding=1)
                self.bn = nn.BatchNorm2d(8)
            elif name == "conv_relu_maxpool":
                self.c = nn.Conv2d(3, 8, 3, padding=1)
                self.p = nn.MaxPool2d(2)
                self.c2 = nn.Conv2d(8, 8, 3, padding=1)
            elif name == "avgpool_conv":
                self.p = nn.AvgPool2d(2)
                self.c = nn.Conv2d(4, 8, 3, padding=1)
            elif name == "gap_linear":
                self.c = nn.Conv2d(4, 16, 3, padding=1)
                self.p = nn.AdaptiveAvgPool2d(1)
                self.fc = nn.Linear(16, 10)
            elif name == "gemm":
                self.fc = nn.Linear(16, 10)
            elif name in ("flatten_linear", "reshape_linear"):
                self.c = nn.Conv2d(4, 8, 3, padding=1)
                self.fc = nn.Linear(8 * 4 * 4, 10)
            elif name == "residual_add":
                self.c1 = nn.Conv2d(8, 8, 3, padding=1)
                self.c2 = nn.Conv2d(8, 8, 3, padding=1)
                self.c3 = nn.Conv2d(8, 8, 3, padding=1)
            elif name == "concat":
                self.a = nn.Conv2d(4, 8, 3, padding=1)
                self.b = nn.Conv2d(4, 8, 1)
                self.c = nn.Conv2d(16, 8, 3, padding=1)
            elif name == "conv1d":
                self.c = nn.Conv1d(4, 8, 5, padding=2)
                self.bn = nn.BatchNorm1d(8)
            elif name == "convtranspose2d":
                self.c = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1)
            elif name == "depthwise":
                self.c = nn.Conv2d(8, 8, 3, padding=1, groups=8)
                self.bn = nn.BatchNorm2d(8)
            elif name == "stride2":
                self.c = nn.Conv2d(4, 8, 3, stride=2, padding=1)
                self.bn = nn.BatchNorm2d(8)
                self.c2 = nn.Conv2d(8, 8, 3, padding=1)
            elif name == "residual_relu":
                self.c1 = nn.Conv2d(8, 8, 3, padding=1)
                self.c2 = nn.Conv2d(8, 8, 3, padding=1)
                self.c3 = nn.Conv2d(8, 4, 1)
            elif name == "pool_80_channels":
                self.c = nn.Conv2d(3, 80, 3, padding=1)
                self.p = nn.MaxPool2d(2)
                self.fc = nn.Linear(80 * 2 * 2, 10)
            elif name == "resnet":
                def cbr(i: int, o: int, stride: int = 1) -> nn.Module:
                    return nn.Sequential(nn.Conv2d(i, o, 3, stride, 1, bias=False),
                                         nn.BatchNorm2d(o), nn.ReLU())
                self.stem = cbr(3, 16)
                self.a1, self.b1 = cbr(16, 16), nn.Sequential(
                    nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16))
                self.down = cbr(16, 32, 2)
                self.a2, self.b2 = cbr(32, 32), nn.Sequential(
                    nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32))
                self.p = nn.AdaptiveAvgPool2d(1)
                self.fc = nn.Linear(32, 10)
            elif name == "relu6_abs":
                self.c = nn.Conv2d(4, 8, 3, padding=1)
                self.c2 = nn.Conv2d(8, 8, 3, padding=1)
                self.c3 = nn.Conv2d(8, 8, 1)
            for m in self.modules():
                if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                    with torch.no_grad():
                        m.running_mean.uniform_(-0.3, 0.3)
                        m.running_var.uniform_(0.5, 2.0)
                        m.weight.uniform_(0.5, 1.5)
                        m.bias.uniform_(-0.2, 0.2)

        def forward(self, x):
            r = torch.relu
            if name == "conv_bn_relu":
                return r(self.bn(self.c(x)))
            if name == "conv_relu_maxpool":
                return self.c2(self.p(r(self.c(x))))
            if name == "avgpool_conv":
                return self.c(self.p(x))
            if name == "gap_linear":
                return self.fc(torch.flatten(self.p(r(self.c(x))), 1))
            if name == "gemm":
                return self.fc(torch.flatten(x, 1))
            if name == "flatten_linear":
                return self.fc(torch.flatten(r(self.c(x)), 1))
            if name == "reshape_linear":
                y = r(self.c(x))
                return self.fc(y.reshape(y.shape[0], -1))
            if name == "residual_add":
                a = r(self.c1(x))
                return self.c3(r(self.c2(a)) + a)
            if name == "concat":
                return self.c(torch.cat([r(self.a(x)), r(self.b(x))], 1))
            if name == "conv1d":
                return r(self.bn(self.c(x)))
            if name == "convtranspose2d":
                return self.c(x)
            if name == "depthwise":
                return r(self.bn(self.c(x)))
            if name == "stride2":
                return self.c2(r(self.bn(self.c(x))))
            if name == "residual_relu":  # ReLU after the add (ResNet): an identity layer
                a = r(self.c1(x))
                return self.c3(r(self.c2(a) + a))
            if name == "pool_80_channels":  # pooling 80 channels: a convolution layer
                return self.fc(torch.flatten(self.p(r(self.c(x))), 1))
            if name == "resnet":  # two residual blocks with a two-layer skip each
                x = self.stem(x)
                x = r(self.b1(self.a1(x)) + x)
                x = self.down(x)
                x = r(self.b2(self.a2(x)) + x)
                return self.fc(torch.flatten(self.p(x), 1))
            if name == "relu6_abs":
                return self.c3(torch.abs(self.c2(torch.clamp(self.c(x), 0, 6))))
            raise AssertionError(name)

    return Net().eval()


def export_torch(p: Pattern, path: Path, dynamo: bool) -> Path:
    import warnings

    import torch

    model = _torch_module(p.name)
    x = torch.rand(1, *p.input_shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            torch.onnx.export(model, (x,), str(path), dynamo=True, opset_version=18,
                              verbose=False)
        else:
            torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=13,
                              input_names=["x"], dynamic_axes={"x": {0: "N"}})
    return path


def _init(rng, name: str, shape, scale: float = 0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                   name)


def tf_style(p: Pattern, path: Path) -> Path:
    """Graphs as tf2onnx writes them from Keras."""
    rng = np.random.default_rng(13)
    if p.name == "matmul_add":
        nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"], name="dense/MatMul"),
                 helper.make_node("Add", ["mm", "b"], ["y"], name="dense/BiasAdd")]
        inits = [_init(rng, "W", (16, 10)), _init(rng, "b", (10,), 0.1)]
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["unk__0", 16])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__0", 10])
    elif p.name == "nhwc_transpose":
        nodes = [
            helper.make_node("Transpose", ["x"], ["xt"], name="conv2d/Conv2D__6",
                             perm=[0, 3, 1, 2]),
            helper.make_node("Conv", ["xt", "K", "kb"], ["c"], name="conv2d/Conv2D",
                             kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"], name="conv2d/Relu"),
            helper.make_node("MaxPool", ["r"], ["mp"], name="max_pooling2d/MaxPool",
                             kernel_shape=[2, 2], strides=[2, 2]),
            helper.make_node("Transpose", ["mp"], ["mpt"], name="max_pooling2d/MaxPool__12",
                             perm=[0, 2, 3, 1]),
            helper.make_node("Reshape", ["mpt", "shape"], ["flat"], name="flatten/Reshape"),
            helper.make_node("MatMul", ["flat", "W"], ["mm"], name="dense/MatMul"),
            helper.make_node("Add", ["mm", "b"], ["y"], name="dense/BiasAdd"),
        ]
        inits = [_init(rng, "K", (8, 3, 3, 3)), _init(rng, "kb", (8,), 0.1),
                 numpy_helper.from_array(np.array([-1, 128], np.int64), "shape"),
                 _init(rng, "W", (128, 10), 0.1), _init(rng, "b", (10,), 0.1)]
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["unk__0", 8, 8, 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__0", 10])
    elif p.name == "nhwc_rescaling":
        # Keras: Rescaling(1/255) on uint8-range pixels, Conv2D + ReLU, global average
        # pooling, Dense
        nodes = [
            helper.make_node("Mul", ["x", "k"], ["xs"], name="rescaling/mul"),
            helper.make_node("Transpose", ["xs"], ["xt"], name="conv2d/Conv2D__6",
                             perm=[0, 3, 1, 2]),
            helper.make_node("Conv", ["xt", "K", "kb"], ["c"], name="conv2d/Conv2D",
                             kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"], name="conv2d/Relu"),
            helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap/Mean"),
            helper.make_node("Reshape", ["g", "shape"], ["flat"], name="gap/Squeeze"),
            helper.make_node("MatMul", ["flat", "W"], ["mm"], name="dense/MatMul"),
            helper.make_node("Add", ["mm", "b"], ["y"], name="dense/BiasAdd"),
        ]
        inits = [numpy_helper.from_array(np.array(1 / 255, np.float32), "k"),
                 _init(rng, "K", (8, 3, 3, 3)), _init(rng, "kb", (8,), 0.1),
                 numpy_helper.from_array(np.array([-1, 8], np.int64), "shape"),
                 _init(rng, "W", (8, 10), 0.3), _init(rng, "b", (10,), 0.1)]
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["unk__0", 8, 8, 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__0", 10])
    else:
        raise AssertionError(p.name)
    graph = helper.make_graph(nodes, "tf2onnx", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="tf2onnx")
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def calibration(p: Pattern, n: int = 64) -> np.ndarray:
    rng = np.random.default_rng(7)
    if p.name == "nhwc_rescaling":  # pixels 0..255
        return rng.integers(0, 256, size=(n, *p.input_shape)).astype(np.float32)
    return rng.uniform(-1.0, 1.0, size=(n, *p.input_shape)).astype(np.float32)


def qdq_model(float_path: Path, path: Path, x: np.ndarray) -> Path:
    """A QDQ model from onnxruntime's static quantizer, calibrated on `x`."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    name = onnx.load(str(float_path)).graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter([{name: x[k:k + 1]} for k in range(x.shape[0])])

        def get_next(self):
            return next(self.items, None)

    quantize_static(str(float_path), str(path), Reader(), quant_format=QuantFormat.QDQ)
    return path
