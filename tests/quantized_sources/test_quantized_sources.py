"""Quantized models written by real tools from our own digits networks: onnxruntime's
quantizer (QDQ per tensor and per channel, QOperator, a ResNet with identity-shortcut
adds and a ReLU after each add) and Brevitas (QCDQ and QONNX, power-of-two and float
scales). Fixtures: make_onnxruntime.py, make_brevitas.py and
examples/digits_brevitas/train.py (committed; these tests need neither tool).

For each: onnx2ai8x converts it, the held-out top-1 of the conversion (bit-exact
reference) is within 1 point of the quantized source's own on onnxruntime (both
computed here), and the project passes `verify`. Power-of-two models are taken exactly,
without calibration data: the converted reference equals the source on onnxruntime with
its quantizers rounding half up, the accelerator's rule (onnxruntime rounds half to even:
at exact ties the two differ by one code, and nothing else may differ).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.network import ACT_RELU, ELTWISE_ADD

from ..float_onnx.helpers import cli
from .helpers import FIXTURES, ROOT, half_up, held_out, run_converted, run_source

pytest.importorskip("sklearn")

BREVITAS = ROOT / "examples" / "digits_brevitas"
CALIBRATION = ROOT / "examples" / "digits_float" / "calibration.npy"


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    exact: bool  # power-of-two scales: taken exactly, no calibration
    twin: Path | None = None  # the source run on onnxruntime (QONNX: its QCDQ twin)

    @property
    def source(self) -> Path:
        return self.twin or self.path


CASES = [
    Case("ort_cnn_qdq_tensor", FIXTURES / "ort_cnn_qdq_tensor.onnx", False),
    Case("ort_cnn_qdq_channel", FIXTURES / "ort_cnn_qdq_channel.onnx", False),
    Case("ort_cnn_qoperator", FIXTURES / "ort_cnn_qoperator.onnx", False),
    Case("ort_resnet_qdq", FIXTURES / "ort_resnet_qdq.onnx", False),
    Case("ort_resnet_qoperator", FIXTURES / "ort_resnet_qoperator.onnx", False),
    Case("ort_pow2_qdq", FIXTURES / "ort_pow2_qdq.onnx", True),
    Case("ort_pow2_resnet_qdq", FIXTURES / "ort_pow2_resnet_qdq.onnx", True),
    Case("ort_pow2_bias_qdq", FIXTURES / "ort_pow2_bias_qdq.onnx", True),
    Case("brevitas_pow2_qcdq", BREVITAS / "digits_brevitas_qcdq.onnx", True),
    Case("brevitas_pow2_qonnx", BREVITAS / "digits_brevitas_qonnx.onnx", True,
         BREVITAS / "digits_brevitas_qcdq.onnx"),
    Case("brevitas_pow2_w4_qcdq", FIXTURES / "brevitas_pow2_w4_qcdq.onnx", True),
    Case("brevitas_pow2_w4_qonnx", FIXTURES / "brevitas_pow2_w4_qonnx.onnx", True,
         FIXTURES / "brevitas_pow2_w4_qcdq.onnx"),
    Case("brevitas_float_qcdq", FIXTURES / "brevitas_float_qcdq.onnx", False),
    Case("brevitas_float_qonnx", FIXTURES / "brevitas_float_qonnx.onnx", False,
         FIXTURES / "brevitas_float_qcdq.onnx"),
    Case("brevitas_residual_qcdq", FIXTURES / "brevitas_residual_qcdq.onnx", False),
    Case("brevitas_residual_qonnx", FIXTURES / "brevitas_residual_qonnx.onnx", False,
         FIXTURES / "brevitas_residual_qcdq.onnx"),
]
IDS = [c.name for c in CASES]


@pytest.fixture(scope="module")
def digits():
    return held_out()


def _convert(case: Case):
    from onnx2ai8x.quantize import quantize_file

    return quantize_file(case.path, None if case.exact else CALIBRATION)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_within_one_point_of_the_source_on_onnxruntime(case: Case, digits) -> None:
    x, y = digits
    result = _convert(case)
    assert result.summary["exact"] is case.exact
    assert result.summary["qdq"] is True
    source = run_source(case.source, x).reshape(len(y), -1)
    got = run_converted(result, x)
    source_acc = float(np.mean(source.argmax(1) == y))
    got_acc = float(np.mean(got.argmax(1) == y))
    assert source_acc > 0.95, case.name
    assert abs(got_acc - source_acc) <= 0.01, (case.name, got_acc, source_acc)
    if case.exact:
        # the integers, shifts and clamps are the source's: only ties may round apart
        rounded_up = run_source(half_up(onnx.load(str(case.source))), x)
        np.testing.assert_array_equal(got, rounded_up.reshape(got.shape))
        assert np.mean(got.argmax(1) == source.argmax(1)) >= 0.99
    else:
        assert any("requantized" in r for r in result.summary["rewrites"])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_converts_and_passes_verify(case: Case, tmp_path: Path) -> None:
    args = [case.path, "--device", "MAX78000", "-o", tmp_path / "proj", "--verify"]
    if not case.exact:
        args += ["--calibration", CALIBRATION]
    code, out, err = cli(args)
    assert code == 0, err
    assert "PASS: MAX78000" in out + err
    assert (tmp_path / "proj" / "cnn.c").is_file()


def test_qonnx_and_qcdq_of_one_model_convert_to_the_same_integers() -> None:
    from onnx2ai8x.quantize import quantize_file

    a = quantize_file(BREVITAS / "digits_brevitas_qcdq.onnx", None)
    b = quantize_file(BREVITAS / "digits_brevitas_qonnx.onnx", None)
    assert len(a.network.layers) == len(b.network.layers) == 4
    for la, lb in zip(a.network.layers, b.network.layers, strict=True):
        np.testing.assert_array_equal(la.weights, lb.weights)
        assert la.output_shift == lb.output_shift
    assert a.mapping.scale == b.mapping.scale


def test_add_operands_on_different_grids_are_requantized(tmp_path: Path, digits) -> None:
    """The accelerator adds codes: operands of one Add quantized with different scales
    (powers of two or not) cannot be taken exactly; the model is requantized."""
    from onnx import numpy_helper

    from onnx2ai8x.quantize import quantize_file

    model = onnx.load(str(FIXTURES / "ort_pow2_resnet_qdq.onnx"))
    name = "/block2/body/body.2/Conv_output_0_scale"
    init = next(i for i in model.graph.initializer if i.name == name)
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) / 2, name))
    path = tmp_path / "mixed.onnx"
    onnx.save(model, str(path))
    result = quantize_file(path, None)
    assert result.summary["exact"] is False and result.summary["qdq_pow2"] is True
    assert "operands of one element-wise layer on different scales" in result.table()
    x, y = digits
    source = run_source(path, x).reshape(len(y), -1)
    got = run_converted(result, x)
    assert abs(np.mean(got.argmax(1) == y) - np.mean(source.argmax(1) == y)) <= 0.01


def test_mixed_weight_widths_are_taken_as_they_are() -> None:
    """Brevitas 4-bit weights (power-of-two scales) are the accelerator's 4-bit
    weights: each layer keeps the width it was trained with."""
    from onnx2ai8x.quantize import quantize_file

    for name in ("brevitas_pow2_w4_qcdq", "brevitas_pow2_w4_qonnx"):
        result = quantize_file(FIXTURES / f"{name}.onnx", None)
        assert [lay.quantization for lay in result.network.layers] == [8, 4, 4, 8]
        for lay in result.network.layers[1:3]:
            assert -8 <= int(lay.weights.min()) and int(lay.weights.max()) <= 7


def test_resnet_keeps_both_shortcut_adds_and_the_relu_after_each() -> None:
    """The reported bug: two identity-shortcut adds vanished and a ReLU was lost."""
    from onnx2ai8x.importer.float_onnx import read_float_model

    for name in ("ort_resnet_qdq", "ort_resnet_qoperator", "ort_pow2_resnet_qdq",
                 "brevitas_residual_qcdq", "brevitas_residual_qonnx"):
        fm = read_float_model(FIXTURES / f"{name}.onnx")
        adds = [lay for lay in fm.network.layers if lay.eltwise == ELTWISE_ADD]
        assert len(adds) == (1 if name.startswith("brevitas") else 2), name
        assert all(lay.activation == ACT_RELU for lay in adds), name
        ops = {n.op_type for n in fm.canonical.model.graph.node}
        assert not ops & {"QuantizeLinear", "DequantizeLinear", "QLinearConv",
                          "QLinearAdd", "QGemm"}, ops


def _qdq(nodes, inits, out="y") -> onnx.ModelProto:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _scale(name: str, s: float = 0.5, zero: int = 0):
    from onnx import numpy_helper

    return [numpy_helper.from_array(np.asarray(s, np.float32), f"{name}_s"),
            numpy_helper.from_array(np.asarray(zero, np.int8), f"{name}_z")]


@pytest.mark.parametrize(("build", "code"), [
    # an integer tensor read by arithmetic: nothing may be dropped silently
    (lambda h: _qdq([h.make_node("QuantizeLinear", ["x", "a_s", "a_z"], ["q"]),
                     h.make_node("Add", ["q", "q"], ["y"])], _scale("a")),
     "float.qdq-integer-op"),
    # a DequantizeLinear with no QuantizeLinear before it
    (lambda h: _qdq([h.make_node("Cast", ["x"], ["q"], to=3),
                     h.make_node("DequantizeLinear", ["q", "a_s", "a_z"], ["y"])],
                    _scale("a")), "float.qdq-orphan"),
    # a pair whose scales differ: a requantization inside the pair
    (lambda h: _qdq([h.make_node("QuantizeLinear", ["x", "a_s", "a_z"], ["q"]),
                     h.make_node("DequantizeLinear", ["q", "b_s", "b_z"], ["y"])],
                    _scale("a") + _scale("b", 0.25)), "float.qdq-requantize"),
    (lambda h: _qdq([h.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
                     h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], []),
     "float.qdq-dynamic"),
    (lambda h: _qdq([h.make_node("QuantizeLinear", ["x", "a_s", "a_z"], ["y"])],
                    _scale("a")), "float.qdq-output"),
])
def test_what_the_recognizer_cannot_place_is_refused_by_name(build, code) -> None:
    from onnx import helper

    from onnx2ai8x.importer.dialects.qdq import recognize

    with pytest.raises(Ai8xError) as info:
        recognize(build(helper))
    assert info.value.diagnostics[0].code == code
    assert info.value.diagnostics[0].where.startswith(("node ", "model"))


def test_a_power_of_two_model_needs_no_calibration_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "q.onnx"
    code, stdout, err = cli(["quantize", "-d", "MAX78000",
                             BREVITAS / "digits_brevitas_qcdq.onnx", "-o", out])
    assert code == 0, err
    assert "powers of two" in stdout and "no calibration needed" in stdout
    # float scales: requantized, from the source's own scales without calibration data
    (tmp_path / "second").mkdir()  # (its report.json beside it: a new directory)
    code, stdout, err = cli(["quantize", "-d", "MAX78000",
                             FIXTURES / "brevitas_float_qcdq.onnx", "-o",
                             tmp_path / "second" / "q2.onnx"])
    assert code == 0, err
    assert "requantized to power-of-two shifts" in stdout
    assert "ranges from its scales" in stdout


@pytest.mark.parametrize("case", [c for c in CASES if not c.exact],
                         ids=[c.name for c in CASES if not c.exact])
def test_requantized_from_the_source_scales_without_calibration(case: Case,
                                                                digits) -> None:
    """Without calibration data a quantized model's own scales are the ranges."""
    from onnx2ai8x.quantize import quantize_file

    x, y = digits
    result = quantize_file(case.path, None)
    assert result.summary["qdq_scales"] == "the source's grids"
    source = run_source(case.source, x).reshape(len(y), -1)
    got = run_converted(result, x)
    assert abs(np.mean(got.argmax(1) == y) - np.mean(source.argmax(1) == y)) <= 0.01


