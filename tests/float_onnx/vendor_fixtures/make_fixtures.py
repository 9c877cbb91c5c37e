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
  `-8` forward of the model on it (its integer simulation of the hardware).
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


def _integers(rng, shape, bits: int) -> np.ndarray:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return rng.integers(lo, hi + 1, shape).astype(np.float32)


def _load(model, torch, params: dict, with_bits: bool) -> None:
    """Put the checkpoint's numbers into the model (as loading a -q checkpoint does)."""
    with torch.no_grad():
        for name, (w, b) in params.items():
            m = getattr(model, name)
            m.op.weight.copy_(torch.from_numpy(w))
            m.op.bias.copy_(torch.from_numpy(b))
            m.output_shift.copy_(torch.tensor([float(SHIFTS[name])]))
            if with_bits:
                m.init_module(BITS[name], BITS[name], True, 1.0)
                m.adjust_output_shift.fill_(False)
                m.set_functions()


def _export(torch, ai8x, model, path: Path) -> None:
    ai8x.onnx_export_prep(model, simplify=False)
    torch.onnx.export(model, torch.zeros(1, 1, 12, 12), str(path), opset_version=17,
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


if __name__ == "__main__":
    main()
