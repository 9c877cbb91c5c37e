"""Two idioms the accelerator runs exactly, without --cpu-fallback:

* a maximum over the spatial axes (`x.amax((2, 3))`, ONNX ReduceMax; torch's default
  exporter writes global max pooling this way) is a max pooling whose window is the
  whole frame;
* an input normalization `(x - mean) / std` with per-channel constants: the mean is
  the input mapping's offset (ai8x.input_offset), the division is folded into the
  weights of the convolution that reads the input, along its input channels (exact:
  the accelerator pads the offset input with zeros as the model pads the normalized
  one).

Each converts, passes `verify`, and the quantized model (input mapped with nothing but
the model's metadata) computes the float model within 8-bit noise. A normalized input
that something other than a convolution reads is refused with a hint, and the hint's
flag converts it.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx2ai8x import api
from onnx2ai8x.errors import Ai8xError

from .helpers import float_run, metadata, quantized_float_output, sqnr_db

torch = pytest.importorskip("torch")

MEAN = (0.485, 0.456, 0.406, 0.5)
STD = (0.229, 0.224, 0.225, 0.3)


def _net(kind: str):
    from torch import nn

    torch.manual_seed(5)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.tensor(MEAN).reshape(1, 4, 1, 1))
            self.register_buffer("std", torch.tensor(STD).reshape(1, 4, 1, 1))
            groups = 4 if kind == "norm_depthwise" else 1
            if kind == "norm_transposed":
                self.a = nn.ConvTranspose2d(4, 8, 3, stride=2, padding=1, output_padding=1)
            else:
                self.a = nn.Conv2d(4, 4 if groups > 1 else 8, 3, padding=1, groups=groups)
            self.fc = nn.Linear(8, 5)
            self.bn = nn.BatchNorm2d(8)
            self.b = nn.Conv2d(8, 4, 3, padding=1 if kind == "bn_before_padded" else 0)

        def forward(self, x):
            if kind.startswith("bn_"):  # a BatchNormalization after a pooling
                y = nn.functional.max_pool2d(torch.relu(self.a(x)), 2)
                return torch.relu(self.b(self.bn(y)))
            if kind.startswith("amax"):
                y = torch.relu(self.a(x))
                return self.fc(y.amax((2, 3))) if kind == "amax" else y.amax((2, 3),
                                                                              keepdim=True)
            if kind == "norm_pool_first":
                return torch.relu(self.a(nn.functional.max_pool2d((x - self.mean) /
                                                                   self.std, 2)))
            return torch.relu(self.a((x - self.mean) / self.std))

    net = Net()
    with torch.no_grad():  # statistics that move the values
        net.bn.running_mean.uniform_(-0.2, 0.2)
        net.bn.running_var.uniform_(0.5, 2.0)
        net.bn.weight.uniform_(0.5, 1.5)
        net.bn.bias.uniform_(-0.3, 0.3)
    return net.eval()


def _convert(kind: str, tmp: Path, device: str = "MAX78000", **kw):
    path = tmp / f"{kind}.onnx"
    torch.onnx.export(_net(kind), torch.zeros(1, 4, 8, 8), str(path), dynamo=False,
                      input_names=["x"], output_names=["y"])
    x = np.random.default_rng(2).uniform(0, 1, (32, 4, 8, 8)).astype(np.float32)
    cal = tmp / "cal.npy"
    np.save(cal, x)
    return path, x, api.convert(path, device, tmp / "p", calibration=cal, **kw)


@pytest.mark.parametrize(("kind", "device"), [
    ("amax", "MAX78000"), ("amax_keep", "MAX78000"), ("norm", "MAX78000"),
    ("norm_depthwise", "MAX78002"), ("norm_transposed", "MAX78000"),
    ("bn_after_pool", "MAX78000")])
def test_converts_on_the_accelerator(kind: str, device: str, tmp_path: Path) -> None:
    path, x, done = _convert(kind, tmp_path, device)
    assert not list(done.output.rglob("cpu_layers.c"))  # nothing runs on the Arm core
    assert api.verify(done.output).passed
    model = onnx.load(str(done.model_file))
    ref = float_run(path, x)
    got = quantized_float_output(model, x).reshape(ref.shape)
    assert sqnr_db(ref, got) >= 25.0, kind
    if kind.startswith("norm"):
        offset = json.loads(metadata(model)["ai8x.input_offset"])
        np.testing.assert_allclose(offset, [-m for m in MEAN], rtol=1e-6)


def test_a_normalized_input_pooled_first_is_refused_and_the_flag_converts(
        tmp_path: Path) -> None:
    with pytest.raises(Ai8xError) as info:
        _convert("norm_pool_first", tmp_path)
    d = info.value.diagnostics[0]
    assert d.code == "float.input-gain" and "--cpu-fallback" in d.hint
    (tmp_path / "flag").mkdir()
    _, _, done = _convert("norm_pool_first", tmp_path / "flag", cpu_fallback=True)
    assert list(done.output.rglob("cpu_layers.c"))
    assert api.verify(done.output).passed


def test_a_batchnorm_before_a_padded_convolution_is_refused_and_the_flag_converts(
        tmp_path: Path) -> None:
    """Its offset would have to apply to the padding, which the accelerator fills with
    zeros: refused, naming the BatchNormalization; --cpu-fallback runs it on the CPU."""
    # MAX78002: the CPU segment sits between accelerator layers, which only MAX78002
    # resumes after (partition.start-layer); the flag is named only where it works
    with pytest.raises(Ai8xError) as info:
        _convert("bn_before_padded", tmp_path, "MAX78002")
    d = info.value.diagnostics[0]
    assert d.code == "float.batchnorm" and "BatchNormalization" in d.where
    assert "--cpu-fallback" in d.hint
    (tmp_path / "flag").mkdir()
    _, _, done = _convert("bn_before_padded", tmp_path / "flag", "MAX78002",
                          cpu_fallback=True)
    assert list(done.output.rglob("cpu_layers.c"))
    assert api.verify(done.output).passed


def test_a_batchnorm_written_as_mul_and_add_folds_too(tmp_path: Path) -> None:
    """tf2onnx writes an unfused Keras BatchNormalization as Mul, then Add, of
    per-channel constants; after a pooling, read by an unpadded convolution."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(8)

    def const(name, *shape, lo=-0.3, hi=0.3):
        return numpy_helper.from_array(rng.uniform(lo, hi, shape).astype(np.float32), name)

    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["a"], name="conv0",
                              kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["r"], name="relu0"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Mul", ["p", "k"], ["m"], name="bn/mul"),
             helper.make_node("Add", ["m", "t"], ["n"], name="bn/add"),
             helper.make_node("Conv", ["n", "w1", "b1"], ["c"], name="conv1",
                              kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["y"], name="relu1")]
    inits = [const("w0", 8, 4, 3, 3), const("b0", 8), const("k", 1, 8, 1, 1, lo=0.5, hi=2),
             const("t", 1, 8, 1, 1), const("w1", 4, 8, 3, 3), const("b1", 4)]
    graph = helper.make_graph(
        nodes, "bn_mul_add", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                            [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = tmp_path / "bn_mul_add.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    x = rng.uniform(0, 1, (32, 4, 8, 8)).astype(np.float32)
    np.save(tmp_path / "cal.npy", x)
    done = api.convert(path, "MAX78000", tmp_path / "p", calibration=tmp_path / "cal.npy")
    assert not list(done.output.rglob("cpu_layers.c"))
    assert api.verify(done.output).passed
    ref = float_run(path, x)
    got = quantized_float_output(onnx.load(str(done.model_file)), x).reshape(ref.shape)
    assert sqnr_db(ref, got) >= 20.0
