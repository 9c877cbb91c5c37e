"""Make the Brevitas fixtures with float (not power-of-two) scales:
fixtures/brevitas_float_qcdq.onnx and fixtures/brevitas_float_qonnx.onnx.

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


def main(out: Path = HERE / "fixtures") -> None:
    ex = _example()
    torch.manual_seed(ex.SEED)
    split = ex.digits_float().load_split()
    model = ex.build(pow2=False)
    acc = ex.train(model, split, log=lambda _: None)
    print(f"Brevitas QAT (float scales) accuracy: {acc:.2%}")
    out.mkdir(parents=True, exist_ok=True)
    for path in ex.export(model, split, out, stem="brevitas_float"):
        print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv
         else HERE / "fixtures")
