"""Make the Brevitas fixtures: fixtures/brevitas_{float,residual}_{qcdq,qonnx}.onnx with
float (not power-of-two) scales, and brevitas_pow2_w4_{qcdq,qonnx}.onnx, the example's
power-of-two network with 4-bit weights in its middle layers (mixed weight widths).

    python tests/quantized_sources/make_brevitas.py [--out DIR]

Needs brevitas in its own environment (see examples/digits_brevitas/train.py, whose
network and training this reuses: `build(pow2=False)`, Brevitas' `Int8WeightPerTensorFloat`
and `Int8ActPerTensorFloat` with biases). The power-of-two fixtures are the example's own
committed exports (examples/digits_brevitas/digits_brevitas_{qcdq,qonnx}.onnx).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _example():
    spec = importlib.util.spec_from_file_location(
        "digits_brevitas_train", ROOT / "examples" / "digits_brevitas" / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def residual():
    """A residual network in Brevitas' defaults and more of its idioms: per-channel
    float weight scales, float biases (the dynamo QCDQ export refuses quantized ones),
    unsigned (uint8) ReLU outputs, and a `QuantEltwiseAdd` that requantizes both
    operands to its own input scale."""
    import brevitas.nn as qnn
    from brevitas import quant
    from torch import nn

    act, relu_q = quant.Int8ActPerTensorFloat, quant.Uint8ActPerTensorFloat
    kw = dict(bias=True, weight_quant=quant.Int8WeightPerChannelFloat,
              return_quant_tensor=True)

    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = qnn.QuantIdentity(act_quant=act, return_quant_tensor=True)
            self.c1 = qnn.QuantConv2d(1, 16, 3, padding=1, **kw)
            self.r1 = qnn.QuantReLU(act_quant=relu_q, return_quant_tensor=True)
            self.c2 = qnn.QuantConv2d(16, 16, 3, padding=1, **kw)
            self.r2 = qnn.QuantReLU(act_quant=relu_q, return_quant_tensor=True)
            self.c3 = qnn.QuantConv2d(16, 16, 3, padding=1, **kw)
            self.q3 = qnn.QuantIdentity(act_quant=act, return_quant_tensor=True)
            self.add = qnn.QuantEltwiseAdd(output_quant=act, return_quant_tensor=True)
            self.r3 = qnn.QuantReLU(act_quant=relu_q, return_quant_tensor=True)
            self.pool = nn.MaxPool2d(2)
            self.fc = qnn.QuantLinear(16 * 4 * 4, 10, bias=True,
                                      weight_quant=quant.Int8WeightPerTensorFloat)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.r1(self.c1(self.inp(x)))
            y = self.q3(self.c3(self.r2(self.c2(x))))
            return self.fc(torch.flatten(self.pool(self.r3(self.add(y, x))), 1))

    return Residual()


def main(out: Path = HERE / "fixtures") -> None:
    ex = _example()
    split = ex.digits_float().load_split()
    out.mkdir(parents=True, exist_ok=True)
    for stem, build in (("brevitas_float", lambda: ex.build(pow2=False)),
                        ("brevitas_residual", residual),
                        ("brevitas_pow2_w4", lambda: ex.build(weight_bits=(8, 4, 4, 8)))):
        torch.manual_seed(ex.SEED)
        model = build()
        acc = ex.train(model, split, log=lambda _: None)
        print(f"{stem}: Brevitas QAT accuracy {acc:.2%}")
        for path in ex.export(model, split, out, stem=stem):
            print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv
         else HERE / "fixtures")