def _mutants(model: onnx.ModelProto):
    """Damaged copies: each quantizer node loses inputs, or a parameter it reads is
    emptied, lengthened or retyped."""
    from onnx import numpy_helper

    inits = {i.name: k for k, i in enumerate(model.graph.initializer)}
    for k, node in enumerate(model.graph.node):
        if node.op_type not in ("QuantizeLinear", "DequantizeLinear", "QLinearConv",
                                "QGemm", "QLinearAdd", "Quant"):
            continue
        cut = onnx.ModelProto()
        cut.CopyFrom(model)
        del cut.graph.node[k].input[1:]
        yield cut
        for name in node.input[1:3]:
            if name not in inits:
                continue
            arr = numpy_helper.to_array(model.graph.initializer[inits[name]])
            for bad in (arr.reshape(-1)[:0], np.concatenate([arr.reshape(-1)] * 3),
                        arr.astype(np.float64), arr.astype(np.int64)):
                m = onnx.ModelProto()
                m.CopyFrom(model)
                m.graph.initializer[inits[name]].CopyFrom(numpy_helper.from_array(bad, name))
                yield m


@pytest.mark.parametrize("name", ["ort_cnn_qdq_channel", "ort_resnet_qoperator",
                                  "brevitas_float_qonnx"])
def test_damaged_quantizers_get_a_message_not_a_traceback(name: str) -> None:
    from onnx2ai8x.importer.float_onnx import read_float_model

    model = onnx.load(str(FIXTURES / f"{name}.onnx"))
    count = refused = 0
    for mutant in _mutants(model):
        count += 1
        try:
            read_float_model(mutant)
        except Ai8xError as exc:
            refused += 1
            assert exc.diagnostics[0].where
    assert count >= 20 and refused >= count // 3, (count, refused)


