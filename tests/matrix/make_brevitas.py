"""Write the matrix's Brevitas cells (run after make_torch.py, which writes the inputs).

    /work/envs/brevitas/bin/python tests/matrix/make_brevitas.py [ROW ...]

Runs in an environment of its own (written with torch 2.13, Brevitas 0.13, qonnx), e.g.
`python3.11 -m venv /tmp/brev && /tmp/brev/bin/pip install torch==2.13.0 brevitas qonnx
onnx onnxscript onnxoptimizer`. Not run by the tests: they read what it wrote.

Each row is torch_models.py's module built from Brevitas' layers with the accelerator's
own kind of numbers: int8 weights and activations with power-of-two scales
(`Int8WeightPerTensorFixedPoint`, `Int8ActPerTensorFixedPoint`), no biases (a float
model's bias has no such grid), the input quantized by a `QuantIdentity` and every
operation that leaves the grid (pooling, element-wise operations, BatchNorm)
requantized by one. The activation scales are calibrated on the calibration inputs
(Brevitas' `calibration_mode`); the weights are seeded defaults. Exported with
`export_onnx_qcdq` (`brevitas_qcdq/`) and `export_qonnx` (`brevitas_qonnx/`);
`models/brevitas.npz` holds the Brevitas module's outputs on the held-out inputs. A
row the kit cannot write (ReLU6) is in catalogue.NOT_EXPRESSIBLE with the reason.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import catalogue as cat  # noqa: E402
from torch_models import build  # noqa: E402


class BrevitasKit:
    """Brevitas' layers, power-of-two int8, no biases, float tensors between layers
    (each quantized layer's output dequantized, as the QCDQ export writes it)."""

    can_relu6 = False

    def __init__(self) -> None:
        import brevitas.nn as qnn
        from brevitas import quant

        self.qnn, self.wq, self.aq = (qnn, quant.Int8WeightPerTensorFixedPoint,
                                      quant.Int8ActPerTensorFixedPoint)

    def _w(self, kw):
        kw.pop("bias", None)
        return dict(kw, bias=False, weight_quant=self.wq)

    def conv2d(self, cin, cout, k, **kw):
        return self.qnn.QuantConv2d(cin, cout, k, **self._w(kw))

    def conv1d(self, cin, cout, k, **kw):
        return self.qnn.QuantConv1d(cin, cout, k, **self._w(kw))

    def convt2d(self, cin, cout, k, **kw):
        return self.qnn.QuantConvTranspose2d(cin, cout, k, **self._w(kw))

    def linear(self, cin, cout, **kw):
        return self.qnn.QuantLinear(cin, cout, **self._w(kw))

    def relu(self):
        return self.qnn.QuantReLU(act_quant=self.aq)

    def q(self):
        return self.qnn.QuantIdentity(act_quant=self.aq)

    def inp(self):
        return self.q()


def inputs(kind: str, part: str = "held") -> np.ndarray:
    return np.load(cat.DATA)[f"{part}_{kind}"]


def calibrate(model, kind: str) -> None:
    import torch
    from brevitas.graph.calibrate import calibration_mode

    model.eval()
    with torch.no_grad(), calibration_mode(model):
        model(torch.from_numpy(inputs(kind, "cal")))


def export(model, kind: str, rowname: str) -> None:
    import onnx
    import torch
    from brevitas.export import export_onnx_qcdq, export_qonnx

    x = torch.from_numpy(inputs(kind)[:1])
    for col, fn, kw in (("brevitas_qcdq", export_onnx_qcdq, {"opset_version": 17}),
                        ("brevitas_qonnx", export_qonnx, {})):
        path = cat.model_path(col, rowname)
        path.parent.mkdir(parents=True, exist_ok=True)
        fn(model, x, export_path=str(path), **kw)
        m = onnx.load(str(path))
        inits = {i.name for i in m.graph.initializer}
        keep = [i for i in m.graph.input if i.name not in inits]
        del m.graph.input[:]
        m.graph.input.extend(keep)
        m.producer_version = ""
        for node in m.graph.node:
            del node.metadata_props[:]
        onnx.save(m, str(path))
        stale = path.with_name(path.name + ".data")
        if stale.exists():
            stale.unlink()


def main(only: list[str]) -> None:
    import torch

    torch.set_num_threads(1)
    out_path = cat.column("brevitas_qcdq").outputs
    outs = dict(np.load(out_path)) if out_path.exists() else {}
    failed = {}
    for r in cat.ROWS:
        if only and r.name not in only:
            continue
        torch.manual_seed(cat.seed(r.name))
        model = build(r.name, BrevitasKit())
        if model is None:
            continue
        try:
            calibrate(model, r.kind)
            with torch.no_grad():
                y = model(torch.from_numpy(inputs(r.kind)))
            export(model, r.kind, r.name)
        except Exception as exc:  # noqa: BLE001 - the tool's own failure, recorded
            failed[r.name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            for col in ("brevitas_qcdq", "brevitas_qonnx"):
                cat.model_path(col, r.name).unlink(missing_ok=True)
            continue
        outs[r.name] = np.asarray(getattr(y, "value", y)).astype(np.float16)
        print("wrote", r.name, flush=True)
    np.savez_compressed(out_path, **dict(sorted(outs.items())))
    for col in ("brevitas_qcdq", "brevitas_qonnx"):
        path = cat.MODELS / col / "not_made.json"
        have = json.loads(path.read_text()) if path.exists() else {}
        have = {k: v for k, v in have.items() if only and k not in only}
        have.update(failed)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(sorted(have.items())), indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
