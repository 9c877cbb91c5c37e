"""Make the onnxruntime-quantized fixtures: our own digits models, quantized by the real
`onnxruntime.quantization.quantize_static` (the fixtures in fixtures/ort_*.onnx).

    python tests/quantized_sources/make_onnxruntime.py [--out DIR]

Needs torch and onnxruntime (both in the project's environment). Two small networks are
trained in float on scikit-learn's 8x8 digits (the split of examples/digits_float):

* `cnn`: examples/digits_float's network (Conv-BN-ReLU, pooling, Linear);
* `resnet`: a stem convolution and two residual blocks with identity shortcuts (Add,
  then ReLU after the Add), pooling, a classifier;
* `pow2`, `pow2_resnet`: the cnn and the resnet without biases or BatchNorm, quantized
  with power-of-two scales (onnxruntime's `TensorQuantOverrides` gives every tensor the
  power-of-two scale that holds its calibrated range, int8 with zero point 0; a ReLU's
  input and an Add's operands share its grid): the accelerator's own numbers;
* `pow2_bias`: the pow2 cnn with biases, moved onto the accelerator's 8-bit bias grid
  (128 x input scale x weight scale) before quantization.

Each is quantized from the calibration split (200 training-set digits never trained
on) in onnxruntime's QDQ format (per-tensor and per-channel weights) and its QOperator
format (QLinearConv, QLinearMatMul, QLinearAdd, ...). Seeded and single-threaded.
"""
from __future__ import annotations

import functools
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SEED = 20261126
EPOCHS = 25


@functools.cache
def _digits_float():
    spec = importlib.util.spec_from_file_location(
        "digits_float_train", ROOT / "examples" / "digits_float" / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class Block(nn.Module):
    """Conv-BN-ReLU-Conv-BN, identity shortcut Add, ReLU after the Add."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c),
                                  nn.ReLU(), nn.Conv2d(c, c, 3, padding=1),
                                  nn.BatchNorm2d(c))
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + x)


class ResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16),
                                  nn.ReLU())
        self.block1 = Block(16)
        self.pool = nn.MaxPool2d(2)
        self.block2 = Block(16)
        self.head = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                                  nn.ReLU())
        self.classifier = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block2(self.pool(self.block1(self.stem(x))))
        return self.classifier(torch.flatten(self.head(x), 1))


class Pow2Net(nn.Module):
    """No biases, no BatchNorm: every number of the quantized model is a power-of-two
    multiple of an integer the accelerator holds."""

    def __init__(self, bias: bool = False) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1, bias=bias), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, bias=bias), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1, bias=bias), nn.ReLU())
        self.classifier = nn.Linear(32 * 2 * 2, 10, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class Pow2Block(nn.Module):
    """Block's shape without biases or BatchNorm."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.ReLU(),
                                  nn.Conv2d(c, c, 3, padding=1, bias=False))
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + x)


