"""ai8x_torch as a drop-in for the vendor's `ai8x`: model files, names, the training flow."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch
from torch import nn

import ai8x_torch

# A model file as the vendor's training repository writes them (`import ai8x` at the top,
# module-level reads of `ai8x.dev`, BatchNorm-fused layers, a residual `ai8x.Add`).
VENDOR_STYLE_MODEL = '''
import torch.nn as nn
import ai8x

class TinyResNet(nn.Module):
    def __init__(self, num_classes=10, num_channels=3, dimensions=(16, 16), bias=True,
                 **kwargs):
        super().__init__()
        assert ai8x.dev.WEIGHT_DEPTH >= 768
        self.conv1 = ai8x.FusedConv2dBNReLU(num_channels, 16, 3, padding=1, bias=bias,
                                            **kwargs)
        self.conv2 = ai8x.FusedMaxPoolConv2dBNReLU(16, 16, 3, pool_size=2, pool_stride=2,
                                                   padding=1, bias=bias, **kwargs)
        self.conv3 = ai8x.FusedConv2dReLU(16, 16, 3, padding=1, bias=bias, **kwargs)
        self.resid = ai8x.Add()
        self.conv4 = ai8x.FusedAvgPoolConv2dReLU(16, 8, 1, pool_size=2, pool_stride=2,
                                                 bias=bias, **kwargs)
        self.fc = ai8x.Linear(8 * 4 * 4, num_classes, bias=True, wide=True, **kwargs)

    def forward(self, x):
        x = self.conv2(self.conv1(x))
        x = self.conv4(self.resid(self.conv3(x), x))
        return self.fc(x.view(x.size(0), -1))

def tinyresnet(pretrained=False, **kwargs):
    assert not pretrained
    return TinyResNet(**kwargs)
'''


@pytest.fixture
def vendor_module(monkeypatch):
    """The model file above, imported with `ai8x` resolving to ai8x_torch."""
    monkeypatch.setitem(sys.modules, "ai8x", ai8x_torch)
    mod = types.ModuleType("tinyresnet")
    exec(compile(VENDOR_STYLE_MODEL, "tinyresnet.py", "exec"), mod.__dict__)  # noqa: S102
    return mod


def test_vendor_model_file_runs_unchanged(vendor_module):
    ai8x_torch.set_device(85, simulate=False, round_avg=False, verbose=False)
    model = vendor_module.tinyresnet(num_classes=4)
    y = model(torch.rand(2, 3, 16, 16) - 0.5)
    assert y.shape == (2, 4)


def test_parameter_and_buffer_names_are_the_vendors(vendor_module):
    model = vendor_module.tinyresnet(num_classes=4)
    keys = list(model.state_dict())
    # The names the vendor's checkpoints use (its ai8x.py QuantizationAwareModule).
    for layer in ("conv1", "conv2", "conv3", "conv4", "fc"):
        for suffix in ("output_shift", "weight_bits", "bias_bits", "quantize_activation",
                       "adjust_output_shift", "shift_quantile", "op.weight", "op.bias"):
            assert f"{layer}.{suffix}" in keys
    for suffix in ("bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"):
        assert f"conv1.{suffix}" in keys
    assert not any(k.startswith("resid.") for k in keys)


def test_qat_training_step_then_quantization_gives_integers_in_range(vendor_module):
    torch.manual_seed(0)
    ai8x_torch.set_device(85, simulate=False, round_avg=False, verbose=False)
    model = vendor_module.tinyresnet(num_classes=4)
    x, target = torch.rand(8, 3, 16, 16) - 0.5, torch.randint(0, 4, (8,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    nn.functional.cross_entropy(model(x), target).backward()
    opt.step()

    ai8x_torch.fuse_bn_layers(model)
    assert model.conv1.bn is None
    policy = {"start_epoch": 1, "weight_bits": 8, "overrides": {"conv3": {"weight_bits": 2},
                                                                "fc": {"weight_bits": 4}}}
    ai8x_torch.initiate_qat(model, policy)
    opt = ai8x_torch.update_optimizer(model, opt)
    before = model.conv2.op.weight.detach().clone()
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), target).backward()
    opt.step()
    assert not torch.equal(before, model.conv2.op.weight.detach())  # gradients flow in QAT

    ai8x_torch.quantize_model(model)
    for name, bits in (("conv1", 8), ("conv2", 8), ("conv3", 2), ("conv4", 8), ("fc", 4)):
        layer = getattr(model, name)
        w = layer.op.weight.detach().numpy()
        assert np.all(w == np.round(w)), name
        assert w.min() >= -(2 ** (bits - 1)) and w.max() <= 2 ** (bits - 1) - 1, name
        assert int(layer.weight_bits) == bits
        params = ai8x_torch.hardware_params(layer)
        assert params["output_shift"] == int(layer.output_shift) + 8 - bits
        assert params["bias_hw"].min() >= -128 and params["bias_hw"].max() <= 127


def test_quantize_model_follows_the_vendor_formula():
    """quantize.py, written out plainly: s = floor(log2(1 / max|w, b|)); w_q =
    clamp(floor(w * 2**s * 128 + 0.5)); bias stored = clamp(...) * 128; shift = -s."""
    layer = ai8x_torch.Conv2d(2, 3, 3, bias=True)
    w = torch.tensor(np.linspace(-0.3, 0.2, 54).reshape(3, 2, 3, 3), dtype=torch.float32)
    b = torch.tensor([0.05, -0.11, 0.0])
    layer.op.weight.data, layer.op.bias.data = w.clone(), b.clone()
    ai8x_torch.quantize_model(nn.Sequential(layer))
    s = int(np.floor(np.log2(1 / 0.3)))  # max |param| is 0.3
    want_w = np.clip(np.floor(w.double().numpy() * 2.0 ** s * 128 + 0.5), -128, 127)
    want_b = np.clip(np.floor(b.double().numpy() * 2.0 ** s * 128 + 0.5), -128, 127) * 128
    np.testing.assert_array_equal(layer.op.weight.detach().numpy(), want_w)
    np.testing.assert_array_equal(layer.op.bias.detach().numpy(), want_b)
    assert int(layer.output_shift) == -s
    assert not bool(layer.adjust_output_shift)


def test_qat_forward_uses_weights_on_the_bit_grid():
    layer = ai8x_torch.Conv2d(1, 1, 3, bias=False)
    ai8x_torch.initiate_qat(nn.Sequential(layer), {"weight_bits": 2})
    layer.op.weight.data = torch.full((1, 1, 3, 3), 0.3)
    x = torch.zeros(1, 1, 3, 3)
    x[0, 0, 1, 1] = 0.5
    # 2-bit weights: 0.3 scaled by 2**-shift (shift from max 0.3: -floor(log2(1/0.3)) = -1)
    # -> 0.6 -> floor(0.6 * 2 + 0.5) / 2 = 0.5, clamped to 1-bit fraction max 0.5.
    y = layer(x)
    assert float(y.detach().flatten()[0]) == pytest.approx(0.5 * 0.5 * 2.0 ** -1)


def test_dev_reflects_set_device():
    ai8x_torch.set_device(87, simulate=True, round_avg=True, verbose=False)
    try:
        assert ai8x_torch.dev.device == 87 and ai8x_torch.dev.simulate
        assert ai8x_torch.dev.WEIGHT_DEPTH == 5120
    finally:
        ai8x_torch.set_device(85, simulate=False, round_avg=False, verbose=False)


def test_normalize_and_fold_follow_the_guide():
    args = types.SimpleNamespace(act_mode_8bit=True)
    img = torch.tensor([[[0.0, 0.5, 1.0]]])
    np.testing.assert_array_equal(ai8x_torch.normalize(args)(img).numpy(), [[[-128, 0, 127]]])
    x = torch.arange(2 * 4 * 4, dtype=torch.float32).reshape(2, 4, 4)
    folded = ai8x_torch.fold(2)(x)
    assert folded.shape == (8, 2, 2)
    torch.testing.assert_close(folded[2:4], x[:, 0::2, 1::2])
    torch.testing.assert_close(ai8x_torch.unfold_batch(folded[None], 2)[0], x)


# A model file using the vendor's composite blocks (`import ai8x_blocks`), MAX78002.
VENDOR_BLOCKS_MODEL = '''
import torch.nn as nn
import ai8x
import ai8x_blocks

class TinyMobileNet(nn.Module):
    def __init__(self, num_classes=5, num_channels=3, bias=True, **kwargs):
        super().__init__()
        self.pre = ai8x.FusedConv2dBNReLU(num_channels, 16, 3, padding=1, bias=True)
        self.fire = ai8x_blocks.Fire(16, 8, 8, 8, bias=True)
        self.res1 = ai8x_blocks.ResidualBottleneck(16, 16, 2, stride=1, bias=bias)
        self.res2 = ai8x_blocks.ResidualBottleneck(16, 24, 1, stride=2, bias=bias,
                                                   depthwise_bias=True)
        self.conv_res = ai8x_blocks.ConvResidualBottleneck(24, 24, 1, stride=1, bias=True)
        self.mb = ai8x_blocks.MBConvBlock(24, 24, 3, 1, bias=True, se_ratio=0.25,
                                          expand_ratio=2)
        self.fc = ai8x.Linear(24 * 4 * 4, num_classes, bias=True, wide=True)

    def forward(self, x):
        x = self.conv_res(self.res2(self.res1(self.fire(self.pre(x)))))
        x = self.mb(x)
        return self.fc(x.view(x.size(0), -1))
'''


def test_vendor_blocks_model_runs_and_names_match(monkeypatch):
    monkeypatch.setitem(sys.modules, "ai8x", ai8x_torch)
    monkeypatch.setitem(sys.modules, "ai8x_blocks", ai8x_torch.blocks)
    mod = types.ModuleType("tinymobilenet")
    exec(compile(VENDOR_BLOCKS_MODEL, "tinymobilenet.py", "exec"), mod.__dict__)  # noqa: S102
    with ai8x_torch.using_device(87):
        model = mod.TinyMobileNet()
        y = model(torch.rand(2, 3, 8, 8) - 0.5)
    assert y.shape == (2, 5)
    keys = set(model.state_dict())
    # The vendor's sub-module names (its ai8x_blocks.py).
    for key in ("fire.squeeze_layer.op.weight", "fire.expand1x1_layer.op.weight",
                "fire.expand3x3_layer.op.weight", "res1.conv1.op.weight",
                "res1.conv2.op.weight", "res1.conv3.bn.running_mean",
                "res2.conv2.bn.weight", "conv_res.conv2.op.weight", "mb.expand_conv.op.weight",
                "mb.depthwise_conv.op.weight", "mb.se_reduce.op.weight",
                "mb.se_expand.op.weight", "mb.project_conv.bn.running_var"):
        assert key in keys, key
    assert "conv_res.conv1.op.weight" not in keys  # expansion 1: no layer (vendor: Empty)
    assert model.res1.conv2.op.groups == 32  # depthwise
    assert isinstance(model.res2.conv2.pool, nn.MaxPool2d)  # stride 2 = max pooling
    assert isinstance(model.res1.resid, ai8x_torch.Add)
    assert not isinstance(model.res2.resid, ai8x_torch.Add)


def test_quantize_helper_follows_the_mode():
    x = torch.tensor([-1.0, 0.3, 100.0, 255.0])
    q = ai8x_torch.Quantize(num_bits=8)
    with ai8x_torch.using_device(85, simulate=False):
        # floor(x * 128 + 0.5) / 128
        np.testing.assert_allclose(q(x).numpy(), np.floor(x.numpy() * 128 + 0.5) / 128)
    with ai8x_torch.using_device(85, simulate=True):
        # integers scaled by 128: floor(x / 128 + 0.5)
        np.testing.assert_array_equal(q(x).numpy(), np.floor(x.numpy() / 128 + 0.5))
    clamp = ai8x_torch.Clamp(min_val=-1.0, max_val=0.5)
    np.testing.assert_array_equal(clamp(torch.tensor([-3.0, 0.25, 9.0])).numpy(), [-1, 0.25, 0.5])


def test_bayer_filter_and_device_classes():
    img = torch.stack([torch.full((4, 4), float(c + 1)) for c in range(3)])  # R=1 G=2 B=3
    out = ai8x_torch.bayer_filter()(img)[0].numpy()
    np.testing.assert_array_equal(out[:2, :2], [[2, 3], [1, 2]])
    assert ai8x_torch.DevAI85(False, False).WEIGHT_DEPTH == 768
    assert ai8x_torch.DevAI87(True, True).simulate
    assert ai8x_torch.DevAI84(False, False).MAX_AVG_POOL == 4


def test_output_stage_helpers_follow_the_mode():
    """quantize_clamp / quantize_clamp_pool (the vendor's NAS layers build their output
    stage with them): the modules chosen for the mode selected at construction."""
    acc = torch.tensor([128.0 * 200, -128.0 * 300, 64.0, -65.0])
    with ai8x_torch.using_device(85, simulate=True):
        q, c = ai8x_torch.quantize_clamp(wide=False)
        # accumulator / 128, rounded half up, saturated to int8
        np.testing.assert_array_equal(c(q(acc)).numpy(), [127, -128, 1, -1])
        q, c = ai8x_torch.quantize_clamp(wide=True, weight_bits=8)
        # wide: DATA_BITS - weight_bits + 1 = 1 bit: floor(x + 0.5), 30-bit accumulator
        np.testing.assert_array_equal(c(q(acc)).numpy(), np.floor(acc.numpy() + 0.5))
        qp, cp = ai8x_torch.quantize_clamp_pool("Avg")
        # average pooling rounds toward zero (round_avg off) and saturates to int8
        np.testing.assert_array_equal(cp(qp(torch.tensor([-2.5, 2.5, 300.0]))).numpy(),
                                      [-2, 2, 127])
        qp, cp = ai8x_torch.quantize_clamp_pool("Max")
        x = torch.tensor([-2.5, 300.0])
        assert torch.equal(cp(qp(x)), x)
    with ai8x_torch.using_device(85, simulate=False):
        x = torch.tensor([-3.0, 0.3, 0.999, 5.0])
        q, c = ai8x_torch.quantize_clamp(wide=False)  # float training: clamp only
        np.testing.assert_allclose(c(q(x)).numpy(), [-1.0, 0.3, 127 / 128, 127 / 128])
        q, c = ai8x_torch.quantize_clamp(wide=False, quantize_activation=True)
        np.testing.assert_allclose(q(x).numpy(), np.floor(x.numpy() * 128 + 0.5) / 128)
        qp, cp = ai8x_torch.quantize_clamp_pool("Avg", quantize_activation=True)
        y = torch.tensor([-0.3, 0.3])  # x 128 = -38.4, 38.4: toward zero, then / 128
        np.testing.assert_allclose(qp(y).numpy(), [-38 / 128, 38 / 128])
        np.testing.assert_allclose(cp(torch.tensor([-2.0, 2.0])).numpy(), [-1, 127 / 128])


def test_batchnorm_without_bias_is_refused_as_the_vendor_does():
    """The vendor's ai8x asserts a bias with BatchNorm (its message: enable --use-bias);
    ai8x_torch refuses the same form with the module and the fix named."""
    from onnx2ai8x.errors import Ai8xError

    with pytest.raises(Ai8xError) as err:
        ai8x_torch.FusedConv2dBNReLU(3, 8, 3, padding=1, bias=False)
    d = err.value.diagnostics[0]
    assert d.where == "FusedConv2dBNReLU(3, 8) batchnorm"
    assert "bias=True" in d.message and "--use-bias" in d.hint
    with pytest.raises(Ai8xError):
        ai8x_torch.FusedConv1dBNReLU(3, 8, 3, bias=False, batchnorm="NoAffine")
    assert ai8x_torch.FusedConv2dBNReLU(3, 8, 3, padding=1, bias=True).bn is not None


def test_vendor_nas_layers_build_on_the_drop_in(monkeypatch):
    """The vendor's ai8x_nas.py (Once-for-All supernet layers) imports get_activation,
    quantize_clamp and quantize_clamp_pool from ai8x: with ai8x_torch as `ai8x` its layers
    build and run (float training)."""
    from tests.map import vendor_zoo as vz

    if not vz.available():
        pytest.skip("the ai8x-training mirror is absent")
    monkeypatch.setitem(sys.modules, "ai8x", ai8x_torch)
    nas = types.ModuleType("ai8x_nas")
    exec(compile(vz.show("ai8x_nas.py"), "ai8x_nas.py", "exec"), nas.__dict__)  # noqa: S102
    with ai8x_torch.using_device(85, simulate=False):
        layer = nas.FusedConv2dBNReLU(3, 8, 3, padding=1, bias=True)
        layer.eval()
        y = layer(torch.rand(1, 3, 8, 8) - 0.5)
    assert y.shape == (1, 8, 8, 8)
    y = y.detach()
    assert float(y.min()) >= 0 and float(y.max()) <= 127 / 128  # ReLU, then the clamp
