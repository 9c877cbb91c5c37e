"""Quantization options, the report, the input mapping and determinism."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx2ai8x.importer.onnx_reader import read_model

from .helpers import cli, float_run, quantized_float_output, sqnr_db
from .models import PATTERNS, calibration, export_torch


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> tuple[Path, Path, np.ndarray]:
    d = tmp_path_factory.mktemp("q")
    p = next(q for q in PATTERNS if q.name == "conv_relu_maxpool")
    path = export_torch(p, d / "m.onnx", dynamo=False)
    x = calibration(p)
    np.save(d / "cal.npy", x)
    return path, d / "cal.npy", x


def _quantize(model, tmp_path: Path, *extra) -> tuple[onnx.ModelProto, dict]:
    path, cal, _ = model
    code, _, err = cli(["quantize", "-d", "MAX78000",
                        path, "--calibration", cal, "-o", tmp_path / "q.onnx",
                        *extra])
    assert code == 0, err
    return onnx.load(str(tmp_path / "q.onnx")), json.loads(
        (tmp_path / "q.report.json").read_text())


def test_weight_bits_yaml_overrides_one_layer(model, tmp_path: Path) -> None:
    (tmp_path / "bits.yaml").write_text("c: 4\n")
    q, report = _quantize(model, tmp_path, "--weight-bits", tmp_path / "bits.yaml")
    net = read_model(tmp_path / "q.onnx")
    by = {lay.name: lay for lay in net.layers}
    assert by["c"].quantization == 4 and by["c2"].quantization == 8
    assert by["c"].weights.min() >= -8 and by["c"].weights.max() <= 7
    assert by["c"].weights.max() - by["c"].weights.min() > 8  # the range is used
    assert {r["name"]: r["weight_bits"] for r in report["layers"]}["c"] == 4
    # 4-bit weights cost resolution, not correctness.
    path, _, x = model
    assert sqnr_db(float_run(path, x), quantized_float_output(q, x)) >= 15.0


def test_bad_weight_bits_is_a_usage_error(model, tmp_path: Path) -> None:
    (tmp_path / "bits.yaml").write_text("c: 3\n")
    path, cal, _ = model
    code, _, err = cli(["quantize", "-d", "MAX78000",
                        path, "--calibration", cal, "-o", tmp_path / "q.onnx",
                        "--weight-bits", tmp_path / "bits.yaml"])
    assert code == 2 and "1, 2, 4 or 8" in err


def test_calibration_methods(model, tmp_path: Path) -> None:
    path, _, x = model
    ranges = {}
    for method in ("max", "percentile", "mse"):
        sub = tmp_path / method
        sub.mkdir()
        _, report = _quantize(model, sub, "--calibration-method", method)
        assert report["method"] == method
        ranges[method] = report["layers"][0]["range"]
    # The first layer's output range: max is the largest value seen; the others clip.
    import onnxruntime as ort

    m = onnx.load(str(path))
    relu = next(n for n in m.graph.node if n.op_type == "Relu").output[0]
    m.graph.output.append(onnx.helper.make_tensor_value_info(relu, onnx.TensorProto.FLOAT,
                                                             None))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    peak = float(np.max(sess.run([relu], {sess.get_inputs()[0].name: x})[0]))
    assert ranges["max"] == pytest.approx(peak, rel=1e-5)
    assert ranges["percentile"] < peak and ranges["mse"] <= peak
    code, _, err = cli(["quantize", "-d", "MAX78000", path, "--calibration", model[1], "-o",
                        tmp_path / "z.onnx", "--calibration-method", "entropy"])
    assert code == 2 and "mse, max, percentile" in err


def test_report_fields_and_labels(model, tmp_path: Path) -> None:
    path, cal, x = model
    labels = np.argmax(float_run(path, x).reshape(len(x), -1), 1)
    np.save(tmp_path / "y.npy", labels)
    _, report = _quantize(model, tmp_path, "--labels", tmp_path / "y.npy")
    assert report["float_accuracy"] == 1.0  # labels are the float model's own answers
    assert report["quantized_accuracy"] == report["top1_agreement"]
    for row in report["layers"]:
        assert 0.0 <= row["clipped"] <= 1.0 and row["nodes"]
    conv = [r for r in report["layers"] if r["operator"] != "passthrough"]
    assert all(r["sqnr_db"] > 20 for r in conv)
    assert report["layers"][-1]["output_width"] == 32  # wide output layer by default
    assert report["input_scale"] == pytest.approx(float(np.abs(x).max()) / 127)


def test_run_maps_float_input_and_takes_int8_as_is(model, tmp_path: Path) -> None:
    q, _ = _quantize(model, tmp_path)
    _, _, x = model
    np.save(tmp_path / "f.npy", x[:3])
    meta = {p.key: p.value for p in q.metadata_props}
    qi = np.clip(np.floor(x[:3] / float(meta["ai8x.input_scale"]) + 0.5), -128, 127)
    np.save(tmp_path / "i.npy", qi.astype(np.int8))
    for name in ("f", "i"):
        code, _, err = cli(["run", tmp_path / "q.onnx", "--input", tmp_path / f"{name}.npy",
                            "-o", tmp_path / f"{name}_out.npy"])
        assert code == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "f_out.npy"),
                                  np.load(tmp_path / "i_out.npy"))


def test_quantization_is_deterministic(model, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _quantize(model, a)
    _quantize(model, b)
    assert (a / "q.onnx").read_bytes() == (b / "q.onnx").read_bytes()
    assert (a / "q.report.json").read_bytes() == (b / "q.report.json").read_bytes()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_final_softmax_is_left_to_the_cpu(tmp_path: Path) -> None:
    import torch
    from torch import nn

    torch.manual_seed(2)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 4 * 4, 5), nn.Softmax(dim=1)).eval()
    path = tmp_path / "sm.onnx"
    torch.onnx.export(model, (torch.rand(1, 3, 4, 4),), str(path), dynamo=False,
                      input_names=["x"], dynamic_axes={"x": {0: "N"}})
    x = np.random.default_rng(4).uniform(0, 1, (32, 3, 4, 4)).astype(np.float32)
    np.save(tmp_path / "cal.npy", x)
    code, out, err = cli(["quantize", "-d", "MAX78000",
                          path, "--calibration", tmp_path / "cal.npy", "-o",
                          tmp_path / "q.onnx"])
    assert code == 1 and "float.cpu-tail" in err and "--cpu-tail" in err  # issue 35
    code, out, err = cli(["quantize", "-d", "MAX78000",
                          path, "--calibration", tmp_path / "cal.npy", "-o",
                          tmp_path / "q.onnx", "--cpu-tail"])
    assert code == 0, err
    assert "left to the CPU: Softmax" in out
    report = json.loads((tmp_path / "q.report.json").read_text())
    assert report["cpu_tail"] == ["Softmax"] and report["top1_agreement"] >= 0.9
    # The quantized model ends with the logits (the wide dense layer), not a softmax.
    net = read_model(tmp_path / "q.onnx")
    assert net.layers[-1].operator_name == "linear" and net.layers[-1].output_width == 32


def test_average_pooling_rounds_to_nearest(model, tmp_path: Path) -> None:
    """A float average is closest to the rounded mean: the quantized model asks for the
    accelerator's --avg-pool-rounding (and convert switches it on)."""
    p = next(q for q in PATTERNS if q.name == "avgpool_conv")
    path = export_torch(p, tmp_path / "avg.onnx", dynamo=False)
    np.save(tmp_path / "cal.npy", calibration(p))
    code, _, err = cli(["quantize", "-d", "MAX78000",
                        path, "--calibration", tmp_path / "cal.npy", "-o",
                        tmp_path / "q.onnx"])
    assert code == 0, err
    kinds = {(n.op_type, a.s) for n in onnx.load(str(tmp_path / "q.onnx")).graph.node
             for a in n.attribute if a.name == "rounding"}
    assert kinds == {("PoolRound", b"nearest")}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("factor", [0.25, -0.25])
