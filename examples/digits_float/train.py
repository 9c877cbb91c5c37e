"""Train a plain PyTorch model on the digits, export it as standard float ONNX.

    python examples/digits_float/train.py            # reproduces the committed files
    python examples/digits_float/train.py --out DIR  # writes them elsewhere

No `ai8x_torch` here: an ordinary `torch.nn` model, trained in floating point and
exported with `torch.onnx.export`, as a user brings it from any framework. onnx2ai8x
then quantizes it with the calibration split (post-training quantization):

    onnx2ai8x examples/digits_float/digits_float.onnx --device MAX78000 \\
        --calibration examples/digits_float/calibration.npy

Data: scikit-learn's 8x8 digits (pixel values 0..16, scaled to [0, 1]), split into
training, calibration (samples the quantizer sees, never used for training) and
held-out test digits. Seeded and single-threaded: a rerun writes the same numbers.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
import typer
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

HERE = Path(__file__).resolve().parent
SEED = 20261123
HELD_OUT = 360
CALIBRATION = 200
EPOCHS = 30
BATCH = 32
LEARNING_RATE = 2e-3


class DigitsFloat(nn.Module):
    """Conv-BN-ReLU blocks with max pooling and a linear classifier: 8x8 -> 10 logits."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        )
        self.classifier = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


@dataclass(frozen=True)
class Split:
    x_train: np.ndarray  # float32 (N, 1, 8, 8) in [0, 1]
    y_train: np.ndarray
    x_cal: np.ndarray
    y_cal: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_split(seed: int = SEED) -> Split:
    """Training, calibration and held-out digits (stratified, seeded)."""
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    x_rest, x_test, y_rest, y_test = train_test_split(
        x, y, test_size=HELD_OUT, random_state=seed, stratify=y)
    x_train, x_cal, y_train, y_cal = train_test_split(
        x_rest, y_rest, test_size=CALIBRATION, random_state=seed, stratify=y_rest)
    return Split(x_train, y_train, x_cal, y_cal, x_test, y_test)


@dataclass(frozen=True)
class Metrics:
    seed: int
    train_samples: int
    calibration_samples: int
    held_out_samples: int
    epochs: int
    float_accuracy: float
    quantized_accuracy: float


def quantized_accuracy(model: Path, calibration: Path, split: Split) -> float:
    """Held-out accuracy of the model onnx2ai8x quantizes with the calibration split,
    run by the bit-exact reference (the accelerator's integers)."""
    import custom_ops
    from onnx2ai8x.quantize import quantize_file

    result = quantize_file(model, calibration)
    logits = custom_ops.run(custom_ops.session(result.model),
                            result.mapping.quantize(split.x_test))[0]
    predicted = np.asarray(logits).reshape(len(split.y_test), -1).argmax(1)
    return float((predicted == split.y_test).mean())


def fit(model: nn.Module, split: Split, log=print) -> float:
    """Train `model` on the split's training set (Adam, cross-entropy, EPOCHS epochs of
    seeded shuffles) and return its float accuracy on the held-out set. Shared by the
    example's networks (train_cpu_stem.py trains its CPU-stem model the same way)."""
    generator = torch.Generator().manual_seed(SEED)
    x = torch.from_numpy(split.x_train)
    y = torch.from_numpy(split.y_train)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for epoch in range(EPOCHS):
        total = 0.0
        for idx in torch.randperm(len(y), generator=generator).split(BATCH):
            optimizer.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(idx)
        log(f"  epoch {epoch + 1:2d}/{EPOCHS}: loss {total / len(y):.4f}")
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(split.x_test))
    acc = float((logits.argmax(1).numpy() == split.y_test).mean())
    log(f"float accuracy on {len(split.y_test)} held-out digits: {acc:.2%}")
    return acc


def trained_export(network: type[nn.Module], onnx_file: Path, log=print
                   ) -> tuple[Split, float]:
    """Train a fresh `network` (seeded, deterministic, one thread) and export it with
    torch.onnx.export to `onnx_file`: the split and the float held-out accuracy."""
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    split = load_split()
    model = network()
    acc = fit(model, split, log)
    onnx_file.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(model, (torch.from_numpy(split.x_test[:1]),), str(onnx_file),
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}}, opset_version=17, dynamo=False)
    return split, acc


def write_metrics(path: Path, split: Split, acc: float, acc_q: float) -> Metrics:
    metrics = Metrics(seed=SEED, train_samples=len(split.y_train),
                      calibration_samples=len(split.y_cal),
                      held_out_samples=len(split.y_test), epochs=EPOCHS,
                      float_accuracy=round(acc, 6), quantized_accuracy=round(acc_q, 6))
    path.write_text(json.dumps(asdict(metrics), indent=2) + "\n")
    return metrics


def train(out: Path, log=print) -> Metrics:
    split, acc = trained_export(DigitsFloat, out / "digits_float.onnx", log)
    np.save(out / "calibration.npy", split.x_cal, allow_pickle=False)
    np.save(out / "calibration_labels.npy", split.y_cal, allow_pickle=False)
    acc_q = quantized_accuracy(out / "digits_float.onnx", out / "calibration.npy", split)
    log(f"quantized accuracy (onnx2ai8x post-training quantization, onnxruntime "
        f"reference): {acc_q:.2%}")
    return write_metrics(out / "metrics.json", split, acc, acc_q)


def main(out: Annotated[Path, typer.Option(
             "--out", help="Directory for digits_float.onnx, calibration*.npy and "
                           "metrics.json.")] = HERE) -> None:
    """Train the plain float digits network and export it with torch.onnx.export."""
    start = time.perf_counter()
    metrics = train(out)
    print(f"float accuracy {metrics.float_accuracy:.2%}, quantized "
          f"{metrics.quantized_accuracy:.2%} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    typer.run(main)
