"""Write the vendor-export fixtures with the vendor training repository's own code.

Run with the vendor training repository's Python (torch, onnx) and its checkout on the
path; nothing of it is copied here, only what it writes for OUR small model:

    ONNX2AI8X_VENDOR_TRAINING=/tmp/vendor/training \
        /tmp/vendor/venv/bin/python tests/float_onnx/vendor_fixtures/make_fixtures.py

The model (random integer weights, as a quantized `-q` checkpoint holds them; mixed
weight bits; a residual element-wise add; max and average pooling; a wide output) is
exported the ways a vendor user can hold it:

* `unfused-bn.onnx`: the model with BatchNorm modules whose statistics are the defaults
  (a checkpoint fused before quantization, exported without `ai8x.fuse_bn_layers`),
  `set_device(85, simulate=False)`, `onnx_export_prep`, torch.onnx.export opset 17;
* `plain.onnx`: the same integers in the model without BatchNorm (the `q` form);
* `sim8.onnx`: the same in the `-8` mode (`simulate=True`, the checkpoint's weight bits
  set as `quantize.py` stores them);
* `reference.npz`: a random int8 `sample` and `output`, the vendor training code's own
  `-8` forward of the model on it (its integer simulation of the hardware);
* `float.onnx`: the same model with float weights (an unquantized checkpoint), which
  needs calibration;
* `heads-q.onnx`, `heads-reference.npz`: a 1-D model with a channel concatenation and
  two heads whose outputs the model's forward permutes, flattens and concatenates (as
  detectors do), the `q` form and the `-8` forward.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
BITS = {"conv1": 8, "conv2": 4, "conv3": 8, "conv4": 2, "fc": 8}
SHIFTS = {"conv1": -1, "conv2": -3, "conv3": -2, "conv4": 0, "fc": 0}


def _model(ai8x, torch, bn: str | None):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = ai8x.Conv2d(1, 8, 3, padding=1, activation="ReLU", batchnorm=bn)
            self.conv2 = ai8x.Conv2d(8, 8, 3, padding=1, pooling="Max", activation="ReLU",
                                     batchnorm=bn)
            self.conv3 = ai8x.Conv2d(8, 8, 3, padding=1, activation="ReLU", batchnorm=bn)
            self.add = ai8x.Add()
            self.conv4 = ai8x.Conv2d(8, 16, 1, pooling="Avg", activation="ReLU",
                                     batchnorm=bn)
            self.fc = ai8x.Linear(16 * 3 * 3, 10, bias=True, wide=True)

        def forward(self, x):
            x2 = self.conv2(self.conv1(x))
            y = self.conv4(self.add(x2, self.conv3(x2)))
            return self.fc(y.view(y.size(0), -1))

    return Net().eval()


def _heads(ai8x, torch):
    nn = torch.nn

    class Heads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = ai8x.Conv1d(4, 8, 3, padding=1, activation="ReLU")
            self.conv2 = ai8x.Conv1d(8, 8, 3, padding=1, activation="ReLU")
            self.conv3 = ai8x.Conv1d(16, 8, 1, activation="ReLU")
            self.head1 = ai8x.Conv1d(8, 4, 3, padding=1)
            self.head2 = ai8x.Conv1d(8, 2, 1)

        def forward(self, x):
            x1 = self.conv1(x)
            y = self.conv3(torch.cat([x1, self.conv2(x1)], dim=1))
            h1 = self.head1(y).permute(0, 2, 1).reshape(y.size(0), -1, 2)
            h2 = self.head2(y).permute(0, 2, 1).reshape(y.size(0), -1, 2)
            return torch.cat([h1, h2], dim=1)

    return Heads().eval()


def _integers(rng, shape, bits: int) -> np.ndarray:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return rng.integers(lo, hi + 1, shape).astype(np.float32)


def _load(model, torch, params: dict, with_bits: bool, bits=None, shifts=None) -> None:
    """Put the checkpoint's numbers into the model (as loading a -q checkpoint does)."""
    bits, shifts = bits or BITS, shifts or SHIFTS
    with torch.no_grad():
        for name, (w, b) in params.items():
            m = getattr(model, name)
            m.op.weight.copy_(torch.from_numpy(w))
            m.op.bias.copy_(torch.from_numpy(b))
            m.output_shift.copy_(torch.tensor([float(shifts[name])]))
            if with_bits:
                m.init_module(bits[name], bits[name], True, 1.0)
                m.adjust_output_shift.fill_(False)
                m.set_functions()


