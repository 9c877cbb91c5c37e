"""Train a Brevitas quantization-aware model on the digits, export it as QCDQ and QONNX.

    python examples/digits_brevitas/train.py            # reproduces the committed files
    python examples/digits_brevitas/train.py --out DIR  # writes them elsewhere

Needs brevitas (and torch, onnx, onnxscript, onnxoptimizer, scikit-learn, typer) in its
own environment; onnx2ai8x itself never imports brevitas. The network is
examples/digits_float's, quantization-aware: every weight and activation is int8 with a
power-of-two scale (`Int8WeightPerTensorFixedPoint`, `Int8ActPerTensorFixedPoint`, also
after each ReLU so its codes are the accelerator's [0, 127]) and the convolutions and the
classifier have no bias, so the trained model holds exactly the accelerator's numbers:
onnx2ai8x takes its integers and shifts as they are, with no calibration data.

`build(pow2=False)` is the same network with Brevitas' float scales
(`Int8WeightPerTensorFloat`, `Int8ActPerTensorFloat`) and biases, which onnx2ai8x
requantizes to power-of-two shifts (tests/quantized_sources/make_brevitas.py).

Data: examples/digits_float's split (scikit-learn's 8x8 digits scaled to [0, 1]).
Seeded and single-threaded.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
import typer
from torch import nn

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SEED = 20261126
EPOCHS = 30
QCDQ = "digits_brevitas_qcdq.onnx"
QONNX = "digits_brevitas_qonnx.onnx"


@functools.cache
def digits_float():
    """examples/digits_float/train.py as a module (its split and float network)."""
    spec = importlib.util.spec_from_file_location(
        "digits_float_train", ROOT / "examples" / "digits_float" / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def build(pow2: bool = True, weight_bits: tuple[int, int, int, int] = (8, 8, 8, 8)
          ) -> nn.Module:
    """Conv-ReLU blocks with max pooling and a linear classifier, quantization-aware
    (`weight_bits`: per layer, the accelerator's 1, 2, 4 or 8)."""
    import brevitas.nn as qnn
    from brevitas import quant

    if pow2:
        wq, aq, bias = quant.Int8WeightPerTensorFixedPoint, quant.Int8ActPerTensorFixedPoint, \
            False
    else:
        wq, aq, bias = quant.Int8WeightPerTensorFloat, quant.Int8ActPerTensorFloat, True

    def conv(cin: int, cout: int, bits: int):
        return qnn.QuantConv2d(cin, cout, 3, padding=1, bias=bias, weight_quant=wq,
                               weight_bit_width=bits, return_quant_tensor=True)

    def relu():
        return qnn.QuantReLU(act_quant=aq, return_quant_tensor=True)

    class DigitsQat(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                qnn.QuantIdentity(act_quant=aq, return_quant_tensor=True),
                conv(1, 16, weight_bits[0]), relu(), nn.MaxPool2d(2),
                conv(16, 32, weight_bits[1]), relu(), nn.MaxPool2d(2),
                conv(32, 32, weight_bits[2]), relu())
            self.classifier = qnn.QuantLinear(32 * 2 * 2, 10, bias=bias, weight_quant=wq,
                                              weight_bit_width=weight_bits[3])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.classifier(torch.flatten(self.features(x), 1))

    return DigitsQat()


def train(model: nn.Module, split, log=print) -> float:
    """Quantization-aware training (Adam, cross-entropy); held-out accuracy."""
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(SEED)
    x, y = torch.from_numpy(split.x_train), torch.from_numpy(split.y_train)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for epoch in range(EPOCHS):
        total = 0.0
        for idx in torch.randperm(len(y), generator=generator).split(32):
            optimizer.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(idx)
        log(f"  epoch {epoch + 1:2d}/{EPOCHS}: loss {total / len(y):.4f}")
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(split.x_test))
    return float((logits.argmax(1).numpy() == split.y_test).mean())


