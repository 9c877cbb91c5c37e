"""Vendor-export patterns: float ONNX that already holds the accelerator's integers is
recovered exactly, without calibration, and the hardware's rounding is restored.

* Golden zoo networks rebuilt in the vendor's export form (integer weights, and the
  fake-quantized fractions QAT computes): the imported model's reference output equals
  the vendor tool's `expected_output` to the bit.
* A QAT model (`ai8x_torch`, float weights) written as the vendor exports it, with the
  weight quantization and the output shift as graph arithmetic: the imported integer
  weights, shifts and biases equal what `ai8x_torch.quantize_model` makes of it.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.conftest import GOLDEN, all_cases

from .helpers import cli
from .vendor_form import write, write_qat


def _zoo() -> list[str]:
    return [c for c in all_cases()
            if json.loads((GOLDEN / c / "case.json").read_text()).get("kind") == "zoo"]


# Only the fake-quantized form: the hand-written "integer" form (integer weights with the
# shift lowered by 7 so that its float arithmetic is the hardware's) is not what the vendor
# writes; its real `q` export (stored shift, float graph saturating) is tested on the
# vendor's own files in test_vendor_exports_real.py.
@pytest.mark.parametrize("fake_quant", [True], ids=["fake-quantized"])
@pytest.mark.parametrize("name", _zoo() or ["golden-absent"])
def test_golden_zoo_in_vendor_export_form_is_exact(name: str, fake_quant: bool,
                                                   tmp_path: Path) -> None:
    if not (GOLDEN / name / "case.json").is_file():
        pytest.skip("golden corpus ../shared/golden is absent")
    pytest.importorskip("torch")  # the vendor checkpoints are read with torch
    import custom_ops
    from onnx2ai8x.quantize import quantize_file
    from tests.golden.case_network import (
        case_network,
        case_outputs,
        case_words,
        compare_words,
        expected_output,
        load_sample,
    )

    case_dir = GOLDEN / name
    net = case_network(case_dir)
    outs = case_outputs(case_dir)
    path = tmp_path / "export.onnx"
    onnx.save(write(net, outs, fake_quant=fake_quant), str(path))
    result = quantize_file(path, None)
    assert result.summary["exact"] is True and result.summary["calibration_samples"] == 0
    assert result.mapping.scale == 1 / 128
    onnx.checker.check_model(result.model, full_check=True)
    got = custom_ops.run(custom_ops.session(result.model), load_sample(case_dir, net))
    words = case_words(case_dir, net, [g[0] for g in got], outs)
    problems = compare_words(expected_output(case_dir), words)
    assert not problems, "\n".join(problems)
    # The same hardware layers (an equivalent power-of-two split of weights and shift
    # is allowed: it computes the same integers).
    assert len(result.network.layers) == len(net.layers)
    for a, b in zip(result.network.layers, net.layers, strict=True):
        assert (a.operator, a.output_width, a.activation) == \
            (b.operator, b.output_width, b.activation)


def _qat_model():
    import torch
    from torch import nn

    import ai8x_torch as ai8x

    ai8x.set_device(85, simulate=False, round_avg=False, verbose=False)
    torch.manual_seed(11)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = ai8x.FusedConv2dReLU(2, 8, 3, padding=1)
            self.conv2 = ai8x.FusedMaxPoolConv2dReLU(8, 8, 3, padding=1)
            self.conv3 = ai8x.FusedConv2dReLU(8, 16, 1)
            self.fc = ai8x.Linear(16 * 4 * 4, 10, wide=True)

        def forward(self, x):
            x = self.conv3(self.conv2(self.conv1(x)))
            return self.fc(x.view(x.size(0), -1))

    model = Net()
    with torch.no_grad():  # trained-looking scales: weights and biases of various sizes
        for k, p in enumerate(model.parameters()):
            if p.requires_grad:
                p.mul_(0.3 + 0.4 * k)
    ai8x.initiate_qat(model, {"start_epoch": 0, "weight_bits": 8,
                              "overrides": {"conv2": {"weight_bits": 4},
                                            "conv3": {"weight_bits": 2}}})
    return model.eval()


def test_qat_export_recovers_what_quantize_model_makes(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import ai8x_torch as ai8x
    from ai8x_torch.modules import hardware_params
    from onnx2ai8x.quantize import quantize_file

    model = _qat_model()
    path = tmp_path / "qat.onnx"
    onnx.save(write_qat(model, (2, 8, 8)), str(path))
    result = quantize_file(path, None)
    assert result.summary["exact"] is True
    quantized = ai8x.quantize_model(copy.deepcopy(model))
    want = [hardware_params(m) for m in (quantized.conv1, quantized.conv2, quantized.conv3,
                                         quantized.fc)]
    layers = [lay for lay in result.network.layers if lay.weights is not None]
    assert len(layers) == 4
    for lay, hw in zip(layers, want, strict=True):
        np.testing.assert_array_equal(lay.weights, hw["weights"])
        assert lay.quantization == hw["weight_bits"]
        if hw["bias_hw"] is None or not np.any(hw["bias_hw"]):
            assert lay.bias_hw is None
        else:
            np.testing.assert_array_equal(lay.bias_hw, hw["bias_hw"])
        if lay.output_width == 8:  # a wide layer applies no shift
            assert lay.output_shift == hw["output_shift"]
    assert [lay.quantization for lay in layers] == [8, 4, 2, 8]


def test_vendor_export_converts_without_calibration(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    model = _qat_model()
    path = tmp_path / "qat.onnx"
    onnx.save(write_qat(model, (2, 8, 8)), str(path))
    code, out, err = cli([path, "--device", "MAX78000", "-o", tmp_path / "proj"])
    assert code == 0, err
    assert "recovered exactly" in out and (tmp_path / "proj" / "cnn.c").is_file()
    report = json.loads((tmp_path / "proj" / "report.json").read_text())
    assert report["quantization"]["exact"] is True
