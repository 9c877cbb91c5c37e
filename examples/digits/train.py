"""Train, quantize and export the handwritten-digits example.

    python examples/digits/train.py            # reproduces the committed files
    python examples/digits/train.py --out DIR  # writes them elsewhere

The flow is the vendor training repository's, written against `ai8x_torch` (the drop-in
`ai8x` module): floating-point epochs, then quantization-aware training (QAT) with a
weight-bits policy, then quantization of the weights to the integers the accelerator
holds, then export to ai8x-ONNX. The quantized accuracy is measured with the onnxruntime
reference on the exported file, i.e. on exactly the integers the MAX78000 computes.

Data: scikit-learn's 8x8 digits (1,797 images, pixel values 0..16), so nothing is
downloaded. Everything is seeded and runs single-threaded with deterministic kernels, so
a rerun writes byte-identical `digits.onnx`, `sample.npy` and `metrics.json`.
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

import ai8x_torch as ai8x
import custom_ops

HERE = Path(__file__).resolve().parent
SEED = 20261122
HELD_OUT = 0.2
FLOAT_EPOCHS = 30
QAT_EPOCHS = 20
BATCH = 32
LEARNING_RATE = 2e-3
# The vendor's QAT policy format (`policies/qat_policy_*.yaml`): 8-bit weights by
# default, the classifier with 4-bit weights to show a per-layer override.
QAT_POLICY = {"start_epoch": FLOAT_EPOCHS, "weight_bits": 8,
              "overrides": {"fc": {"weight_bits": 4}}}


class DigitsNet(nn.Module):
    """Three convolutions and a classifier: 8x8 -> 8x8 -> 4x4 -> 2x2 -> 10 logits.

    Written exactly as a vendor model file would be (`ai8x.FusedConv2dReLU`, ...), so
    the same class runs under the vendor's training repository.
    """

    def __init__(self, num_classes: int = 10, bias: bool = True) -> None:
        super().__init__()
        self.conv1 = ai8x.FusedConv2dReLU(1, 16, 3, padding=1, bias=bias)
        self.conv2 = ai8x.FusedMaxPoolConv2dReLU(16, 32, 3, pool_size=2, pool_stride=2,
                                                 padding=1, bias=bias)
        self.conv3 = ai8x.FusedMaxPoolConv2dReLU(32, 32, 3, pool_size=2, pool_stride=2,
                                                 padding=1, bias=bias)
        # A wide (32-bit) output keeps the full accumulator for the logits.
        self.fc = ai8x.Linear(32 * 2 * 2, num_classes, bias=bias, wide=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        x = self.conv2(x)
        x = self.conv3(x)
        x = x.view(x.size(0), -1)
        return self.fc(x)


@dataclass(frozen=True)
class Split:
    """The digits as the accelerator sees them, split into training and held-out sets."""

    x_train: np.ndarray  # int64 (N, 1, 8, 8), values in [-128, 127]
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def accelerator_input(images: np.ndarray) -> np.ndarray:
    """Pixels 0..16 -> the accelerator's signed 8-bit input.

    Same rule as the vendor's `ai8x.normalize`: scale to [0, 1], subtract 0.5, multiply
    by 256, round, clamp to [-128, 127] (seed 000, "Data Format": inputs are signed
    8-bit). Training divides these integers by 128 to get the [-1, 1) range.
    """
    scaled = images.astype(np.float64) / 16.0
    return np.clip(np.round((scaled - 0.5) * 256.0), -128, 127).astype(np.int64)


def load_split(seed: int = SEED) -> Split:
    digits = load_digits()
    x = accelerator_input(digits.images).reshape(-1, 1, 8, 8)
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=HELD_OUT, random_state=seed, stratify=digits.target)
    return Split(x_train, y_train.astype(np.int64), x_test, y_test.astype(np.int64))


def _batches(n: int, generator: torch.Generator) -> list[torch.Tensor]:
    order = torch.randperm(n, generator=generator)
    return list(order.split(BATCH))


def _train(model: nn.Module, split: Split, epochs: int, generator: torch.Generator,
           log) -> None:
    x = torch.from_numpy(split.x_train).float() / 128.0
    y = torch.from_numpy(split.y_train)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for epoch in range(epochs):
        total = 0.0
        for idx in _batches(len(y), generator):
            optimizer.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(idx)
        log(f"  epoch {epoch + 1:2d}/{epochs}: loss {total / len(y):.4f}")


def float_accuracy(model: nn.Module, split: Split) -> float:
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(split.x_test).float() / 128.0)
    return float((logits.argmax(1).numpy() == split.y_test).mean())


def reference_accuracy(onnx_path: Path, split: Split) -> float:
    """Accuracy of the exported model run by the bit-exact onnxruntime reference."""
    logits = custom_ops.run(custom_ops.session(onnx_path), split.x_test)[0]
    return float((np.asarray(logits).reshape(len(split.y_test), -1).argmax(1)
                  == split.y_test).mean())


@dataclass(frozen=True)
class Metrics:
    seed: int
    train_samples: int
    held_out_samples: int
    float_epochs: int
    qat_epochs: int
    float_accuracy: float
    qat_float_accuracy: float
    quantized_accuracy: float
    sample_index: int
    sample_label: int


def train(out: Path, log=print) -> Metrics:
    """Train, quantize, export and evaluate; write the three files into `out`."""
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(SEED)
    split = load_split()

    ai8x.set_device(85, simulate=False, round_avg=False, verbose=False)
    model = DigitsNet()
    log(f"floating-point training ({FLOAT_EPOCHS} epochs)")
    _train(model, split, FLOAT_EPOCHS, generator, log)
    acc_float = float_accuracy(model, split)
    log(f"float accuracy on {len(split.y_test)} held-out digits: {acc_float:.2%}")

    ai8x.fuse_bn_layers(model)
    ai8x.initiate_qat(model, QAT_POLICY)
    log(f"quantization-aware training ({QAT_EPOCHS} epochs)")
    _train(model, split, QAT_EPOCHS, generator, log)
    acc_qat = float_accuracy(model, split)
    log(f"QAT accuracy (training arithmetic): {acc_qat:.2%}")

    ai8x.quantize_model(model)
    out.mkdir(parents=True, exist_ok=True)
    onnx_path = out / "digits.onnx"
    sample_index = 0
    sample = split.x_test[sample_index:sample_index + 1]
    ai8x.export_onnx(model, torch.from_numpy(sample).float(), onnx_path)
    acc_quant = reference_accuracy(onnx_path, split)
    log(f"quantized accuracy (onnxruntime reference, accelerator integers): "
        f"{acc_quant:.2%}")

    np.save(out / "sample.npy", sample[0].astype(np.int64))
    metrics = Metrics(seed=SEED, train_samples=len(split.y_train),
                      held_out_samples=len(split.y_test), float_epochs=FLOAT_EPOCHS,
                      qat_epochs=QAT_EPOCHS, float_accuracy=round(acc_float, 6),
                      qat_float_accuracy=round(acc_qat, 6),
                      quantized_accuracy=round(acc_quant, 6), sample_index=sample_index,
                      sample_label=int(split.y_test[sample_index]))
    (out / "metrics.json").write_text(json.dumps(asdict(metrics), indent=2) + "\n")
    return metrics


def main(out: Annotated[Path, typer.Option(
             "--out", help="Directory for digits.onnx, sample.npy and metrics.json.")] = HERE,
         quiet: Annotated[bool, typer.Option("--quiet", help="Print only the figures.")] = False,
         ) -> None:
    """Train the digits network with QAT and export it to ai8x-ONNX."""
    start = time.perf_counter()
    metrics = train(out, log=(lambda _msg: None) if quiet else print)
    print(f"float {metrics.float_accuracy:.2%}, quantized "
          f"{metrics.quantized_accuracy:.2%} ({time.perf_counter() - start:.1f} s); "
          f"wrote {out}")


if __name__ == "__main__":
    typer.run(main)