def test_a_quantized_final_softmax_is_left_to_the_cpu(tmp_path: Path, digits) -> None:
    """onnxruntime quantizes a final Softmax's output too (Softmax -> Q -> DQ): the
    Softmax stays the model's last operation, for the CPU."""
    from onnx import helper, numpy_helper

    from onnx2ai8x.quantize import quantize_file

    model = onnx.load(str(FIXTURES / "ort_cnn_qdq_tensor.onnx"))
    last = next(n for n in model.graph.node if "logits" in n.output)
    last.output[0] = "scores"
    model.graph.initializer.extend([
        numpy_helper.from_array(np.asarray(1 / 256, np.float32), "p_scale"),
        numpy_helper.from_array(np.asarray(0, np.uint8), "p_zero")])
    model.graph.node.extend([
        helper.make_node("Softmax", ["scores"], ["p"], name="softmax", axis=1),
        helper.make_node("QuantizeLinear", ["p", "p_scale", "p_zero"], ["p_q"], name="q"),
        helper.make_node("DequantizeLinear", ["p_q", "p_scale", "p_zero"], ["logits"],
                         name="dq")])
    path = tmp_path / "softmax.onnx"
    onnx.save(model, str(path))
    with pytest.raises(Ai8xError, match="ends in Softmax"):  # issue 35: not silently
        quantize_file(path, None)
    result = quantize_file(path, None, tail_applied=("Softmax",))
    assert result.summary["cpu_tail"] == ["Softmax"]
    x, y = digits
    source = run_source(path, x).reshape(len(y), -1)
    got = run_converted(result, x)
    assert abs(np.mean(got.argmax(1) == y) - np.mean(source.argmax(1) == y)) <= 0.01


def test_the_reported_resnet_converts_without_calibration_and_verifies(tmp_path) -> None:
    """The file of the report (onnxruntime QDQ ResNet): the main command, no calibration
    data (ranges from its own scales), passes verify; the report names the requantization
    and keeps both adds."""
    import json

    code, out, err = cli([FIXTURES / "ort_resnet_qdq.onnx", "--device", "MAX78000", "-o",
                          tmp_path / "proj", "--verify"])
    assert code == 0, err
    assert "PASS: MAX78000, 12 layers" in out + err
    report = json.loads((tmp_path / "proj" / "report.json").read_text())["quantization"]
    assert report["qdq_scales"] == "the source's grids" and report["exact"] is False
    assert sum("Add" in " ".join(layer["nodes"]) for layer in report["layers"]) == 2


def test_committed_exports_carry_no_exporter_stack_traces() -> None:
    """The dynamo exporter writes each node's Python stack (this machine's paths and
    line numbers) into its metadata: the generators strip it, so a rerun writes the
    same bytes."""
    for case in CASES:
        model = onnx.load(str(case.path))
        assert not any(node.metadata_props for node in model.graph.node), case.name
