"""Write the matrix's inputs and its PyTorch and onnxruntime-quantized cells.

    python tests/matrix/make_torch.py [ROW ...]

Runs in the project's environment (torch 2.13 with onnxscript, onnxruntime,
scikit-learn). Not run by the tests: they read what it wrote.

* `data.npz`: calibration (64) and held-out (8) inputs of both kinds, from
  scikit-learn's 8x8 digits / 16 (never trained on: the models are untrained), as
  "img" (3, 8, 8) colour images (the digit, the digit dimmed, its negative) and "seq"
  (8, 8) sequences (8 features = the digit's columns, over 8 steps = its rows).
* `models/torch_dynamo/`, `torch_ts13/`, `torch_ts/`: each row's module (seeded, see
  torch_models.py) exported by `torch.onnx.export` with the default (dynamo) exporter,
  the TorchScript one with opset 13, and the TorchScript one with its default opset,
  as a user calls it: an example input of batch 1, input and output names; the
  TorchScript exports with a dynamic batch axis. `models/torch.npz`: the module's own
  outputs on the held-out inputs (float16: far finer than the 8-bit comparison).
* `models/ort_*/`: the TorchScript default-opset file quantized by onnxruntime's
  `quantize_static` with the calibration inputs, in its QDQ and QOperator formats, per
  tensor and per channel, int8 symmetric and uint8 asymmetric. `models/ort_*.npz`: the
  quantized model's outputs on onnxruntime.

The exporters' per-node stack traces (this machine's paths) and the producer version
are removed, so that a rerun writes the same files.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import catalogue as cat  # noqa: E402
from torch_models import FloatKit, build  # noqa: E402


def make_data() -> None:
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(cat.SEED).permutation(len(digits.images))
    x = (digits.images[order] / 16.0).astype(np.float32)
    img = np.stack([x, 0.6 * x, 1.0 - x], axis=1).astype(np.float32)
    seq = np.ascontiguousarray(x.transpose(0, 2, 1))
    n, m = cat.CALIBRATION, cat.CALIBRATION + cat.HELD_OUT
    np.savez_compressed(cat.DATA, cal_img=img[:n], held_img=img[n:m], cal_seq=seq[:n],
                        held_seq=seq[n:m])


def inputs(kind: str, part: str = "held") -> np.ndarray:
    return np.load(cat.DATA)[f"{part}_{kind}"]


def clean(path: Path) -> None:
    """Drop what differs between machines and runs; one self-contained file."""
    model = onnx.load(str(path))
    model.producer_version = ""
    for node in model.graph.node:
        del node.metadata_props[:]
    del model.metadata_props[:]
    onnx.save(model, str(path))
    stale = path.with_name(path.name + ".data")
    if stale.exists():
        stale.unlink()


def export_torch(model, kind: str, rowname: str) -> None:
    import torch

    x = torch.from_numpy(inputs(kind)[:1])
    for col, kw in (("torch_dynamo", {"dynamo": True}),
                    ("torch_ts13", {"dynamo": False, "opset_version": 13,
                                    "dynamic_axes": {"x": {0: "batch"}}}),
                    ("torch_ts", {"dynamo": False, "dynamic_axes": {"x": {0: "batch"}}})):
        path = cat.model_path(col, rowname)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.onnx.export(model, (x,), str(path), input_names=["x"], output_names=["y"],
                          **kw)
        clean(path)


def _reader(x: np.ndarray):
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter([{"x": x[k:k + 1]} for k in range(x.shape[0])])

        def get_next(self):
            return next(self.items, None)

    return Reader()


def ort_settings():
    """Column name -> quantize_static's keyword arguments."""
    from onnxruntime.quantization import QuantFormat, QuantType

    out = {}
    for fmt_name, fmt in (("qdq", QuantFormat.QDQ), ("qop", QuantFormat.QOperator)):
        for gran in ("tensor", "channel"):
            for sym in ("sym", "asym"):
                qtype = QuantType.QInt8 if sym == "sym" else QuantType.QUInt8
                out[f"ort_{fmt_name}_{gran}_{sym}"] = dict(
                    quant_format=fmt, per_channel=gran == "channel", activation_type=qtype,
                    weight_type=qtype, extra_options={
                        "ActivationSymmetric": sym == "sym",
                        "WeightSymmetric": sym == "sym"})
    return out


def run_onnx(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[k:k + 1]})[0] for k in range(len(x))])


def quantize_ort(rowname: str, kind: str, outputs: dict) -> None:
    from onnxruntime.quantization import quantize_static

    src = cat.model_path("torch_ts", rowname)
    for col, kw in ort_settings().items():
        path = cat.model_path(col, rowname)
        path.parent.mkdir(parents=True, exist_ok=True)
        quantize_static(str(src), str(path), _reader(inputs(kind, "cal")), **kw)
        clean(path)
        outputs.setdefault(col, {})[rowname] = run_onnx(path, inputs(kind)).astype(
            np.float16)


def _update(path: Path, arrays: dict) -> None:
    have = dict(np.load(path)) if path.exists() else {}
    have.update(arrays)
    np.savez_compressed(path, **dict(sorted(have.items())))


def main(only: list[str]) -> None:
    import torch

    torch.manual_seed(cat.SEED)
    torch.set_num_threads(1)
    if not cat.DATA.exists():
        make_data()
    torch_out, ort_out = {}, {}
    for r in cat.ROWS:
        if only and r.name not in only:
            continue
        torch.manual_seed(cat.seed(r.name))
        model = build(r.name, FloatKit())
        if model is None:
            continue
        model.eval()
        with torch.no_grad():
            torch_out[r.name] = model(torch.from_numpy(inputs(r.kind))).numpy().astype(
                np.float16)
        export_torch(model, r.kind, r.name)
        quantize_ort(r.name, r.kind, ort_out)
        print("wrote", r.name, flush=True)
    _update(cat.MODELS / "torch.npz", torch_out)
    for col, arrays in ort_out.items():
        _update(cat.column(col).outputs, arrays)


if __name__ == "__main__":
    main(sys.argv[1:])
