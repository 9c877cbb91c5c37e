"""Issue 34 item 4: a CPU segment between accelerator runs may change the tensor's shape
where the next run reads the same data-memory layout (a rank lift, a reshape, a
reordering of axes); one that changes the number of values (an upsampling) is refused
naming the segment, and the hint's form (keep channels and values per channel) is the
one the acceptance cases (tests/partition/models.py: torch_lift_between,
keras_lift_between) convert, verify and build with."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.float_onnx.helpers import cli

torch = pytest.importorskip("torch")


class _Up(torch.nn.Module):
    """A Sigmoid (no accelerator activation) and an upsampling between convolutions."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        torch.manual_seed(34)
        self.mode = mode
        self.c0 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.c1 = torch.nn.Conv2d(16, 8, 3, padding=1)

    def forward(self, x):
        x = torch.sigmoid(self.c0(x))
        if self.mode:
            # 3x: the accelerator runs a nearest 2x upsampling itself (issue 34), so
            # the CPU's is one it does not
            x = torch.nn.functional.interpolate(x, scale_factor=3, mode=self.mode)
        return self.c1(x)


def _export(tmp: Path, mode: str) -> tuple[Path, Path]:
    path, cal = tmp / f"up_{mode or 'none'}.onnx", tmp / "cal.npy"
    torch.onnx.export(_Up(mode).eval(), torch.rand(1, 3, 8, 8), str(path),
                      input_names=["x"], output_names=["y"], opset_version=17,
                      dynamo=False)
    np.save(cal, np.random.default_rng(34).uniform(0, 1, (4, 3, 8, 8)).astype(np.float32))
    return path, cal


@pytest.mark.parametrize("mode", ["nearest"])
def test_upsampling_between_runs_is_refused(mode: str, tmp_path: Path) -> None:
    model, cal = _export(tmp_path, mode)
    code, stdout, stderr = cli([model, "--device", "MAX78002", "--calibration", cal,
                                "-o", tmp_path / "p", "--cpu-fallback"])
    assert code != 0 and not (tmp_path / "p").exists()
    assert "partition.between-shape" in stderr and "Traceback" not in stderr
    assert "16 channels of 64 values" in stderr and "16 channels of 576" in stderr


def test_same_segment_keeping_the_shape_converts(tmp_path: Path) -> None:
    """The hint applied: without the upsampling the Sigmoid segment keeps the channels
    and values per channel, and the model converts and verifies."""
    model, cal = _export(tmp_path, "")
    project = tmp_path / "p"
    code, _, stderr = cli([model, "--device", "MAX78002", "--calibration", cal,
                           "-o", project, "--cpu-fallback"])
    assert code == 0, stderr
    rc, stdout, _ = cli(["verify", project])
    assert rc == 0 and stdout.startswith("PASS") and "CPU segment" in stdout, stdout


def test_nearest_upsampling_on_the_cpu_is_a_repetition() -> None:
    """The CPU's nearest upsampling (reshape, concat of copies, reshape per axis) equals
    onnxruntime's Resize on the same values; a bilinear Resize is not taken."""
    import onnx
    from onnx import TensorProto, helper

    from onnx2ai8x.cpu.reference import run_segment
    from onnx2ai8x.errors import Ai8xError
    from onnx2ai8x.partition.quantize_cpu import _upsampled

    def model(mode: str):
        scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 3])
        node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode=mode)
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info(
            "x", TensorProto.FLOAT, [1, 2, 3, 4])], [helper.make_tensor_value_info(
                "y", TensorProto.FLOAT, [1, 2, 6, 12])], [scales])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        return onnx.shape_inference.infer_shapes(m), node

    m, node = model("nearest")
    consts = {"scales": np.array([1, 1, 2, 3], np.float32)}
    ops = _upsampled(m, node, "x", "y", (2, 3, 4), (2, 6, 12), consts)
    x = np.arange(-12, 12, dtype=np.int8).reshape(2, 3, 4)
    got = run_segment(ops, {"x": x})["y"]
    assert np.array_equal(got, np.repeat(np.repeat(x, 2, axis=1), 3, axis=2))
    m, node = model("linear")
    with pytest.raises(Ai8xError, match="nearest upsampling"):
        _upsampled(m, node, "x", "y", (2, 3, 4), (2, 6, 12), consts)