class Pow2ResNet(nn.Module):
    """ResNet's shape without biases or BatchNorm (power-of-two quantization)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.ReLU())
        self.block1 = Pow2Block(16)
        self.pool = nn.MaxPool2d(2)
        self.block2 = Pow2Block(16)
        self.head = nn.Sequential(nn.MaxPool2d(2),
                                  nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.ReLU())
        self.classifier = nn.Linear(32 * 2 * 2, 10, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block2(self.pool(self.block1(self.stem(x))))
        return self.classifier(torch.flatten(self.head(x), 1))


def train(model: nn.Module, split, log=print) -> float:
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(SEED)
    x, y = torch.from_numpy(split.x_train), torch.from_numpy(split.y_train)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for _ in range(EPOCHS):
        for idx in torch.randperm(len(y), generator=generator).split(32):
            optimizer.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        acc = float((model(torch.from_numpy(split.x_test)).argmax(1).numpy()
                     == split.y_test).mean())
    log(f"  {type(model).__name__}: float accuracy {acc:.2%}")
    return acc


def export(model: nn.Module, split, path: Path) -> Path:
    torch.onnx.export(model, (torch.from_numpy(split.x_test[:1]),), str(path),
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}}, opset_version=17, dynamo=False)
    return path


def _reader(name: str, x: np.ndarray):
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter([{name: x[k:k + 1]} for k in range(x.shape[0])])

        def get_next(self):
            return next(self.items, None)

    return Reader()


def quantize(float_path: Path, out: Path, x_cal: np.ndarray, **kwargs) -> Path:
    from onnxruntime.quantization import quantize_static

    quantize_static(str(float_path), str(out), _reader("image", x_cal), **kwargs)
    model = onnx.load(str(out))
    model.producer_version = ""  # the same file from every onnxruntime build
    onnx.save(model, str(out))
    return out


def _pow2_scale(peak: float) -> float:
    """The finest power-of-two scale whose int8 range [-128, 127] holds `peak`."""
    return 2.0 ** math.ceil(math.log2(max(peak, 1e-12) / 127.0))


def pow2_overrides(float_path: Path, x_cal: np.ndarray) -> dict:
    """Power-of-two scales (int8, zero point 0) for every weight and activation of the
    model: the weights' peaks and the activations' calibrated peaks."""
    import onnxruntime as ort
    from onnx import numpy_helper

    model = onnx.load(str(float_path))
    overrides = {}
    for init in model.graph.initializer:
        w = numpy_helper.to_array(init)
        if w.ndim >= 2:
            overrides[init.name] = [{"scale": np.array(_pow2_scale(np.abs(w).max()), np.float32),
                                     "zero_point": np.array(0, np.int8)}]
    names = [o for n in model.graph.node for o in n.output]
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    have = {o.name for o in probe.graph.output}
    for name in names:
        if name not in have:
            probe.graph.output.append(onnx.helper.make_tensor_value_info(
                name, onnx.TensorProto.FLOAT, None))
    sess = ort.InferenceSession(probe.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    outs = sess.run(names, {"image": x_cal})
    for name, value in [*zip(names, outs, strict=True), ("image", x_cal)]:
        overrides[name] = [{"scale": np.array(_pow2_scale(float(np.abs(value).max())),
                                              np.float32),
                            "zero_point": np.array(0, np.int8)}]
    # A ReLU's input takes the ReLU's grid, so the layer rounds once (a convolution's
    # negative values clamp to -128 codes, which the ReLU then zeroes anyway); an Add's
    # operands take its grid, as the accelerator adds codes. Each such group of tensors
    # gets its coarsest scale, so that none clips.
    group = {name: name for name in overrides}

    def find(name: str) -> str:
        while group[name] != name:
            name = group[name]
        return name

    for node in model.graph.node:
        # onnxruntime gives a MaxPool's output its input's grid whatever it is told
        if node.op_type in ("Relu", "Add", "MaxPool"):
            for name in node.input:
                group[find(name)] = find(node.output[0])
    coarsest: dict[str, float] = {}
    for name, (o,) in overrides.items():
        root = find(name)
        coarsest[root] = max(coarsest.get(root, 0.0), float(o["scale"]))
    for name in overrides:
        if find(name) != name or coarsest[name] != float(overrides[name][0]["scale"]):
            overrides[name] = [{"scale": np.array(coarsest[find(name)], np.float32),
                                "zero_point": np.array(0, np.int8)}]
    return overrides


def snap_biases(float_path: Path, x_cal: np.ndarray) -> dict:
    """Move each bias onto the accelerator's bias grid, 128 x input scale x weight scale
    (8-bit, seed 000 "Bias"), so that onnxruntime's int32 bias is a multiple of 128 the
    bias memory holds; repeated until the power-of-two scales settle. The overrides."""
    from onnx import numpy_helper

    for _ in range(6):
        overrides = pow2_overrides(float_path, x_cal)
        model = onnx.load(str(float_path))
        inits = {i.name: i for i in model.graph.initializer}
        moved = False
        for node in model.graph.node:
            if node.op_type not in ("Conv", "Gemm") or len(node.input) < 3:
                continue
            unit = 128 * float(overrides[node.input[0]][0]["scale"]) * \
                float(overrides[node.input[1]][0]["scale"])
            b = numpy_helper.to_array(inits[node.input[2]])
            snapped = (np.clip(np.round(b / unit), -128, 127) * unit).astype(np.float32)
            moved |= not np.array_equal(snapped, b)
            inits[node.input[2]].CopyFrom(numpy_helper.from_array(snapped, node.input[2]))
        onnx.save(model, str(float_path))
        if not moved:
            return overrides
    raise RuntimeError("the bias grid did not settle")


def main(out: Path = HERE / "fixtures") -> None:
    from onnxruntime.quantization import QuantFormat, QuantType

    split = _digits_float().load_split()
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "_float"
    tmp.mkdir(exist_ok=True)
    models = {"cnn": _digits_float().DigitsFloat, "resnet": ResNet, "pow2": Pow2Net,
              "pow2_resnet": Pow2ResNet, "pow2_bias": functools.partial(Pow2Net, True)}
    floats = {}
    for name, make in models.items():
        torch.manual_seed(SEED)  # the initial weights too
        model = make()
        train(model, split)
        floats[name] = export(model, split, tmp / f"{name}.onnx")
    x_cal = split.x_cal
    quantize(floats["cnn"], out / "ort_cnn_qdq_tensor.onnx", x_cal,
             quant_format=QuantFormat.QDQ)
    quantize(floats["cnn"], out / "ort_cnn_qdq_channel.onnx", x_cal,
             quant_format=QuantFormat.QDQ, per_channel=True,
             activation_type=QuantType.QInt8, extra_options={"ActivationSymmetric": True})
    quantize(floats["cnn"], out / "ort_cnn_qoperator.onnx", x_cal,
             quant_format=QuantFormat.QOperator)
    quantize(floats["resnet"], out / "ort_resnet_qdq.onnx", x_cal,
             quant_format=QuantFormat.QDQ)
    quantize(floats["resnet"], out / "ort_resnet_qoperator.onnx", x_cal,
             quant_format=QuantFormat.QOperator)
    quantize(floats["pow2"], out / "ort_pow2_qdq.onnx", x_cal,
             quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
             weight_type=QuantType.QInt8, extra_options={
                 "ActivationSymmetric": True, "WeightSymmetric": True,
                 "TensorQuantOverrides": pow2_overrides(floats["pow2"], x_cal)})
    quantize(floats["pow2_resnet"], out / "ort_pow2_resnet_qdq.onnx", x_cal,
             quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
             weight_type=QuantType.QInt8, extra_options={
                 "ActivationSymmetric": True, "WeightSymmetric": True,
                 "TensorQuantOverrides": pow2_overrides(floats["pow2_resnet"], x_cal)})
    quantize(floats["pow2_bias"], out / "ort_pow2_bias_qdq.onnx", x_cal,
             quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
             weight_type=QuantType.QInt8, extra_options={
                 "ActivationSymmetric": True, "WeightSymmetric": True,
                 "TensorQuantOverrides": snap_biases(floats["pow2_bias"], x_cal)})
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()
    for f in sorted(out.glob("ort_*.onnx")):
        print(f"{f.name}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
