"""The training flow: QAT forward, BatchNorm folding, initiate_qat, quantize_model.

Expected values are the vendor's formulas written out plainly in numpy (its ai8x.py QAT
forward, its fuse_bn_layers, the synthesis repository's quantize.py), and the
consistency of the flow: after `quantize_model`, simulate mode on the integer input
gives exactly the QAT forward pass times the output scale.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import ai8x_torch as ai8x


@pytest.fixture(autouse=True)
def _float_mode():
    with ai8x.using_device(85, simulate=False):
        yield


def _floor_half(v):
    return np.floor(v + 0.5)


def _vendor_quantile(sorted_values: np.ndarray, q: float) -> float:
    """The vendor's ai8x.quantile written out: values at (2k + 1) / (2n); the segment k
    is the last position <= q (within 0 .. n - 2), the fraction q * (n - 1) - k."""
    n = sorted_values.size
    if q == 1.0:
        return float(sorted_values[-1])
    positions = (2 * np.arange(n) + 1) / (2 * n)
    k = min(max(int(np.sum(positions <= q)), 1), n - 1) - 1
    frac = q * (n - 1) - k
    return float(sorted_values[k] + frac * (sorted_values[k + 1] - sorted_values[k]))


def test_vendor_quantile_extrapolates_where_the_vendor_does() -> None:
    # 112 values, q = 0.9: positions put k at 100, the fraction is 0.9 * 111 - 100 = -0.1,
    # so the result lies below value 100 (torch.quantile would interpolate from value 99).
    x = torch.arange(112, dtype=torch.float32) ** 2
    got = float(ai8x.quantile(x, 0.9))
    assert got == pytest.approx(100 ** 2 - 0.1 * (101 ** 2 - 100 ** 2), rel=1e-6)
    assert got == pytest.approx(_vendor_quantile(x.numpy(), 0.9), rel=1e-6)
    assert got != pytest.approx(float(torch.quantile(x, 0.9)), rel=1e-6)


@pytest.mark.parametrize("bits", [8, 4, 2])
@pytest.mark.parametrize("quantile", [1.0, 0.9, 0.995])
def test_qat_forward_is_the_vendor_formula(bits: int, quantile: float) -> None:
    torch.manual_seed(bits)
    layer = ai8x.FusedConv2dReLU(3, 4, 3, padding=1, bias=True)
    ai8x.initiate_qat(nn.Sequential(layer), {"weight_bits": bits, "shift_quantile": quantile})
    x = torch.floor(torch.rand(2, 3, 5, 5) * 256 - 128) / 128
    y = layer(x).detach().numpy().astype(np.float64)

    w = layer.op.weight.detach().numpy().astype(np.float64)
    b = layer.op.bias.detach().numpy().astype(np.float64)
    params = np.sort(np.abs(np.concatenate([w.ravel(), b.ravel()])))
    limit = _vendor_quantile(params, quantile)
    shift = -np.clip(np.floor(np.log2(1 / limit)), -15, 15)
    scale = 2.0 ** (bits - 1)
    wq = np.clip(_floor_half(w * 2.0 ** -shift * scale) / scale, -1, (scale - 1) / scale)
    bq = np.clip(_floor_half(b * 2.0 ** -shift * scale) / scale, -1, (scale - 1) / scale)
    acc = F.conv2d(x.double(), torch.from_numpy(wq), torch.from_numpy(bq), padding=1).numpy()
    want = np.clip(_floor_half(np.maximum(acc * 2.0 ** shift, 0) * 128) / 128, -1, 127 / 128)
    np.testing.assert_allclose(y, want, atol=1e-6)


def test_qat_wide_output_keeps_15_bits_without_shift() -> None:
    torch.manual_seed(1)
    layer = ai8x.Linear(6, 3, bias=True, wide=True)
    ai8x.initiate_qat(nn.Sequential(layer), {"weight_bits": 8})
    x = torch.floor(torch.rand(4, 6) * 256 - 128) / 128
    y = layer(x).detach().numpy()
    w = layer.op.weight.detach().numpy().astype(np.float64)
    b = layer.op.bias.detach().numpy().astype(np.float64)
    shift = -np.floor(np.log2(1 / np.abs(np.concatenate([w.ravel(), b.ravel()])).max()))
    wq = np.clip(_floor_half(w * 2.0 ** -shift * 128) / 128, -1, 127 / 128)
    bq = np.clip(_floor_half(b * 2.0 ** -shift * 128) / 128, -1, 127 / 128)
    acc = x.double().numpy() @ wq.T + bq
    want = np.clip(_floor_half(acc * 2 ** 14) / 2 ** 14, -2.0 ** 15, 2.0 ** 15)
    np.testing.assert_allclose(y, want, atol=1e-6)


class _Small(nn.Module):
    def __init__(self, bits_fc: int = 8) -> None:
        super().__init__()
        self.conv1 = ai8x.FusedConv2dReLU(2, 6, 3, padding=1, bias=True)
        # ReLU, not Abs: the vendor's QAT takes |x| before rounding, the hardware after, so
        # an Abs layer differs by one where the scaled value is exactly -k - 0.5.
        self.conv2 = ai8x.FusedMaxPoolConv2dReLU(6, 5, 3, padding=1, bias=True)
        self.conv3 = ai8x.FusedAvgPoolConv2dReLU(5, 4, 1, bias=False)
        self.conv4 = ai8x.Conv1d(4, 4, 3, padding=1, bias=True)
        self.fc = ai8x.Linear(16, 3, bias=True, wide=True)

    def forward(self, x):
        x = self.conv3(self.conv2(self.conv1(x)))
        x = self.conv4(x.view(x.size(0), 4, -1))
        return self.fc(x.view(x.size(0), -1))


@pytest.mark.parametrize("bits", [8, 4, 2, 1])
def test_quantized_model_simulates_exactly_the_qat_forward(bits: int) -> None:
    """After QAT with the output shift frozen, `quantize_model` gives the integers the QAT
    forward pass computed: simulate(x * 128) == QAT(x) * 2**14 on the wide output."""
    torch.manual_seed(10 + bits)
    model = _Small()
    ai8x.initiate_qat(model, {"weight_bits": 8, "overrides": {"conv2": {"weight_bits": bits},
                                                              "conv4": {"weight_bits": bits}}})
    x_int = torch.floor(torch.rand(3, 2, 8, 8) * 256 - 128)
    with torch.no_grad():
        qat = model(x_int / 128).double().numpy()
        ai8x.quantize_model(model)
        with ai8x.using_device(85, simulate=True):
            sim = model(x_int).numpy()
    np.testing.assert_array_equal(sim, qat * 2 ** 14)


def _vendor_quantize(w: np.ndarray, b: np.ndarray | None, bits: int):
    """quantize.py written out: s = floor(log2(1 / max|w, b|)) clamped to
    [-7 - bits, 23 - bits]; w_q = clamp(floor(w * 2**s * 2**(bits-1) + 0.5)); the bias the
    same, then stored times 2**(bits - 8) * 128; output_shift = -s."""
    params = np.abs(np.concatenate([w.ravel()] + ([] if b is None else [b.ravel()])))
    s = np.clip(np.floor(np.log2(np.float32(1) / np.float32(params.max()))), -7 - bits,
                23 - bits)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    wq = np.clip(_floor_half(w * 2.0 ** s * 2 ** (bits - 1)), lo, hi)
    bq = None if b is None else \
        np.clip(_floor_half(b * 2.0 ** s * 2 ** (bits - 1)), lo, hi) * 2.0 ** (bits - 8) * 128
    return wq, bq, -s


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
@pytest.mark.parametrize("scale", [3e-4, 0.3, 7.0, 300.0])
def test_quantize_model_is_the_vendor_quantize_py(bits: int, scale: float) -> None:
    rng = np.random.default_rng(bits)
    layer = ai8x.Conv2d(3, 4, 3, bias=True)
    w = (rng.standard_normal((4, 3, 3, 3)) * scale).astype(np.float32)
    b = (rng.standard_normal(4) * scale * 2).astype(np.float32)
    layer.op.weight.data = torch.from_numpy(w.copy())
    layer.op.bias.data = torch.from_numpy(b.copy())
    layer.weight_bits.data = torch.tensor([bits])
    ai8x.quantize_model(nn.Sequential(layer))
    wq, bq, shift = _vendor_quantize(w.astype(np.float64), b.astype(np.float64), bits)
    np.testing.assert_array_equal(layer.op.weight.detach().numpy(), wq)
    np.testing.assert_array_equal(layer.op.bias.detach().numpy(), bq)
    assert float(layer.output_shift) == shift
    assert int(layer.weight_bits) == bits and bool(layer.quantize_activation)
    assert not bool(layer.adjust_output_shift)


def test_quantize_model_defaults_to_8_bits_and_skips_pooling_layers() -> None:
    model = nn.Sequential(ai8x.MaxPool2d(2), ai8x.Conv2d(2, 2, 1, bias=False))
    model[1].op.weight.data = torch.full((2, 2, 1, 1), 0.3)
    ai8x.quantize_model(model)
    assert int(model[1].weight_bits) == 8
    # s = floor(log2(1 / 0.3)) = 1: 0.3 * 2 * 128 = 76.8 -> 77, output shift -1.
    np.testing.assert_array_equal(model[1].op.weight.detach().numpy(), 77.0)
    assert float(model[1].output_shift) == -1


def test_quantize_model_saturates_a_power_of_two_maximum() -> None:
    """The vendor's quirk: a largest |weight| of exactly 2**-k scales to 128, one past the
    8-bit range, and saturates to 127 (its quantize.py clamps after rounding)."""
    layer = ai8x.Conv2d(1, 2, 1, bias=False)
    layer.op.weight.data = torch.tensor([0.25, -0.25]).reshape(2, 1, 1, 1)
    ai8x.quantize_model(nn.Sequential(layer))
    np.testing.assert_array_equal(layer.op.weight.detach().numpy().ravel(), [127, -128])
    assert float(layer.output_shift) == -2


@pytest.mark.parametrize("make, shape", [
    (lambda: ai8x.FusedConv2dBNReLU(3, 5, 3, padding=1), (2, 3, 6, 6)),
    (lambda: ai8x.FusedMaxPoolConv1dBNReLU(3, 5, 3, padding=1), (2, 3, 12)),
    (lambda: ai8x.FusedConv2dBN(3, 5, 3, padding=1, batchnorm="NoAffine"), (2, 3, 6, 6)),
    # in != out channels: the transposed weight's output channels are dimension 1.
    (lambda: ai8x.FusedConvTranspose2dBNReLU(3, 5, 3, stride=2, padding=1), (2, 3, 4, 4)),
    # depthwise transposed: weight (in, 1, k, k), output channel = input channel.
    (lambda: ai8x.FusedDepthwiseConvTranspose2dBNReLU(4, 4, 3, stride=2, padding=1),
     (2, 4, 4, 4)),
    (lambda: ai8x.FusedMaxPoolDepthwiseConv2dBNReLU(6, 6, 3, padding=1), (2, 6, 6, 6)),
])
def test_fuse_bn_layers_keeps_the_floating_point_function(make, shape) -> None:
    torch.manual_seed(3)
    layer = make()
    bn = layer.bn
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 2.0)
    if bn.affine:
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.2, 0.2)
    layer.eval()
    x = torch.rand(*shape) - 0.5
    before = layer(x).detach()
    ai8x.fuse_bn_layers(nn.Sequential(layer))
    assert layer.bn is None
    torch.testing.assert_close(layer(x).detach(), before, atol=1e-6, rtol=1e-5)


def test_initiate_qat_policy() -> None:
    model = _Small()
    ai8x.initiate_qat(model, {"weight_bits": 4, "shift_quantile": 0.99,
                              "overrides": {"fc": {"weight_bits": 8}}})
    assert int(model.conv1.weight_bits) == 4 and int(model.conv1.bias_bits) == 4
    assert int(model.fc.weight_bits) == 8
    assert bool(model.conv2.quantize_activation) and bool(model.conv2.adjust_output_shift)
    assert float(model.conv3.shift_quantile) == pytest.approx(0.99)
    with pytest.raises(ValueError, match="nolayer"):
        ai8x.initiate_qat(model, {"weight_bits": 8, "overrides": {"nolayer": {}}})


def test_update_optimizer_keeps_state_and_settings() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(ai8x.FusedConv2dBNReLU(2, 3, 3, padding=1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.rand(2, 2, 5, 5)).sum().backward()
    opt.step()
    opt.param_groups[0]["lr"] = 0.01  # a scheduler changed it
    weight = model[0].op.weight
    momentum = opt.state[weight]["momentum_buffer"].clone()
    ai8x.fuse_bn_layers(model)
    new = ai8x.update_optimizer(model, opt)
    assert new.param_groups[0]["lr"] == 0.01
    names = {id(p) for p in new.param_groups[0]["params"]}
    assert id(weight) in names and len(names) == len(list(model.parameters()))
    torch.testing.assert_close(new.state[weight]["momentum_buffer"], momentum)


def test_parse_qat_yaml(tmp_path) -> None:
    path = tmp_path / "qat_policy.yaml"
    path.write_text("---\nstart_epoch: 10\nweight_bits: 8\nshift_quantile: 0.995\n"
                    "overrides:\n  fc:\n    weight_bits: 4\n")
    policy = ai8x.parse_qat_yaml(path)
    assert policy == {"start_epoch": 10, "weight_bits": 8, "shift_quantile": 0.995,
                      "overrides": {"fc": {"weight_bits": 4}}}
    model = _Small()
    ai8x.initiate_qat(model, policy)
    assert int(model.fc.weight_bits) == 4 and int(model.conv1.weight_bits) == 8


@pytest.mark.parametrize("text, words", [
    ("weight_bits: 8\n", "start_epoch"),
    ("start_epoch: 1\n", "weight_bits"),
    ("start_epoch: 1\nweight_bits: 3\n", "weight_bits"),
    ("start_epoch: 1\nweight_bits: 8\noverrides:\n  fc:\n    weight_bits: 16\n", "fc"),
    ("start_epoch: [1\n", "YAML"),
])
def test_parse_qat_yaml_errors_name_the_problem(tmp_path, text: str, words: str) -> None:
    from onnx2ai8x.errors import Ai8xError

    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(Ai8xError) as err:
        ai8x.parse_qat_yaml(path)
    assert words in err.value.render() and str(path) in err.value.render()