def _export(torch, ai8x, model, path: Path, shape=(1, 12, 12)) -> None:
    ai8x.onnx_export_prep(model, simplify=False)
    torch.onnx.export(model, torch.zeros(1, *shape), str(path), opset_version=17,
                      dynamo=False)


def main() -> None:
    sys.path.insert(0, os.environ.get("ONNX2AI8X_VENDOR_TRAINING", "/tmp/vendor/training"))
    import ai8x
    import torch

    rng = np.random.default_rng(24)
    shapes = {"conv1": (8, 1, 3, 3), "conv2": (8, 8, 3, 3), "conv3": (8, 8, 3, 3),
              "conv4": (16, 8, 1, 1), "fc": (10, 144)}
    params = {}
    for name, shape in shapes.items():
        bits = BITS[name]
        # quantize.py stores the bias as the integer bias times 2**(bits-1)
        bias = _integers(rng, (shape[0],), bits) * 2.0 ** (bits - 1)
        params[name] = (_integers(rng, shape, bits), bias.astype(np.float32))

    ai8x.set_device(85, False, False)
    for bn, name in (("Affine", "unfused-bn.onnx"), (None, "plain.onnx")):
        model = _model(ai8x, torch, bn)
        _load(model, torch, params, with_bits=False)
        _export(torch, ai8x, model, HERE / name)

    ai8x.set_device(85, True, False)
    model = _model(ai8x, torch, None)
    _load(model, torch, params, with_bits=True)
    sample = rng.integers(-128, 128, (1, 1, 12, 12)).astype(np.int64)
    with torch.no_grad():
        output = model(torch.from_numpy(sample.astype(np.float32))).numpy()
    np.savez(HERE / "reference.npz", sample=sample, output=output.astype(np.int64))
    _export(torch, ai8x, model, HERE / "sim8.onnx")

    ai8x.set_device(85, False, False)
    model = _model(ai8x, torch, None)
    with torch.no_grad():  # float weights of a plausible size, shifts 0
        for name, (w, b) in params.items():
            m = getattr(model, name)
            m.op.weight.copy_(torch.from_numpy(
                rng.normal(0, 0.3, w.shape).astype(np.float32)))
            m.op.bias.copy_(torch.from_numpy(rng.normal(0, 0.1, b.shape).astype(np.float32)))
    _export(torch, ai8x, model, HERE / "float.onnx")
    _write_heads(torch, ai8x, rng)


def _write_heads(torch, ai8x, rng) -> None:
    bits = {"conv1": 8, "conv2": 2, "conv3": 4, "head1": 8, "head2": 8}
    shifts = {"conv1": -2, "conv2": 1, "conv3": -1, "head1": -2, "head2": -1}
    shapes = {"conv1": (8, 4, 3), "conv2": (8, 8, 3), "conv3": (8, 16, 1),
              "head1": (4, 8, 3), "head2": (2, 8, 1)}
    params = {name: (_integers(rng, shape, bits[name]),
                     (_integers(rng, (shape[0],), bits[name]) * 2.0 ** (bits[name] - 1))
                     .astype(np.float32)) for name, shape in shapes.items()}
    ai8x.set_device(85, False, False)
    model = _heads(ai8x, torch)
    _load(model, torch, params, False, bits, shifts)
    _export(torch, ai8x, model, HERE / "heads-q.onnx", (4, 16))
    ai8x.set_device(85, True, False)
    model = _heads(ai8x, torch)
    _load(model, torch, params, True, bits, shifts)
    sample = rng.integers(-128, 128, (1, 4, 16)).astype(np.int64)
    with torch.no_grad():
        output = model(torch.from_numpy(sample.astype(np.float32))).numpy()
    np.savez(HERE / "heads-reference.npz", sample=sample, output=output.astype(np.int64))


if __name__ == "__main__":
    main()
