"""The digits network with a 5x5 first convolution, which the accelerator does not have:
with `--cpu-fallback` that layer runs on the Arm core (issue 28) and the rest on the
accelerator, bit-exact, in one project.

    python examples/digits_float/train_cpu_stem.py     # writes digits_cpu_stem.onnx and
                                                       # metrics_cpu_stem.json here
    onnx2ai8x examples/digits_float/digits_cpu_stem.onnx --device MAX78000 \\
        --calibration examples/digits_float/calibration.npy --cpu-fallback

Same data split, seed and training as train.py (the calibration digits are the ones
train.py saves); only the first convolution differs.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
import typer
from torch import nn
from train import HERE, Metrics, Split, trained_export, write_metrics


class DigitsCpuStem(nn.Module):
    """A 5x5 Conv-BN-ReLU stem (the CPU's), then the accelerator's layers."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 5, padding=2), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        )
        self.classifier = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def split_accuracy(model: Path, calibration: Path, split: Split) -> float:
    """Held-out accuracy of the split model as the project computes it: the CPU stem's
    integers (onnx2ai8x.cpu's reference), then the accelerator's (the ai8x-ONNX
    reference), both quantized by onnx2ai8x from the calibration digits."""
    import custom_ops
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.frontend import QuantizeRequest
    from onnx2ai8x.partition.build import partition

    part = partition(model, get_device("MAX78000"), QuantizeRequest(calibration=calibration))
    assert part.stem is not None and not part.between and part.head is None
    q = part.quantize_input(split.x_test)
    acc_in = np.stack([part.run_stem(s) for s in q]).astype(np.int8)
    logits = custom_ops.run(custom_ops.session(part.quant.model), acc_in)[0]
    predicted = np.asarray(logits).reshape(len(split.y_test), -1).argmax(1)
    return float((predicted == split.y_test).mean())


def train(out: Path, log=print) -> Metrics:
    split, acc = trained_export(DigitsCpuStem, out / "digits_cpu_stem.onnx", log)
    calibration = out / "calibration.npy"
    if not calibration.is_file():
        np.save(calibration, split.x_cal, allow_pickle=False)
    acc_q = split_accuracy(out / "digits_cpu_stem.onnx", calibration, split)
    log(f"quantized accuracy (CPU stem + accelerator, bit-exact references): {acc_q:.2%}")
    return write_metrics(out / "metrics_cpu_stem.json", split, acc, acc_q)


def main(out: Annotated[Path, typer.Option(
             "--out", help="Directory for digits_cpu_stem.onnx and "
                           "metrics_cpu_stem.json.")] = HERE) -> None:
    """Train the digits network with a 5x5 stem and export it with torch.onnx.export."""
    start = time.perf_counter()
    metrics = train(out)
    print(f"float accuracy {metrics.float_accuracy:.2%}, quantized "
          f"{metrics.quantized_accuracy:.2%} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    typer.run(main)