def test_scale_after_relu_folds_only_when_positive(factor: float, tmp_path: Path) -> None:
    """ReLU is positively homogeneous: relu(a) * k = relu(a * k) for k > 0, so the scale
    moves into the weights; a negative scale has no hardware equivalent."""
    import torch
    from torch import nn

    torch.manual_seed(5)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c = nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 4, 1)

        def forward(self, x):
            return self.c2(torch.relu(self.c(x)) * factor)

    path = tmp_path / "m.onnx"
    torch.onnx.export(Net().eval(), (torch.rand(1, 3, 8, 8),), str(path), dynamo=False,
                      input_names=["x"], dynamic_axes={"x": {0: "N"}})
    x = np.random.default_rng(1).uniform(0, 1, (16, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "cal.npy", x)
    code, _, err = cli(["quantize", "-d", "MAX78000",
                        path, "--calibration", tmp_path / "cal.npy", "-o",
                        tmp_path / "q.onnx"])
    if factor < 0:
        assert code == 1 and "(Mul)" in err
        return
    assert code == 0, err
    assert len(read_model(tmp_path / "q.onnx").layers) == 2
    got = quantized_float_output(onnx.load(str(tmp_path / "q.onnx")), x)
    assert sqnr_db(float_run(path, x), got) >= 25.0


def test_two_models_quantized_into_one_folder_keep_their_reports(model, tmp_path: Path
                                                                 ) -> None:
    """Issue 35: both reports were `report.json`, so the second model was refused (and
    --overwrite would have replaced the first model's report)."""
    path, cal, _ = model
    for name in ("a.onnx", "b.onnx"):
        code, out, err = cli(["quantize", "-d", "MAX78000", path, "--calibration", cal,
                              "-o", tmp_path / name])
        assert code == 0, err
        assert f"{name[0]}.report.json" in out
    assert sorted(p.name for p in tmp_path.iterdir() if "report" in p.name) == [
        "a.report.json", "b.report.json"]