def export(model: nn.Module, split, out: Path, stem: str = "digits_brevitas"
           ) -> tuple[Path, Path]:
    """The QCDQ (QuantizeLinear/Clip/DequantizeLinear) and QONNX (Quant) exports."""
    import onnx
    from brevitas.export import export_onnx_qcdq, export_qonnx

    x = torch.from_numpy(split.x_test[:1])
    qcdq, qonnx = out / f"{stem}_qcdq.onnx", out / f"{stem}_qonnx.onnx"
    export_onnx_qcdq(model, x, export_path=str(qcdq), opset_version=17)
    export_qonnx(model, x, export_path=str(qonnx))
    for path in (qcdq, qonnx):
        m = onnx.load(str(path))
        inits = {i.name for i in m.graph.initializer}
        # the exporter lists its constants as graph inputs too: only the image is one
        keep = [i for i in m.graph.input if i.name not in inits]
        del m.graph.input[:]
        m.graph.input.extend(keep)
        m.producer_version = ""
        for node in m.graph.node:
            # the exporter's stack traces name this machine's paths and line numbers
            del node.metadata_props[:]
        onnx.save(m, str(path))  # one self-contained file: the weights inline
        stale = path.with_name(path.name + ".data")
        if stale.exists():
            stale.unlink()
    return qcdq, qonnx


@dataclass(frozen=True)
class Metrics:
    seed: int
    epochs: int
    held_out_samples: int
    brevitas_accuracy: float  # the QAT model in torch (Brevitas' fake quantization)
    qcdq_onnxruntime_accuracy: float  # the QCDQ export run by onnxruntime
    converted_accuracy: float  # onnx2ai8x's conversion on the bit-exact reference
    exact: bool  # onnx2ai8x took the integers and shifts as they are


def converted_accuracy(path: Path, split) -> tuple[float, bool]:
    """Held-out accuracy of onnx2ai8x's conversion (no calibration data), if onnx2ai8x
    is importable here (PYTHONPATH); (nan, False) otherwise."""
    try:
        import custom_ops
        from onnx2ai8x.quantize import quantize_file
    except ImportError:
        return float("nan"), False
    result = quantize_file(path, None)
    out = custom_ops.run(custom_ops.session(result.model),
                         result.mapping.quantize(split.x_test))[0]
    predicted = np.asarray(out).reshape(len(split.y_test), -1).argmax(1)
    return float((predicted == split.y_test).mean()), bool(result.summary["exact"])


def onnxruntime_accuracy(path: Path, split) -> float:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    logits = np.concatenate([sess.run(None, {name: split.x_test[k:k + 1]})[0]
                             for k in range(len(split.y_test))])
    return float((logits.argmax(1) == split.y_test).mean())


def main(out: Annotated[Path, typer.Option(
             "--out", help="Directory for the two ONNX exports and metrics.json.")] = HERE
         ) -> None:
    """Train the quantization-aware digits network and export it (QCDQ and QONNX)."""
    torch.manual_seed(SEED)
    split = digits_float().load_split()
    model = build(pow2=True)
    acc = train(model, split)
    print(f"Brevitas QAT accuracy on {len(split.y_test)} held-out digits: {acc:.2%}")
    out.mkdir(parents=True, exist_ok=True)
    qcdq, _ = export(model, split, out)
    ort_acc = onnxruntime_accuracy(qcdq, split)
    conv_acc, exact = converted_accuracy(qcdq, split)
    print(f"QCDQ on onnxruntime {ort_acc:.2%}; converted by onnx2ai8x {conv_acc:.2%} "
          f"({'exact' if exact else 'requantized'})")
    metrics = Metrics(SEED, EPOCHS, len(split.y_test), round(acc, 6), round(ort_acc, 6),
                      round(conv_acc, 6), exact)
    (out / "metrics.json").write_text(json.dumps(asdict(metrics), indent=2) + "\n")


if __name__ == "__main__":
    typer.run(main)
