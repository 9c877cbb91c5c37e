"""Issue 28's acceptance models: float models made by real tools whose layers the
accelerator refuses (PyTorch models exported here with torch.onnx; Keras models exported
with tf2onnx, committed under keras/ and tests/float_onnx/keras/)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
KERAS = HERE / "keras"
KERAS_FLOAT = HERE.parent / "float_onnx" / "keras"


@dataclass(frozen=True)
class Case:
    name: str
    device: str
    input_shape: tuple[int, ...]  # per sample, in the model's own layout
    segments: tuple[str, ...]  # the CPU segments the split must make: stem, mid, head
    keras: Path | None = None  # a committed tf2onnx export; else a torch model


# CPU segments between accelerator runs ("mid") resume the accelerator at a later layer,
# which only MAX78002 can do (seed 000; partition.start-layer refuses them on MAX78000,
# tests/partition/test_start_layer.py)
CASES = (
    # (the model's output is channels-last: tf2onnx's Transpose after the last
    # convolution is left to the host, the project's output channels-first; issue 34)
    Case("keras_stem5", "MAX78000", (16, 16, 3), ("stem",), KERAS / "stem5.onnx"),
    Case("torch_stem7_stride2", "MAX78000", (3, 32, 32), ("stem",)),
    Case("torch_leaky_between", "MAX78002", (3, 16, 16), ("mid",)),
    Case("keras_dense_head", "MAX78000", (32, 32, 3), ("head",), KERAS / "dense_head.onnx"),
    Case("torch_sigmoid_multilabel", "MAX78000", (3, 16, 16), ("head",)),
    Case("torch_hardswish_block", "MAX78002", (3, 16, 16), ("mid",)),
    # issue 34: CPU segments between accelerator runs that change the shape (a 1-D part,
    # a LeakyReLU and a rank lift to 2-D, a 2-D part; Keras' Reshape sits between
    # tf2onnx's Transposes, so the segment also reorders the axes)
    Case("torch_lift_between", "MAX78002", (4, 32), ("mid",)),
    Case("keras_lift_between", "MAX78002", (32, 4), ("mid",),
         KERAS / "lift_between.onnx"),
    # issue 34 (the matrix's dead ends of --cpu-fallback): a BatchNorm after a ReLU (not
    # foldable) between accelerator layers. (The input normalization stem, the ReduceMax
    # head and Keras' BatchNorm between layers now fold into the accelerator's layers:
    # tests/float_onnx/test_reduce_and_normalize.py.)
    Case("torch_bn_between", "MAX78002", (3, 16, 16), ("mid",)),
)


def _torch(name: str):
    import torch
    from torch import nn

    torch.manual_seed(28)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if name == "torch_stem7_stride2":
                self.stem = nn.Conv2d(3, 16, 7, stride=2, padding=3)
                self.c1 = nn.Conv2d(16, 16, 3, padding=1)
                self.c2 = nn.Conv2d(16, 10, 1)
            elif name == "torch_leaky_between":
                self.c0 = nn.Conv2d(3, 16, 3, padding=1)
                self.c1 = nn.Conv2d(16, 16, 3, padding=1)
                self.c2 = nn.Conv2d(16, 10, 1)
            elif name == "torch_sigmoid_multilabel":
                self.c0 = nn.Conv2d(3, 16, 3, padding=1)
                self.c1 = nn.Conv2d(16, 16, 3, padding=1)
                self.fc = nn.Linear(16 * 4 * 4, 8)
            elif name in ("torch_bn_between", "torch_norm_stem_max_head"):
                self.c0 = nn.Conv2d(3, 16, 3, padding=1)
                self.bn = nn.BatchNorm2d(16)
                self.bn.running_mean.uniform_(-0.5, 0.5)
                self.bn.running_var.uniform_(0.5, 2.0)
                self.bn.weight.data.uniform_(0.5, 1.5)
                self.bn.bias.data.uniform_(-0.3, 0.3)
                self.c1 = nn.Conv2d(16, 16, 3, padding=1)
                self.c2 = nn.Conv2d(16, 10, 1)
                self.register_buffer("mean", torch.tensor([0.4, 0.5, 0.6]).view(1, 3, 1, 1))
                self.register_buffer("std", torch.tensor([0.2, 0.25, 0.3]).view(1, 3, 1, 1))
            elif name == "torch_lift_between":
                self.c0 = nn.Conv1d(4, 16, 3, padding=1)
                self.c1 = nn.Conv2d(16, 8, 3, padding=1)
                self.c2 = nn.Conv2d(8, 4, 1)
            elif name == "torch_hardswish_block":
                # a MobileNetV3 block: 1x1 expand, Hardswish, 3x3 depthwise, Hardswish,
                # 1x1 project (MAX78002 runs depthwise convolutions, not Hardswish)
                self.c0 = nn.Conv2d(3, 16, 3, padding=1)
                self.expand = nn.Conv2d(16, 32, 1)
                self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
                self.project = nn.Conv2d(32, 16, 1)
                self.out = nn.Conv2d(16, 10, 1)

        def forward(self, x):
            f = nn.functional
            if name == "torch_stem7_stride2":
                return self.c2(f.relu(self.c1(f.relu(self.stem(x)))))
            if name == "torch_leaky_between":
                return self.c2(f.relu(self.c1(f.leaky_relu(self.c0(x), 0.1))))
            if name == "torch_bn_between":
                x = self.bn(f.relu(self.c0(x)))
                return self.c2(f.relu(self.c1(x)))
            if name == "torch_norm_stem_max_head":
                x = f.relu(self.c0((x - self.mean) / self.std))
                return self.c2(f.relu(self.c1(x))).amax(dim=(2, 3))
            if name == "torch_lift_between":
                x = f.leaky_relu(self.c0(x), 0.1).unsqueeze(2)  # (N, 16, 1, 32)
                return self.c2(f.relu(self.c1(x)))
            if name == "torch_sigmoid_multilabel":
                x = f.max_pool2d(f.relu(self.c0(x)), 2)
                x = f.max_pool2d(f.relu(self.c1(x)), 2)
                return torch.sigmoid(self.fc(torch.flatten(x, 1)))
            x = f.relu(self.c0(x))
            x = f.hardswish(self.expand(x))
            x = f.hardswish(self.dw(x))
            return self.out(f.relu(self.project(x)))

    return Net().eval()


def model_file(case: Case, tmp: Path) -> Path:
    """The case's ONNX file (a torch model is exported into `tmp`)."""
    if case.keras is not None:
        return case.keras
    import torch

    path = tmp / f"{case.name}.onnx"
    x = torch.rand(1, *case.input_shape)
    torch.onnx.export(_torch(case.name), x, str(path), input_names=["x"],
                      output_names=["y"], opset_version=17, dynamo=False)
    return path


def calibration(case: Case, tmp: Path, n: int = 8) -> Path:
    """Seeded uniform samples in [0, 1) of the case's input shape."""
    path = tmp / f"{case.name}_cal.npy"
    rng = np.random.default_rng(2028)
    np.save(path, rng.uniform(0, 1, (n, *case.input_shape)).astype(np.float32))
    return path
