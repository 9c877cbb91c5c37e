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

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
import typer
from torch import nn
from train import EPOCHS, HERE, SEED, Metrics, Split, fit, load_split


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
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    split = load_split()
    model = DigitsCpuStem()
    acc = fit(model, split, log)
    out.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(model, (torch.from_numpy(split.x_test[:1]),),
                      str(out / "digits_cpu_stem.onnx"), input_names=["image"],
                      output_names=["logits"], dynamic_axes={"image": {0: "batch"}},
                      opset_version=17, dynamo=False)
    calibration = out / "calibration.npy"
    if not calibration.is_file():
        np.save(calibration, split.x_cal, allow_pickle=False)
    acc_q = split_accuracy(out / "digits_cpu_stem.onnx", calibration, split)
    log(f"quantized accuracy (CPU stem + accelerator, bit-exact references): {acc_q:.2%}")
    metrics = Metrics(seed=SEED, train_samples=len(split.y_train),
                      calibration_samples=len(split.y_cal),
                      held_out_samples=len(split.y_test), epochs=EPOCHS,
                      float_accuracy=round(acc, 6), quantized_accuracy=round(acc_q, 6))
    (out / "metrics_cpu_stem.json").write_text(json.dumps(asdict(metrics), indent=2) + "\n")
    return metrics


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