def test_the_flag_is_proposed_only_where_the_split_takes_the_model(tmp_path: Path) -> None:
    """Issue 34 item 5: without --cpu-fallback, a refusal names the flag only when the
    split would convert the model (the Sigmoid between runs), not where it would be
    refused too (the Sigmoid and an upsampling between runs)."""
    for mode, proposed in (("", True), ("nearest", False)):
        model, cal = _export(tmp_path, mode)
        code, _, stderr = cli([model, "--device", "MAX78002", "--calibration", cal,
                               "-o", tmp_path / f"p{mode}"])
        assert code != 0 and "Traceback" not in stderr
        assert ("--cpu-fallback" in stderr) == proposed, stderr


@pytest.mark.parametrize("op, const_first", [("BatchNormalization", False), ("Sub", True),
                                             ("Sub", False), ("Div", False),
                                             ("Add", False), ("Mul", True),
                                             ("ReduceMax", False), ("ReduceMean", False)])
def test_cpu_channel_ops_compute_the_float_node(op: str, const_first: bool) -> None:
    """The CPU's per-channel affine ops (unfused BatchNorm, Sub/Add/Mul/Div by a
    per-channel constant, either operand order) and spatial reductions give the float
    node's value (onnxruntime) within one output step on random data."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from onnx2ai8x.cpu.reference import run_segment
    from onnx2ai8x.partition.quantize_cpu import segment_ops

    rng = np.random.default_rng(34)
    c = rng.uniform(0.5, 1.5, (1, 4, 1, 1)).astype(np.float32)
    inits = [numpy_helper.from_array(c, "c")]
    if op == "BatchNormalization":
        inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), n)
                 for n in ("g", "v")] + [numpy_helper.from_array(
                     rng.uniform(-0.5, 0.5, 4).astype(np.float32), n) for n in ("b", "m")]
        node = helper.make_node(op, ["x", "g", "b", "m", "v"], ["y"], name="n")
    elif op.startswith("Reduce"):
        node = helper.make_node(op, ["x"], ["y"], name="n", axes=[2, 3], keepdims=1)
        inits = []
    else:
        node = helper.make_node(op, ["c", "x"] if const_first else ["x", "c"], ["y"],
                                name="n")
    out_shape = [1, 4, 1, 1] if op.startswith("Reduce") else [1, 4, 5, 6]
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 5, 6])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, out_shape)], inits)
    m = onnx.shape_inference.infer_shapes(
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    x = rng.uniform(-1, 1, (1, 4, 5, 6)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=[
        "CPUExecutionProvider"]).run(None, {"x": x})[0]
    scales = {"x": 1 / 127, "y": float(np.abs(want).max()) / 127}
    ops = segment_ops(m, ("n",), scales)
    q = np.clip(np.floor(x[0] / scales["x"] + 0.5), -128, 127).astype(np.int8)
    got = run_segment(ops, {"x": q})["y"].astype(np.float64) * scales["y"]
    # the input's own rounding (half a step through |a| <= 1.5 / 0.5) and the output's
    step = scales["y"] + 1.5 * 2 * scales["x"]
    assert np.abs(got.reshape(-1) - want.reshape(-1)).max() <= step


@pytest.mark.parametrize("name", ["torch_lift_between", "keras_lift_between",
                                  "torch_bn_between"])
def test_split_model_computes_the_float_model(name: str, tmp_path: Path) -> None:
    """The split pipeline (stem, accelerator parts with the CPU segments between them,
    head) computes the float model on its calibration samples: output SQNR above 25 dB
    (the acceptance tests check the project against this pipeline; this checks the
    pipeline against the source, so a CPU segment that reorders, offsets or scales
    wrongly fails here)."""
    import onnxruntime as ort

    from onnx2ai8x.devices import get_device
    from onnx2ai8x.frontend import QuantizeRequest
    from onnx2ai8x.partition.build import partition
    from onnx2ai8x.partition.project import run_joined

    from .models import CASES, calibration, model_file

    case = next(c for c in CASES if c.name == name)
    model, cal = model_file(case, tmp_path), calibration(case, tmp_path)
    part = partition(model, get_device(case.device), QuantizeRequest(calibration=cal))
    x = np.load(cal)
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    want = np.concatenate([sess.run(None, {sess.get_inputs()[0].name: x[i:i + 1]})[0]
                           for i in range(len(x))])
    if case.keras is not None and part.head is None and want.ndim > 2:
        # tf2onnx's Transpose of the output to channels-last is left to the host (the
        # front end, issue 34): the accelerator's result is channels-first
        want = np.moveaxis(want, -1, 1)
    want = want.reshape(len(x), -1)
    scale = part.scales[part.head.outputs[0]] if part.head is not None else \
        part.quant.output_scales[0]
    got = np.stack([np.asarray(run_joined(part, x[i:i + 1]).final, np.float64).reshape(-1)
                    for i in range(len(x))]) * scale
    if part.head is None and case.keras is None:
        got = got.reshape(want.shape)
    sqnr = 10 * np.log10(np.sum(want ** 2) / np.sum((want - got) ** 2))
    assert sqnr > 25, sqnr


@pytest.mark.parametrize("dtype, zero", [(np.uint8, 0), (np.int8, -20)])
def test_cpu_quantize_dequantize_keep_the_range(dtype, zero: int) -> None:
    """A quantized model's QuantizeLinear -> DequantizeLinear on a CPU tensor (a TFLite
    or onnxruntime head after tf2onnx's Transpose) is the clamp its range implies (with
    uint8 and zero point 0: onnxruntime's folded ReLU), on the CPU's own grid."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from onnx2ai8x.cpu.reference import run_segment
    from onnx2ai8x.partition.quantize_cpu import segment_ops

    s = 0.004
    inits = [numpy_helper.from_array(np.array(s, np.float32), "s"),
             numpy_helper.from_array(np.array(zero, dtype), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dequant")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 2, 3, 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 2, 3, 4])], inits)
    m = onnx.shape_inference.infer_shapes(
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    scales = {"x": 1 / 127, "q": 1 / 127, "y": 1 / 127}
    ops = segment_ops(m, ("quant", "dequant"), scales)
    x = np.arange(-12, 12, dtype=np.int8).reshape(2, 3, 4) * 10
    got = run_segment(ops, {"x": x})["y"].astype(np.float64) / 127
    info = np.iinfo(dtype)
    lo, hi = s * (info.min - zero), s * (info.max - zero)
    want = np.clip(x.astype(np.float64) / 127, lo, hi)
    assert np.abs(got - want).max() <= 0.5 / 127 + 1e-12


class _UpHead(torch.nn.Module):
    """Convolutions, then an upsampling at the output (a segmentation-style head)."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        torch.manual_seed(34)
        self.mode = mode
        self.c0 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c1 = torch.nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        x = self.c1(torch.relu(self.c0(x)))
        return torch.nn.functional.interpolate(x, scale_factor=2, mode=self.mode)


def test_the_upsampling_hint_applied(tmp_path: Path) -> None:
    """A bilinear upsampling at the output is refused on the CPU too, naming
    mode='nearest'; the same model with mode='nearest' converts and verifies."""
    cal = tmp_path / "cal.npy"
    np.save(cal, np.random.default_rng(34).uniform(0, 1, (4, 3, 8, 8)).astype(np.float32))
    for mode in ("bilinear", "nearest"):
        path = tmp_path / f"{mode}.onnx"
        torch.onnx.export(_UpHead(mode).eval(), torch.rand(1, 3, 8, 8), str(path),
                          input_names=["x"], output_names=["y"], opset_version=17,
                          dynamo=False)
        project = tmp_path / mode
        code, _, stderr = cli([path, "--device", "MAX78000", "--calibration", cal,
                               "-o", project, "--cpu-fallback"])
        if mode == "bilinear":
            assert code != 0 and "partition.cpu-op" in stderr, stderr
            assert "mode='nearest'" in stderr and "Traceback" not in stderr
            continue
        assert code == 0, stderr
        rc, stdout, _ = cli(["verify", project])
        assert rc == 0 and stdout.startswith("PASS"), stdout


def test_fifo_hint_applied(tmp_path: Path) -> None:
    """A CPU segment between runs with --fifo is refused naming --fifo; without it the
    same command converts."""
    model, cal = _export(tmp_path, "")
    base = [model, "--device", "MAX78002", "--calibration", cal, "--cpu-fallback"]
    code, _, stderr = cli([*base, "-o", tmp_path / "fifo", "--fifo"])
    assert code != 0 and "partition.between-fifo" in stderr and "--fifo" in stderr
    code, _, stderr = cli([*base, "-o", tmp_path / "plain"])
    assert code == 0, stderr
