"""The pattern matrix: one small generated float model per pattern, through the whole
float path (front end, calibration, quantization, convert).

For each: the quantized model (run by the bit-exact reference, input mapped and output
scaled with nothing but the model's metadata) against the float model (onnxruntime) on
its calibration data reaches

* 25 dB SQNR for a single hardware layer: 8-bit data and weights give ~40 dB for one
  uniform quantizer on well-spread values; 25 dB leaves room for the bias memory's
  coarser step and clipping chosen by the calibration, while a wrong scale, layout or
  fold costs far more (a wrong sign or layout lands near 0 dB);
* 20 dB for several layers: each layer re-quantizes its output, so the noise of up to
  three 8-bit stages adds (about 5 dB lost for three equal stages) and pass-through
  pooling layers re-round averages.

The output passes onnx's full check and converts; the project's known answer holds
exactly what `onnx2ai8x run` computes for the same sample.
Torch models are exported with the TorchScript exporter and with `dynamo=True` (a
representative subset by default, all with --golden-all: each dynamo export takes ~2 s).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from .helpers import cli, float_run, kat_matches, quantized_float_output, sqnr_db
from .models import PATTERNS, Pattern, calibration, export_torch, qdq_model, tf_style

DYNAMO_DEFAULT = {"conv_bn_relu", "stride2", "resnet"}


def _cases() -> list:
    cases = []
    for p in PATTERNS:
        if p.torch:
            cases.append(pytest.param(p, "torchscript", id=f"{p.name}-torchscript"))
            marks = [] if p.name in DYNAMO_DEFAULT else [pytest.mark.slow]
            cases.append(pytest.param(p, "dynamo", marks=marks, id=f"{p.name}-dynamo"))
        else:
            cases.append(pytest.param(p, "tf2onnx", id=f"{p.name}-tf2onnx"))
    return cases


def _export(p: Pattern, how: str, path: Path) -> Path:
    if how == "tf2onnx":
        return tf_style(p, path)
    return export_torch(p, path, dynamo=how == "dynamo")


def _check_quantized(p: Pattern, model_path: Path, tmp_path: Path, x: np.ndarray,
                     single_layer: bool) -> None:
    cal = tmp_path / "cal.npy"
    np.save(cal, x)
    out = tmp_path / "q.onnx"
    code, stdout, stderr = cli(["quantize", "-d", "MAX78000",
                                model_path, "--calibration", cal, "-o", out,
                                "--device", p.device])
    assert code == 0, stderr
    assert "SQNR dB" in stdout and (tmp_path / "q.report.json").is_file()
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    ref = float_run(model_path, x)
    got = quantized_float_output(model, x)
    sqnr = sqnr_db(ref, got)
    assert sqnr >= (25.0 if single_layer else 20.0), f"{p.name}: {sqnr:.1f} dB"
    # Convert the quantized model and compare the known answer with `run`.
    sample = tmp_path / "sample.npy"
    np.save(sample, x[0])  # float: `run` maps it with the model's input mapping
    code, _, stderr = cli(["run", out, "--input", sample, "-o", tmp_path / "y.npz"])
    assert code == 0, stderr
    ys = np.load(tmp_path / "y.npz")
    outputs = [ys[k][0] for k in ys.files]
    q_sample = tmp_path / "q_sample.npy"
    meta = {m.key: m.value for m in model.metadata_props}
    perm = json.loads(meta["ai8x.input_perm"])
    shape = json.loads(meta["ai8x.input_shape"])
    q = np.clip(np.floor(np.transpose(x[:1], perm) / float(meta["ai8x.input_scale"]) + 0.5),
                -128, 127).reshape(shape)
    np.save(q_sample, q.astype(np.int64))
    project = tmp_path / "proj"
    code, _, stderr = cli([out, "--device", p.device, "-o", project, "--sample-input",
                           q_sample, "--quiet"])
    assert code == 0, stderr
    assert (project / "cnn.c").is_file()
    assert kat_matches(project, outputs)


@pytest.mark.parametrize(("pattern", "how"), _cases())
def test_pattern(pattern: Pattern, how: str, tmp_path: Path) -> None:
    model_path = _export(pattern, how, tmp_path / f"{pattern.name}.onnx")
    _check_quantized(pattern, model_path, tmp_path, calibration(pattern),
                     pattern.single_layer)


def test_qdq_model_from_onnxruntime(tmp_path: Path) -> None:
    """A QDQ model (onnxruntime.quantization.quantize_static): weights come from its
    DequantizeLinear nodes, the ReLU its quantizer folded into a uint8 range is
    restored, activation scales are re-calibrated (and the report says so)."""
    p = next(q for q in PATTERNS if q.name == "residual_add")
    float_path = export_torch(p, tmp_path / "float.onnx", dynamo=False)
    x = calibration(p)
    qdq = qdq_model(float_path, tmp_path / "qdq.onnx", x)
    ops = {n.op_type for n in onnx.load(str(qdq)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops and "Relu" not in ops
    _check_quantized(p, qdq, tmp_path, x, single_layer=False)
    report = json.loads((tmp_path / "q.report.json").read_text())
    assert report["qdq"] is True and report["qdq_scales"] == "re-calibrated"
    # The quantized QDQ model tracks the original float model too.
    got = quantized_float_output(onnx.load(str(tmp_path / "q.onnx")), x)
    assert sqnr_db(float_run(float_path, x), got) >= 20.0


def test_stride2_rewrite_is_reported(tmp_path: Path) -> None:
    p = next(q for q in PATTERNS if q.name == "stride2")
    path = export_torch(p, tmp_path / "s2.onnx", dynamo=False)
    np.save(tmp_path / "cal.npy", calibration(p))
    code, stdout, stderr = cli(["quantize", "-d", "MAX78000",
                                path, "--calibration", tmp_path / "cal.npy",
                                "-o", tmp_path / "q.onnx"])
    assert code == 0, stderr
    assert "stride-2 convolution = stride-1 convolution + 1x1 stride-2 pooling" in stdout
    report = json.loads((tmp_path / "q.report.json").read_text())
    assert len(report["rewrites"]) == 1
    # The hardware layers: a stride-1 convolution, the next one pooling 1x1 stride 2.
    from onnx2ai8x.importer.onnx_reader import read_model

    net = read_model(tmp_path / "q.onnx")
    assert net.layers[0].stride == (1, 1) and net.layers[0].output_dim == (8, 8)
    assert net.layers[1].pool == (1, 1) and net.layers[1].pool_stride == (2, 2)
    assert net.layers[1].pooled_dim == (4, 4)


@pytest.mark.parametrize("name", ["residual_relu", "pool_80_channels"])
def test_identity_layer_rewrite_is_exact_and_reported(name: str, tmp_path: Path) -> None:
    """An activation after an element-wise add, or a pooling of more channels than a
    pooling-only layer takes, becomes a layer with a 1x1 identity convolution; input and
    output share a scale, so its weights are exactly 64 with a shift of 1 (x * 64 * 2 /
    128 = x): the rewrite adds no error."""
    p = next(q for q in PATTERNS if q.name == name)
    path = export_torch(p, tmp_path / "m.onnx", dynamo=False)
    np.save(tmp_path / "cal.npy", calibration(p))
    code, stdout, stderr = cli(["quantize", "-d", "MAX78000",
                                path, "--calibration", tmp_path / "cal.npy",
                                "-o", tmp_path / "q.onnx"])
    assert code == 0, stderr
    assert "1x1 identity convolution" in stdout
    from onnx2ai8x.importer.onnx_reader import read_model

    net = read_model(tmp_path / "q.onnx")
    ident = [lay for lay in net.layers if lay.name.endswith("_identity")]
    assert len(ident) == 1
    lay = ident[0]
    c = lay.output_channels
    np.testing.assert_array_equal(lay.weights.reshape(c, c), 64 * np.eye(c, dtype=np.int64))
    assert lay.output_shift == 1 and lay.bias is None
