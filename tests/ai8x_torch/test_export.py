"""ai8x_torch simulate mode == the exported model on the onnxruntime reference.

The two are independent implementations of the accelerator's arithmetic: simulate mode
is PyTorch float64 arithmetic on the modules' own parameters; the reference is the
exported ai8x-ONNX graph (integer ConvInteger/MatMulInteger and the `ai8x` kernels).
Every export also passes `onnx.checker.check_model(full_check=True)` (inside
`export_onnx`) and reads back through the converter's importer.
"""
from __future__ import annotations

from dataclasses import fields

import numpy as np
import onnx
import pytest
import torch
from torch import nn

import ai8x_torch as ai8x
import custom_ops
from ai8x_torch.export import export_onnx, to_network
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.importer.onnx_reader import read_model
from onnx2ai8x.network import ELTWISE_ADD, OP_CONV2D, OP_NONE, Layer, Network
from tests.ai8x_torch.helpers import assert_same, randomize, reference, simulate


class Seq(nn.Module):
    """Layers in a chain, with a flatten before a Linear that follows a convolution."""

    def __init__(self, *layers: nn.Module) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        kinds = [isinstance(layer.op, nn.Linear) for layer in layers]
        self.flatten_before = [k and (i == 0 or not kinds[i - 1]) for i, k in enumerate(kinds)]

    def forward(self, x):
        for layer, flatten in zip(self.layers, self.flatten_before, strict=True):
            if flatten:
                x = x.view(x.size(0), -1)
            x = layer(x)
        return x


class Residual(nn.Module):
    """n branches from the input, combined element-wise, then an optional layer."""

    def __init__(self, n: int, eltwise: type, tail: nn.Module | None, ch: int = 4) -> None:
        super().__init__()
        self.branches = nn.ModuleList(ai8x.FusedConv2dReLU(3, ch, 3, padding=1)
                                      for _ in range(n))
        self.combine = eltwise()
        self.tail = tail

    def forward(self, x):
        y = self.combine(*[b(x) for b in self.branches])
        return y if self.tail is None else self.tail(y)


class Concat(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = ai8x.FusedConv2dReLU(3, 5, 3, padding=1)
        self.b = ai8x.FusedConv2dAbs(3, 6, 1)
        self.c = ai8x.FusedMaxPoolConv2d(11, 4, 3, padding=1, pool_size=2, pool_stride=2)

    def forward(self, x):
        return self.c(torch.cat([self.a(x), self.b(x)], dim=1))


def layer_differences(want: Network, got: Network) -> list[str]:
    """`layer.field` for every Layer field that differs; in_sequences None is the
    previous layer (how the builder and the vendor read it)."""
    if len(want.layers) != len(got.layers):
        return [f"{len(want.layers)} vs {len(got.layers)} layers"]
    out = [] if tuple(want.input_shape) == tuple(got.input_shape) else ["input_shape"]
    for i, (a, b) in enumerate(zip(want.layers, got.layers, strict=True)):
        for f in fields(Layer):
            u, v = getattr(a, f.name), getattr(b, f.name)
            if f.name == "in_sequences":
                u = (i - 1,) if u is None else tuple(u)
                v = (i - 1,) if v is None else tuple(v)
            if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
                same = (u is None and v is None) or (
                    u is not None and v is not None and np.shape(u) == np.shape(v)
                    and np.array_equal(u, v))
            else:
                same = u == v
            if not same:
                out.append(f"{a.name}.{f.name}: {u!r} vs {v!r}")
    return out


def _2d(c=3, h=10, w=10):
    return (c, h, w)


# (id, model factory, input shape, options)
CASES = [
    ("conv3x3-pad1", lambda: Seq(ai8x.Conv2d(3, 8, 3, padding=1)), _2d(), {}),
    ("conv1x1", lambda: Seq(ai8x.FusedConv2dReLU(3, 8, 1)), _2d(), {}),
    ("conv-pad0-pad2", lambda: Seq(ai8x.FusedConv2dReLU(3, 8, 3, padding=0),
                                   ai8x.FusedConv2dAbs(8, 4, 3, padding=2)), _2d(), {}),
    ("conv-stride2", lambda: Seq(ai8x.FusedConv2dReLU(3, 8, 3, stride=2, padding=1)),
     _2d(), {}),
    ("conv-nobias", lambda: Seq(ai8x.FusedConv2dReLU(3, 8, 3, padding=1, bias=False)),
     _2d(), {}),
    ("maxpool2", lambda: Seq(ai8x.FusedMaxPoolConv2dReLU(3, 8, 3, padding=1)), _2d(), {}),
    ("maxpool3-stride2", lambda: Seq(ai8x.FusedMaxPoolConv2dReLU(
        3, 8, 3, padding=1, pool_size=3, pool_stride=2)), _2d(3, 11, 11), {}),
    ("maxpool-stride1x1", lambda: Seq(ai8x.FusedMaxPoolConv2d(
        3, 8, 3, padding=1, pool_size=1, pool_stride=2)), _2d(), {}),
    # a 1x1 window is only a stride: written as a 1x1 MaxPool whatever the module's kind
    ("avgpool1x1-stride2", lambda: Seq(ai8x.FusedAvgPoolConv2dReLU(
        3, 8, 3, padding=1, pool_size=1, pool_stride=2)), _2d(), {"round_avg": True}),
    ("maxpool1x1-dilated-stride3", lambda: Seq(ai8x.FusedMaxPoolConv2d(
        3, 8, 1, pool_size=1, pool_stride=3, pool_dilation=2)), _2d(), {}),
    ("avgpool2", lambda: Seq(ai8x.FusedAvgPoolConv2dReLU(3, 8, 3, padding=1)), _2d(), {}),
    ("avgpool4-round", lambda: Seq(ai8x.FusedAvgPoolConv2dReLU(
        3, 8, 3, padding=1, pool_size=4, pool_stride=4)), _2d(3, 16, 16),
     {"round_avg": True}),
    ("avgpool3-trunc", lambda: Seq(ai8x.FusedAvgPoolConv2d(
        3, 8, 1, pool_size=3, pool_stride=3)), _2d(3, 12, 12), {}),
    ("maxpool-only", lambda: Seq(ai8x.MaxPool2d(2, 2), ai8x.Conv2d(3, 4, 3, padding=1)),
     _2d(), {}),
    ("avgpool-only", lambda: Seq(ai8x.AvgPool2d(2, 2), ai8x.FusedConv2dReLU(3, 4, 1)),
     _2d(), {}),
    ("bits1", lambda: Seq(ai8x.FusedConv2dReLU(3, 8, 3, padding=1)), _2d(), {"bits": 1}),
    ("bits2", lambda: Seq(ai8x.FusedConv2dReLU(3, 8, 3, padding=1)), _2d(), {"bits": 2}),
    ("bits4", lambda: Seq(ai8x.FusedConv2dReLU(3, 8, 3, padding=1)), _2d(), {"bits": 4}),
    ("binary", lambda: Seq(ai8x.FusedConv2dReLU(3, 8, 3, padding=1)), _2d(),
     {"bits": 1, "binary": True, "device": 87}),
    ("wide-linear", lambda: Seq(ai8x.FusedConv2dReLU(3, 4, 3, padding=1),
                                ai8x.Linear(4 * 10 * 10, 10, bias=True, wide=True)),
     _2d(), {}),
    ("wide-conv", lambda: Seq(ai8x.Conv2d(3, 8, 3, padding=1, wide=True)), _2d(), {}),
    ("linear-chain", lambda: Seq(ai8x.FusedConv2dReLU(3, 4, 3, padding=1),
                                 ai8x.FusedLinearReLU(400, 32, bias=True),
                                 ai8x.FusedLinearAbs(32, 16, bias=True),
                                 ai8x.Linear(16, 5, bias=True)), _2d(), {}),
    ("conv1d", lambda: Seq(ai8x.FusedConv1dReLU(6, 8, 3, padding=1),
                           ai8x.FusedConv1dAbs(8, 8, 5, padding=2),
                           ai8x.Conv1d(8, 4, 1)), (6, 30), {}),
    ("conv1d-pool", lambda: Seq(ai8x.FusedMaxPoolConv1dReLU(6, 8, 3, padding=1,
                                                            pool_size=2, pool_stride=2),
                                ai8x.FusedAvgPoolConv1dReLU(8, 8, 3, padding=0,
                                                            pool_size=3, pool_stride=3)),
     (6, 36), {}),
    ("conv1d-k9-dilated", lambda: Seq(ai8x.FusedConv1dReLU(4, 8, 9, padding=0),
                                      ai8x.FusedConv1dReLU(8, 4, 3, dilation=2)),
     (4, 40), {}),
    ("convtranspose", lambda: Seq(ai8x.FusedConvTranspose2dReLU(3, 8, 3, stride=2,
                                                                padding=1)), _2d(3, 6, 6),
     {}),
    ("depthwise", lambda: Seq(ai8x.FusedDepthwiseConv2dReLU(6, 6, 3, padding=1)),
     _2d(6, 8, 8), {"device": 87}),
    ("concat", lambda: Concat(), _2d(), {}),
    ("add2-fused", lambda: Residual(2, ai8x.Add, ai8x.FusedConv2dReLU(4, 8, 3, padding=1)),
     _2d(), {}),
    ("add2-fused-pool", lambda: Residual(2, ai8x.Add, ai8x.FusedMaxPoolConv2dReLU(
        4, 8, 3, padding=1)), _2d(), {}),
    ("sub3-fused-avgpool", lambda: Residual(3, ai8x.Sub, ai8x.FusedAvgPoolConv2dReLU(
        4, 8, 3, padding=1)), _2d(), {}),
    ("or4-passthrough", lambda: Residual(4, ai8x.BitwiseOr, None), _2d(), {}),
    ("xor5-fused", lambda: Residual(5, ai8x.BitwiseXor, ai8x.FusedConv2dReLU(4, 4, 1)),
     _2d(), {}),
    ("add16-passthrough", lambda: Residual(16, ai8x.Add, None, ch=2), _2d(3, 6, 6), {}),
    ("add16-fused", lambda: Residual(16, ai8x.Add, ai8x.Conv2d(2, 3, 3, padding=1), ch=2),
     _2d(3, 6, 6), {}),
    ("add2-then-maxpool-only", lambda: Residual(2, ai8x.Add, ai8x.MaxPool2d(2, 2)), _2d(),
     {}),
    ("sub2-then-avgpool-only", lambda: Residual(2, ai8x.Sub, ai8x.AvgPool2d(2, 2)), _2d(),
     {}),
    # 1-D pooling: the vendor's Conv1d-layer rules (undilated max window, truncating
    # average) and, in a pooling-only layer, the 2-D rules on L x 1 pixels
    ("conv1d-avgpool-round", lambda: Seq(ai8x.FusedAvgPoolConv1dReLU(
        4, 6, 3, padding=1, pool_size=3, pool_stride=1)), (4, 20), {"round_avg": True}),
    ("maxpool1d-only-dilated", lambda: Seq(ai8x.MaxPool1d(2, 2, dilation=2),
                                           ai8x.Conv1d(4, 4, 3, padding=1)), (4, 21), {}),
    ("avgpool1d-only-round", lambda: Seq(ai8x.AvgPool1d(3, 3),
                                         ai8x.Conv1d(4, 4, 3, padding=1)), (4, 21),
     {"round_avg": True}),
    ("conv1d-wide-linear", lambda: Seq(ai8x.FusedMaxPoolConv1dReLU(4, 6, 3, padding=1),
                                       ai8x.Linear(6 * 10, 7, bias=True, wide=True)),
     (4, 20), {}),
    # a view keeping the channels between layers: the next layer reads another H x W
    # (the vendor's in_dim), as in its kws20 v1 / audionet (1-D data read as 2-D)
    ("view-1d-as-2d", lambda: _Wrap(lambda s, x: s.b(s.a(x).view(x.size(0), 8, 6, 5)),
                                    a=ai8x.FusedConv1dReLU(4, 8, 1),
                                    b=ai8x.FusedConv2dReLU(8, 4, 3, padding=1)), (4, 30), {}),
    ("view-2d-as-1d", lambda: _Wrap(lambda s, x: s.b(s.a(x).view(x.size(0), 6, -1)),
                                    a=ai8x.FusedConv2dReLU(3, 6, 3, padding=1),
                                    b=ai8x.Conv1d(6, 4, 3, padding=1)), _2d(3, 6, 8), {}),
    # a model output reshaped on the host (the vendor's autoencoder ends so)
    ("output-view", lambda: _Wrap(
        lambda s, x: s.fc(s.a(x).view(x.size(0), -1)).view(x.size(0), 5, 3),
        a=ai8x.FusedConv2dReLU(3, 4, 3, padding=1), fc=ai8x.Linear(400, 15, bias=True)),
     _2d(), {}),
    # plain torch max pooling between layers: fused into the convolution reading it, or
    # a pooling-only layer where two layers read it
    ("plain-maxpool2d-shared", lambda: _Wrap(
        lambda s, x: (lambda y: s.c(torch.cat([s.b(y), s.b2(y)], dim=1)))(s.p(s.a(x))),
        a=ai8x.FusedConv2dReLU(3, 6, 3, padding=1), p=nn.MaxPool2d(2, 2),
        b=ai8x.FusedConv2dReLU(6, 4, 3, padding=1), b2=ai8x.FusedConv2dReLU(6, 4, 1),
        c=ai8x.Conv2d(8, 4, 3, padding=1)), _2d(), {}),
    ("plain-maxpool2d", lambda: _Wrap(lambda s, x: s.b(s.p(s.a(x))),
                                      a=ai8x.FusedConv2dReLU(3, 6, 3, padding=1),
                                      p=nn.MaxPool2d(2, 2),
                                      b=ai8x.FusedConv2dReLU(6, 4, 3, padding=1)), _2d(), {}),
    ("plain-maxpool1d", lambda: _Wrap(lambda s, x: s.b(s.p(s.a(x))),
                                      a=ai8x.FusedConv1dReLU(4, 6, 3, padding=1),
                                      p=nn.MaxPool1d(3, 3),
                                      b=ai8x.Conv1d(6, 4, 1)), (4, 21), {}),
]


@pytest.mark.parametrize("name,factory,shape,opts", CASES, ids=[c[0] for c in CASES])
def test_simulate_equals_reference(name, factory, shape, opts, tmp_path):
    rng = np.random.default_rng(sum(map(ord, name)))
    device = opts.get("device", 85)
    with ai8x.using_device(device):
        model = factory()
    randomize(model, rng, bits=opts.get("bits", 8), binary=opts.get("binary", False))
    x = rng.integers(-128, 128, size=(3, *shape))
    sim = simulate(model, x, device, opts.get("round_avg", False))
    ref = reference(model, x, tmp_path / f"{name}.onnx", device, opts.get("round_avg", False))
    assert_same(sim, ref)
    # The converter's importer reads the export back into the very Network it was
    # built from, field by field (weights, bias, shift, connectivity included).
    with ai8x.using_device(device, round_avg=opts.get("round_avg", False)):
        built, _ = to_network(model, torch.zeros(1, *shape))
    back = read_model(tmp_path / f"{name}.onnx")
    assert layer_differences(built, back) == []
    modules = dict(model.named_modules())
    for lay in back.layers:
        if lay.weights is not None:
            # weights as the module holds them, under the module's own name
            np.testing.assert_array_equal(lay.weights, modules[lay.name].op.weight.detach())


def test_worst_case_stays_exact(tmp_path):
    """1024 input channels, all -128 data and weights, 3x3 kernel: |sum| = 2**27 * 1.125,
    far beyond float32's exact integers; both paths must still agree with the plain
    integer formula."""
    model = Seq(ai8x.Conv2d(1024, 4, 3, padding=0, bias=False, wide=True))
    randomize(model, np.random.default_rng(0), extreme=-128)
    x = np.full((1, 1024, 3, 3), -128)
    expected = 1024 * 9 * 128 * 128
    sim = simulate(model, x)
    ref = reference(model, x, tmp_path / "worst.onnx")
    assert_same(sim, ref)
    assert int(np.asarray(ref[0]).ravel()[0]) == expected

    narrow = Seq(ai8x.Conv2d(1024, 4, 3, padding=1, bias=True))
    randomize(narrow, np.random.default_rng(1), extreme=-128, shift_range=(-15, -15))
    x = np.full((1, 1024, 5, 5), -128)
    assert_same(simulate(narrow, x), reference(narrow, x, tmp_path / "worst8.onnx"))


def test_export_names_nodes_after_modules(tmp_path):
    model = Concat()
    randomize(model, np.random.default_rng(3))
    path = tmp_path / "m.onnx"
    ai8x.export_onnx(model, torch.zeros(1, 3, 8, 8), path)
    proto = onnx.load(path)
    names = {n.name for n in proto.graph.node}
    assert {"a", "b", "c"} <= names
    domains = {i.domain: i.version for i in proto.opset_import}
    assert "" in domains and domains.get("ai8x") == 1
    onnx.checker.check_model(proto, full_check=True)


class _PlainTorch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = ai8x.FusedConv2dReLU(3, 4, 3, padding=1)
        self.b = ai8x.FusedConv2dReLU(4, 4, 3, padding=1)

    def forward(self, x):
        return self.b(self.a(x) * 2)


class _Unknown(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.a(x)


def test_untranslatable_models_name_the_problem(tmp_path):
    m = _PlainTorch()
    randomize(m, np.random.default_rng(0))
    with pytest.raises(Ai8xError) as err:
        ai8x.export_onnx(m, torch.zeros(1, 3, 8, 8), tmp_path / "x.onnx")
    assert "mul" in str(err.value.diagnostics[0].where) + err.value.diagnostics[0].message
    with pytest.raises(Ai8xError) as err:
        ai8x.export_onnx(_Unknown(), torch.zeros(1, 3, 8, 8), tmp_path / "y.onnx")
    assert err.value.diagnostics[0].where == "a" and "Conv2d" in err.value.diagnostics[0].message
    float_model = Seq(ai8x.FusedConv2dReLU(3, 4, 3, padding=1))
    with pytest.raises(Ai8xError) as err:
        ai8x.export_onnx(float_model, torch.zeros(1, 3, 8, 8), tmp_path / "z.onnx")
    assert "quantize" in err.value.diagnostics[0].hint
    assert not (tmp_path / "z.onnx").exists()


# -- the lead's first model, against a plainly written numpy formula ---------------------


class Small(nn.Module):
    """1x8x8 -> conv 3x3 ReLU -> max pool 2 + conv 3x3 ReLU -> wide linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = ai8x.FusedConv2dReLU(1, 8, 3, padding=1, bias=True)
        self.conv2 = ai8x.FusedMaxPoolConv2dReLU(8, 8, 3, padding=1, bias=True)
        self.fc = ai8x.Linear(8 * 4 * 4, 10, bias=True, wide=True)

    def forward(self, x):
        x = self.conv2(self.conv1(x))
        return self.fc(x.view(x.size(0), -1))


def _np_conv3x3_pad1(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Integer cross-correlation, zero padding 1: (C, H, W) x (O, C, 3, 3) -> (O, H, W)."""
    c, h, wd = x.shape
    xp = np.zeros((c, h + 2, wd + 2), dtype=np.int64)
    xp[:, 1:-1, 1:-1] = x
    out = np.zeros((w.shape[0], h, wd), dtype=np.int64)
    for i in range(3):
        for j in range(3):
            out += np.einsum("oc,chw->ohw", w[:, :, i, j], xp[:, i:i + h, j:j + wd])
    return out


def _np_output_relu(acc: np.ndarray, shift: int) -> np.ndarray:
    # seed 000 "Output Shift": accumulator / 128 scaled by 2**shift, rounded half up;
    # ReLU then clamps to [0, 127].
    return np.clip(np.floor(0.5 + acc * 2.0 ** shift / 128), 0, 127).astype(np.int64)


def test_small_model_matches_the_integer_formula(tmp_path):
    model = Small()
    randomize(model, np.random.default_rng(11), shift_range=(-2, 0))
    x = np.random.default_rng(12).integers(-128, 128, size=(1, 8, 8))
    path = export_onnx(model, torch.zeros(1, 1, 8, 8), tmp_path / "small.onnx")
    assert path == tmp_path / "small.onnx"
    (got,) = custom_ops.run(custom_ops.session(path), x)

    def params(m):
        w = m.op.weight.detach().numpy().astype(np.int64)
        b = m.op.bias.detach().numpy().astype(np.int64) // 128  # stored = hw bias * 2**7
        return w, b * 128, int(m.output_shift.item())

    w1, b1, s1 = params(model.conv1)
    w2, b2, s2 = params(model.conv2)
    w3, b3, _ = params(model.fc)
    y1 = _np_output_relu(_np_conv3x3_pad1(x, w1) + b1[:, None, None], s1)
    pooled = y1.reshape(8, 4, 2, 4, 2).max(axis=(2, 4))
    y2 = _np_output_relu(_np_conv3x3_pad1(pooled, w2) + b2[:, None, None], s2)
    # wide output: the raw 32-bit accumulator, no shift, no clamp (seed 000)
    y3 = w3 @ y2.reshape(-1) + b3
    np.testing.assert_array_equal(np.asarray(got).reshape(-1), y3)
    assert np.abs(y3).max() > 127  # the wide output is not clipped to 8 bits


# -- layout: what maps to which hardware layer ------------------------------------------


class VendorResidual(nn.Module):
    """The residual pattern of the vendor's ai85ressimplenet forward(), shrunk."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = ai8x.FusedConv2dReLU(3, 8, 3, padding=1)
        self.conv2 = ai8x.FusedConv2dReLU(8, 6, 3, padding=1)
        self.conv3 = ai8x.FusedConv2dReLU(6, 6, 3, padding=1)
        self.resid1 = ai8x.Add()
        self.conv4 = ai8x.FusedConv2dReLU(6, 6, 3, padding=1)
        self.conv5 = ai8x.FusedMaxPoolConv2dReLU(6, 6, 3, padding=1)
        self.drop = nn.Dropout(0.2)
        self.conv6 = ai8x.FusedConv2dReLU(6, 6, 3, padding=1)
        self.resid2 = ai8x.Add()
        self.conv7 = ai8x.Conv2d(6, 5, 1, wide=True)

    def forward(self, x):
        x = self.conv1(x)
        x_res = self.conv2(x)
        x = self.conv3(x_res)
        x = self.resid1(x, x_res)
        x = self.conv4(x)
        x_res = self.conv5(x)
        x = self.conv6(self.drop(x_res))
        x = self.resid2(x, x_res)
        x = self.conv7(x)
        return x.view(x.size(0), -1)  # host-side, as the vendor's model files end


def test_residual_adds_fuse_into_the_next_convolution_as_in_the_vendor_yaml(tmp_path):
    """The vendor's cifar100-ressimplenet.yaml writes `resid1` + `conv4` as one
    `eltwise: add` conv2d layer with in_sequences [conv3's input copy, conv3]; without
    its memory-layout pass-throughs the layers are exactly the module calls."""
    model = VendorResidual().eval()  # dropout: identity at inference, as exported
    randomize(model, np.random.default_rng(5))
    x = np.random.default_rng(6).integers(-128, 128, size=(2, 3, 8, 8))
    assert_same(simulate(model, x), reference(model, x, tmp_path / "res.onnx"))
    net = read_model(tmp_path / "res.onnx")
    names = [lay.name for lay in net.layers]
    assert names == ["conv1", "conv2", "conv3", "conv4", "conv5", "conv6", "conv7"]
    by = {lay.name: lay for lay in net.layers}
    # operands in the PyTorch call's order: resid1(x, x_res) = (conv3, conv2)
    assert (by["conv4"].eltwise, by["conv4"].operands, by["conv4"].in_sequences) == \
        (ELTWISE_ADD, 2, (2, 1))
    assert (by["conv7"].eltwise, by["conv7"].operands, by["conv7"].in_sequences) == \
        (ELTWISE_ADD, 2, (5, 4))
    assert by["conv7"].output_width == 32 and by["conv7"].operator == OP_CONV2D
    assert all(by[n].eltwise == 0 and by[n].operands == 1 for n in names
               if n not in ("conv4", "conv7"))
    # the trailing view is host-side: the output is conv7's (N, C, H, W)
    out = onnx.load(tmp_path / "res.onnx").graph.output
    assert [d.dim_value for d in out[0].type.tensor_type.shape.dim[1:]] == [5, 4, 4]


class SharedSum(nn.Module):
    """An element-wise result used twice cannot fuse: it is a pass-through layer."""

    def __init__(self) -> None:
        super().__init__()
        self.a = ai8x.FusedConv2dReLU(3, 4, 3, padding=1)
        self.b = ai8x.FusedConv2dReLU(3, 4, 1)
        self.add = ai8x.Add()
        self.c = ai8x.FusedConv2dReLU(4, 4, 3, padding=1)
        self.xor = ai8x.BitwiseXor()

    def forward(self, x):
        s = self.add(self.a(x), self.b(x))
        return self.xor(self.c(s), s)


def test_element_wise_result_used_twice_is_its_own_layer(tmp_path):
    model = SharedSum()
    randomize(model, np.random.default_rng(8))
    x = np.random.default_rng(9).integers(-128, 128, size=(2, 3, 6, 6))
    assert_same(simulate(model, x), reference(model, x, tmp_path / "s.onnx"))
    net = read_model(tmp_path / "s.onnx")
    assert [(lay.name, lay.operator, lay.operands) for lay in net.layers] == [
        ("a", OP_CONV2D, 1), ("b", OP_CONV2D, 1), ("add", OP_NONE, 2), ("c", OP_CONV2D, 1),
        ("xor", OP_NONE, 2)]
    assert net.layers[2].in_sequences == (0, 1)
    assert net.layers[4].in_sequences == (3, 2)


def test_pooling_after_element_wise_is_pool_first_false(tmp_path):
    model = Residual(2, ai8x.Add, ai8x.MaxPool2d(2, 2))
    randomize(model, np.random.default_rng(2))
    with ai8x.using_device(85):
        net, outs = to_network(model, torch.zeros(1, 3, 10, 10))
    last = net.layers[-1]
    assert (last.name, last.operator, last.eltwise, last.pool, last.pool_first) == \
        ("tail", OP_NONE, ELTWISE_ADD, (2, 2), False)
    assert len(net.layers) == 3 and outs == [2]


def test_zero_bias_is_kept(tmp_path):
    """An all-zero bias is still a bias (bias memory is written): the export must not
    drop it, which is why export_onnx does not run onnxsim."""
    model = Seq(ai8x.FusedConv2dReLU(3, 4, 3, padding=1, bias=True))
    randomize(model, np.random.default_rng(4))
    model.layers[0].op.bias.data.zero_()
    export_onnx(model, torch.zeros(1, 3, 6, 6), tmp_path / "z.onnx")
    (lay,) = read_model(tmp_path / "z.onnx").layers
    assert lay.bias is not None and not np.any(lay.bias)
    assert lay.bias_hw is not None and lay.bias_hw.shape == (4,)


def test_export_is_deterministic_and_carries_metadata(tmp_path):
    model = Concat()
    randomize(model, np.random.default_rng(3))
    with ai8x.using_device(87):
        a = export_onnx(model, torch.zeros(1, 3, 8, 8), tmp_path / "a.onnx")
        b = export_onnx(model, torch.zeros(1, 3, 8, 8), tmp_path / "b.onnx", doc="hello")
    assert a.read_bytes() == export_onnx(model, torch.zeros(1, 3, 8, 8),
                                         tmp_path / "c.onnx", device="MAX78002").read_bytes()
    proto = onnx.load(b)
    assert proto.doc_string == "hello"
    assert {p.key: p.value for p in proto.metadata_props}.get("ai8x.device") == "MAX78002"
    main = {n.name: {p.key: p.value for p in n.metadata_props} for n in proto.graph.node}
    assert [main[k]["ai8x.layer_index"] for k in ("a", "b", "c")] == ["0", "1", "2"]
    assert main["c"]["ai8x.operator"] == "conv2d"
    assert not any(p.key.startswith("onnxsim") for p in proto.metadata_props)
    assert read_model(b).device == "MAX78002"


def test_dotted_module_names_are_layer_names(tmp_path):
    model = Seq(ai8x.FusedConv2dReLU(3, 4, 3, padding=1), ai8x.Conv2d(4, 2, 1))
    randomize(model, np.random.default_rng(1))
    export_onnx(model, torch.zeros(1, 3, 5, 5), tmp_path / "d.onnx")
    net = read_model(tmp_path / "d.onnx")
    assert [lay.name for lay in net.layers] == ["layers.0", "layers.1"]
    names = {n.name for n in onnx.load(tmp_path / "d.onnx").graph.node}
    assert {"layers.0", "layers.0/shift", "layers.0/clamp", "layers.1"} <= names


# -- error cases ------------------------------------------------------------------------


class _Wrap(nn.Module):
    """forward() given as a function of (self, x)."""

    def __init__(self, fn, **mods: nn.Module) -> None:
        super().__init__()
        for k, m in mods.items():
            self.add_module(k, m)
        self.fn = fn

    def forward(self, x):
        return self.fn(self, x)


def _conv(cin=3, cout=4):
    return ai8x.FusedConv2dReLU(cin, cout, 3, padding=1)


def _error(model, tmp_path, shape=(1, 3, 8, 8)):
    randomize(model, np.random.default_rng(0))
    with pytest.raises(Ai8xError) as err:
        export_onnx(model, torch.zeros(*shape), tmp_path / "e.onnx")
    assert not (tmp_path / "e.onnx").exists()
    diag = err.value.diagnostics[0]
    assert diag.code.startswith("export.") and diag.hint
    return diag


def test_errors_name_the_module_and_the_fix(tmp_path):
    d = _error(_Wrap(lambda s, x: s.b(torch.cat([s.a(x), s.a2(x)], dim=2)),
                     a=_conv(), a2=_conv(), b=_conv(4)), tmp_path)
    assert "dimension 2" in d.message and "dim=1" in d.hint
    d = _error(_Wrap(lambda s, x: s.add(*[s.a(x)] * 17), a=_conv(), add=ai8x.Add()),
               tmp_path)
    assert d.where == "add" and "17" in d.message and "16" in d.message
    d = _error(_Wrap(lambda s, x: s.b(s.a(x).view(x.size(0), -1)), a=_conv(), b=_conv(4)),
               tmp_path)
    assert d.where == "b" and "input" in d.message  # PyTorch itself cannot run it
    d = _error(_Wrap(lambda s, x: s.b(s.a(x).view(x.size(0), -1, 1, 1)), a=_conv(),
                     b=_conv(256)), tmp_path)
    assert "reshape" in d.message and "Linear" in d.hint
    d = _error(_Wrap(lambda s, x: s.b(torch.relu(s.a(x))), a=_conv(), b=_conv(4)), tmp_path)
    assert "relu" in d.where + d.message
    d = _error(_Wrap(lambda s, x: s.b(s.a(x) if x.sum() > 0 else x), a=_conv(),
                     b=_conv(4)), tmp_path)
    assert d.where == "_Wrap" and "traced" in d.message
    d = _error(_Wrap(lambda s, x: torch.cat([s.a(x), s.b(x)], dim=1), a=_conv(),
                     b=_conv()), tmp_path)
    assert "output" in d.message
    d = _error(_Wrap(lambda s, x: x, a=_conv()), tmp_path)
    assert "output" in d.message
    d = _error(_Wrap(lambda s, x: s.a(x), a=_conv()), tmp_path, shape=(1, 3, 2, 8, 8))
    assert "(1, C, H, W)" in d.hint
    # broadcasting has no hardware form: operands are combined word by word
    d = _error(_Wrap(lambda s, x: s.c(s.add(s.a(x), s.b(x))), a=_conv(3, 4), b=_conv(3, 1),
                     add=ai8x.Add(), c=_conv(4, 4)), tmp_path)
    assert d.where == "add" and "shapes" in d.message
    # a matrix along the last axis only (PyTorch's Linear on a 4-D tensor)
    d = _error(_Wrap(lambda s, x: s.fc(s.a(x)), a=_conv(3, 4), fc=ai8x.Linear(8, 5)),
               tmp_path)
    assert d.where == "fc" and "view" in d.hint


def test_data_viewed_as_channels_into_a_1x1_convolution_is_a_flattening_linear(tmp_path):
    """x.view(N, -1, 1, 1) into a 1x1 Conv2d (the vendor's ai85net6): one linear layer
    with flatten, computing what the convolution computes."""
    model = _Wrap(lambda s, x: s.b(s.a(x).view(x.size(0), -1, 1, 1)).view(x.size(0), -1),
                  a=ai8x.FusedMaxPoolConv2dReLU(3, 4, 3, padding=1),
                  b=ai8x.Conv2d(64, 10, 1, bias=True))
    rng = np.random.default_rng(61)
    randomize(model, rng)
    x = rng.integers(-128, 128, size=(3, 3, 8, 8))
    assert_same(simulate(model, x), reference(model, x, tmp_path / "f.onnx"))
    back = read_model(tmp_path / "f.onnx")
    lay = back.layers[1]
    assert lay.operator_name.lower() in ("linear", "mlp") and lay.flatten
    assert (lay.input_channels, tuple(lay.input_dim)) == (4, (4, 4))
    np.testing.assert_array_equal(lay.weights, model.b.op.weight.detach().reshape(10, 64))


def test_plain_max_pooling_is_the_pooling_of_its_only_reader():
    """nn.MaxPool2d read by one convolution is that layer's pooling (one hardware layer);
    read by two layers it is a pooling-only layer they both read."""
    one = _Wrap(lambda s, x: s.b(s.p(s.a(x))), a=_conv(3, 6), p=nn.MaxPool2d(3, 2),
                b=ai8x.FusedConv2dReLU(6, 4, 3, padding=1))
    randomize(one, np.random.default_rng(5))
    net, _ = to_network(one, torch.zeros(1, 3, 11, 11))
    assert [lay.name for lay in net.layers] == ["a", "b"]
    b = net.layers[1]
    assert (b.pool, b.pool_stride, tuple(b.input_dim), tuple(b.pooled_dim)) == \
        ((3, 3), (2, 2), (11, 11), (5, 5))
    two = _Wrap(lambda s, x: (lambda y: s.c(torch.cat([s.b(y), s.b2(y)], dim=1)))(
        s.p(s.a(x))), a=_conv(3, 6), p=nn.MaxPool2d(2, 2), b=_conv(6, 4), b2=_conv(6, 4),
        c=_conv(8, 4))
    randomize(two, np.random.default_rng(6))
    net, _ = to_network(two, torch.zeros(1, 3, 8, 8))
    assert [lay.name for lay in net.layers] == ["a", "p", "b", "b2", "c"]
    p = net.layers[1]
    assert (p.operator, p.pool, tuple(p.output_dim)) == (OP_NONE, (2, 2), (4, 4))
    assert net.layers[2].pool == net.layers[3].pool == (1, 1)


def _six_channel_guard(s, x):
    """The vendor's face-ID forward(): a branch on the input's shape."""
    if x.shape[1] == 6 and x.dim() == 4:
        x = x[:, 0:3, :, :]
    return s.b(s.a(x))


def test_a_condition_on_the_input_shape_is_decided_for_the_example(tmp_path):
    model = _Wrap(_six_channel_guard, a=_conv(3, 4), b=_conv(4, 4))
    randomize(model, np.random.default_rng(9))
    net, _ = to_network(model, torch.zeros(1, 3, 8, 8))
    assert [lay.name for lay in net.layers] == ["a", "b"]
    # for a 6-channel example the branch is taken: layer a reads a slice of the input,
    # which the accelerator cannot take
    d = _error(_Wrap(_six_channel_guard, a=_conv(3, 4), b=_conv(4, 4)), tmp_path,
               shape=(1, 6, 8, 8))
    assert d.where == "x[:, 0:3, :, :]"
    assert d.message.startswith("slicing the network input (`x[:, 0:3, :, :]`, read by "
                                "`a`) is not supported")
    assert "slice the data on the host" in d.hint and "(1, 3, 8, 8)" in d.hint


def test_slicing_accelerator_data_names_the_expression_and_the_fix(tmp_path):
    """Rows of the input, narrow() on the input, channels of a layer's output: each
    refused with the expression, what is unsupported and a fix."""
    d = _error(_Wrap(lambda s, x: s.a(x[:, :, 2:6]), a=_conv()), tmp_path)
    assert d.where == "x[:, :, 2:6]" and "slicing the network input" in d.message
    assert "(1, 3, 4, 8)" in d.hint
    d = _error(_Wrap(lambda s, x: s.a(x.narrow(1, 0, 3)), a=_conv()), tmp_path,
               shape=(1, 4, 8, 8))
    assert d.where == "x.narrow(1, 0, 3)" and "slicing the network input" in d.message
    d = _error(_Wrap(lambda s, x: s.b(s.a(x)[:, :2]), a=_conv(3, 4), b=_conv(2)), tmp_path)
    assert d.where == "a[:, :2]"
    assert d.message.startswith("slicing a layer's output (`a[:, :2]`, read by `b`)")
    assert "fewer output channels" in d.hint


def test_reshapes_the_hardware_cannot_do_are_refused(tmp_path):
    # values moved between channels into a 3x3 convolution
    d = _error(_Wrap(lambda s, x: s.b(s.a(x).view(x.size(0), 16, 4, 4)), a=_conv(),
                     b=_conv(16)), tmp_path)
    assert d.where == "b" and "channels" in d.message and "in_dim" in d.hint
    # padded plain pooling: the accelerator pools without padding
    d = _error(_Wrap(lambda s, x: s.b(s.p(s.a(x))), a=_conv(), p=nn.MaxPool2d(2, 2, 1),
                     b=_conv(4)), tmp_path)
    assert d.where == "p" and "padding" in d.message


class _TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = _conv()

    def forward(self, x, y):
        return self.a(x)


def test_two_inputs_are_refused(tmp_path):
    with pytest.raises(Ai8xError) as err:
        export_onnx(_TwoInputs(), torch.zeros(1, 3, 8, 8), tmp_path / "t.onnx")
    assert "one input" in err.value.diagnostics[0].hint


def test_binary_weights_are_quantization_minus_one_on_the_max78002(tmp_path):
    model = Seq(ai8x.FusedConv2dReLU(3, 4, 3, padding=1))
    randomize(model, np.random.default_rng(2), bits=1, binary=True)
    with ai8x.using_device(87):
        net, _ = to_network(model, torch.zeros(1, 3, 6, 6))
    assert net.layers[0].quantization == -1
    # the implicit shift of 1-bit and binary weights is the same: 8 - 1
    assert net.layers[0].output_shift == int(model.layers[0].output_shift.item()) + 7
    # the MAX78000 has no binary weights, and +1 does not fit 1-bit weights [-1, 0]
    with ai8x.using_device(85), pytest.raises(Ai8xError) as err:
        to_network(model, torch.zeros(1, 3, 6, 6))
    d = err.value.diagnostics[0]
    assert d.where == "layers.0" and "[-1, 0]" in d.message and "MAX78002" in d.message
    with ai8x.using_device(87), pytest.raises(Ai8xError):
        to_network(model, torch.zeros(1, 3, 6, 6), device="MAX78000")


def test_weights_wider_than_their_bits_are_refused(tmp_path):
    model = Seq(ai8x.FusedConv2dReLU(3, 4, 3, padding=1))
    randomize(model, np.random.default_rng(2), bits=4)
    model.layers[0].op.weight.data[0, 0, 0, 0] = 8.0  # 4-bit weights end at 7
    with pytest.raises(Ai8xError) as err:
        export_onnx(model, torch.zeros(1, 3, 6, 6), tmp_path / "w.onnx")
    assert not (tmp_path / "w.onnx").exists()
    d = err.value.diagnostics[0]
    assert d.where == "layers.0" and "[-8, 7]" in d.message and "weight_bits" in d.hint


def test_unknown_device_is_refused(tmp_path):
    model = Seq(ai8x.FusedConv2dReLU(3, 4, 3, padding=1))
    randomize(model, np.random.default_rng(2))
    with pytest.raises(Ai8xError) as err:
        export_onnx(model, torch.zeros(1, 3, 6, 6), tmp_path / "u.onnx", device="MAX78001")
    assert "MAX78002" in err.value.diagnostics[0].hint


# (id, model factory, expected [(layer, in_sequences)], expected output layers)
GRAPHS = [
    ("module-called-twice", lambda: _Wrap(lambda s, x: s.b(s.b(s.a(x))), a=_conv(3, 4),
                                          b=_conv(4, 4)),
     [("a", None), ("b", None), ("b_1", None)], [2]),
    ("concat-with-input", lambda: _Wrap(lambda s, x: s.b(torch.cat([x, s.a(x)], dim=1)),
                                        a=_conv(3, 4), b=_conv(7, 4)),
     [("a", None), ("b", (-1, 0))], [1]),
    ("add-with-input", lambda: _Wrap(lambda s, x: s.b(s.add(x, s.a(x))), a=_conv(3, 3),
                                     b=_conv(3, 4), add=ai8x.Add()),
     [("a", None), ("b", (-1, 0))], [1]),
    ("two-outputs", lambda: _Wrap(lambda s, x: (s.b(s.a(x)), s.c(x)), a=_conv(3, 4),
                                  b=_conv(4, 4), c=_conv(3, 2)),
     [("a", None), ("b", None), ("c", (-1,))], [1, 2]),
    ("intermediate-output", lambda: _Wrap(lambda s, x: (s.b(s.a(x)), s.a(x)),
                                          a=_conv(3, 4), b=_conv(4, 4)),
     [("a", None), ("b", None), ("a_1", (-1,))], [1, 2]),
]


@pytest.mark.parametrize("name,factory,layers,outputs", GRAPHS, ids=[g[0] for g in GRAPHS])
def test_graph_connections(name, factory, layers, outputs, tmp_path):
    model = factory().eval()
    randomize(model, np.random.default_rng(1))
    x = np.random.default_rng(2).integers(-128, 128, size=(2, 3, 6, 6))
    assert_same(simulate(model, x), reference(model, x, tmp_path / "g.onnx"))
    net, outs = to_network(model, torch.zeros(1, 3, 6, 6))
    assert [(lay.name, lay.in_sequences) for lay in net.layers] == layers
    assert outs == outputs
    assert layer_differences(net, read_model(tmp_path / "g.onnx")) == []


def _conv1d_dilated_pool():
    model = Seq(ai8x.FusedMaxPoolConv1dReLU(4, 6, 3, padding=1, pool_size=3, pool_stride=1,
                                            pool_dilation=3))
    randomize(model, np.random.default_rng(7))
    return model


def test_conv1d_dilated_max_pool_computes_as_the_vendor(tmp_path):
    """The vendor's 1-D max pooling reads an undilated window but keeps the dilated
    window's output count, (21 - 3 * 2 - 1) // 1 + 1 = 15 here."""
    model = _conv1d_dilated_pool()
    x = np.random.default_rng(8).integers(-128, 128, size=(2, 4, 21))
    ref = reference(model, x, tmp_path / "p.onnx")
    assert_same(simulate(model, x), ref)
    assert np.asarray(ref[0]).shape == (2, 6, 15)


def test_conv1d_dilated_max_pool_reads_back(tmp_path):
    model = _conv1d_dilated_pool()
    export_onnx(model, torch.zeros(1, 4, 21), tmp_path / "p.onnx")
    assert read_model(tmp_path / "p.onnx").layers[0].pool_dilation == (3, 1)


def test_results_no_output_needs_are_dropped(tmp_path):
    model = _Wrap(lambda s, x: (s.unused(x), s.b(s.a(x)))[1], a=_conv(3, 4), b=_conv(4, 4),
                  unused=_conv(3, 2)).eval()
    randomize(model, np.random.default_rng(1))
    x = np.random.default_rng(2).integers(-128, 128, size=(2, 3, 6, 6))
    assert_same(simulate(model, x), reference(model, x, tmp_path / "u.onnx"))
    net, outs = to_network(model, torch.zeros(1, 3, 6, 6))
    assert [(lay.name, lay.in_sequences) for lay in net.layers] == [("a", None), ("b", None)]
    assert outs == [1]


# -- seeded random sweeps: options of one layer, and graphs of layers -----------------------


def _random_layer(rng: np.random.Generator):
    """A random layer module, its input shape and export options (None: skip)."""
    device = int(rng.choice([85, 87]))
    cin, cout = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    pooling = [None, "Max", "Avg"][int(rng.integers(3))]
    pool = dict(pooling=pooling, pool_size=int(rng.integers(1, 4)),
                pool_stride=int(rng.integers(1, 4)))
    act = [None, "ReLU", "Abs"][int(rng.integers(3))]
    common = dict(bias=bool(rng.random() < 0.6), activation=act,
                  wide=act is None and bool(rng.random() < 0.3))
    if rng.random() < 0.3:
        # 1-D max pooling with dilation loses the dilation in the round trip (xfail above)
        k = int(rng.integers(1, 10))
        module = ai8x.Conv1d(cin, cout, k, padding=int(rng.integers(0, 3)),
                             dilation=int(rng.integers(1, 3)) if k > 1 else 1, **pool,
                             **common)
        shape = (cin, int(rng.integers(12, 24)))
    else:
        if pooling == "Max":
            pool["pool_dilation"] = int(rng.integers(1, 3))
        kind = int(rng.integers(3))
        k = 3 if kind == 1 else int(rng.choice([1, 3]))
        pad = int(rng.integers(0, 3)) if k == 3 else 0
        if kind == 1:
            module = ai8x.ConvTranspose2d(cin, cout, 3, stride=2, padding=1, **pool, **common)
        else:
            groups = cin if kind == 2 else 1
            module = ai8x.Conv2d(cin, cin if kind == 2 else cout, k, padding=pad,
                                 groups=groups, **pool, **common)
        shape = (cin, int(rng.integers(6, 12)), int(rng.integers(6, 12)))
    bits = int(rng.choice([1, 2, 4, 8]))
    binary = bits == 1 and device == 87 and bool(rng.random() < 0.5)
    return Seq(module), shape, device, bits, binary, bool(rng.random() < 0.5)


@pytest.mark.parametrize("seed", range(4))
def test_random_layer_options(seed, tmp_path):
    rng = np.random.default_rng(1000 + seed)
    done = 0
    while done < 8:
        model, shape, device, bits, binary, round_avg = _random_layer(rng)
        with ai8x.using_device(device):
            try:
                model(torch.zeros(1, *shape))
            except RuntimeError:
                continue  # PyTorch itself cannot run it (e.g. the window exceeds the data)
        randomize(model, rng, bits=bits, binary=binary)
        x = rng.integers(-128, 128, size=(2, *shape))
        try:
            ref = reference(model, x, tmp_path / "r.onnx", device, round_avg)
        except Ai8xError as err:
            # only limits the hardware has: weights beyond their width on the MAX78000
            # (binary), a pooling window the vendor's arithmetic cannot place
            assert err.diagnostics[0].code in ("export.unsupported", "layer.pool-window")
            continue
        assert_same(simulate(model, x, device, round_avg), ref)
        with ai8x.using_device(device):
            built, _ = to_network(model, torch.zeros(1, *shape))
        assert layer_differences(built, read_model(tmp_path / "r.onnx")) == []
        done += 1


class _RandomGraph(nn.Module):
    """Layers reading random earlier results: convolutions, pooling, element-wise
    combinations of 2-4 results, concatenations; one or two outputs."""

    def __init__(self, rng: np.random.Generator, n: int = 6, c: int = 4) -> None:
        super().__init__()
        self.steps: list[tuple[str, list[int]]] = []
        for i in range(n):
            avail = list(range(-1, i))
            kind = ["conv", "eltwise", "concat", "pool"][int(rng.integers(4))]
            if kind == "eltwise" and len(avail) >= 2:
                k = int(rng.integers(2, min(len(avail), 4) + 1))
                srcs = [int(v) for v in rng.choice(avail, size=k, replace=False)]
                module = [ai8x.Add, ai8x.Sub, ai8x.BitwiseOr, ai8x.BitwiseXor][
                    int(rng.integers(4))]()
            elif kind == "concat" and len(avail) >= 2:
                kind, srcs = "concat", [int(v) for v in rng.choice(avail, size=2,
                                                                   replace=False)]
                module = ai8x.FusedConv2dReLU(2 * c, c, 3, padding=1)
            else:
                kind, srcs = "one", [int(rng.choice(avail))]
                module = [ai8x.FusedConv2dReLU(c, c, 3, padding=1), ai8x.Conv2d(c, c, 1),
                          ai8x.FusedConv2dAbs(c, c, 1), ai8x.MaxPool2d(1, 1)][
                    int(rng.integers(4))]
            self.steps.append((kind, srcs))
            self.add_module(f"m{i}", module)
        self.outputs = sorted({n - 1, int(rng.integers(n))})

    def forward(self, x):
        values = {-1: x}
        for i, (kind, srcs) in enumerate(self.steps):
            module = getattr(self, f"m{i}")
            ins = [values[s] for s in srcs]
            if kind == "eltwise":
                values[i] = module(*ins)
            elif kind == "concat":
                values[i] = module(torch.cat(ins, dim=1))
            else:
                values[i] = module(ins[0])
        return tuple(values[o] for o in self.outputs)


@pytest.mark.parametrize("seed", range(12))
def test_random_graphs(seed, tmp_path):
    rng = np.random.default_rng(2000 + seed)
    model = _RandomGraph(rng).eval()
    randomize(model, rng)
    x = rng.integers(-128, 128, size=(2, 4, 6, 6))
    assert_same(simulate(model, x), reference(model, x, tmp_path / "g.onnx"))
    built, outs = to_network(model, torch.zeros(1, 4, 6, 6))
    assert layer_differences(built, read_model(tmp_path / "g.onnx")) == []
    assert len(outs) == len(model.outputs)


def test_numpy_example_input(tmp_path):
    model = Seq(ai8x.FusedConv2dReLU(3, 4, 3, padding=1))
    randomize(model, np.random.default_rng(2))
    a = export_onnx(model, np.zeros((1, 3, 6, 6), dtype=np.int64), tmp_path / "a.onnx")
    b = export_onnx(model, torch.zeros(1, 3, 6, 6), tmp_path / "b.onnx")
    assert a.read_bytes() == b.read_bytes()


def _packed_add(s, x):
    p = s.a(x).split(3, dim=1)  # 9 channels: three operands of 3
    return s.c(s.add(p[0], p[1], p[2]))


PACKED = [
    ("split-of-a-layer", lambda: _Wrap(_packed_add, a=_conv(6, 9), add=ai8x.Add(),
                                       c=_conv(3, 4)),
     [("a", None, 1), ("c", None, 3)]),
    ("chunk-of-the-input", lambda: _Wrap(
        lambda s, x: (lambda p: s.xor(p[0], p[1]))(torch.chunk(x, 2, dim=1)),
        xor=ai8x.BitwiseXor()), [("xor", None, 2)]),
    ("split-of-a-concat", lambda: _Wrap(
        lambda s, x: (lambda p: s.sub(p[0], p[1]))(torch.cat([s.a(x), s.b(x)], 1).split(4, 1)),
        a=_conv(6, 4), b=_conv(6, 4), sub=ai8x.Sub()),
     [("a", None, 1), ("b", (-1,), 1), ("sub", (0, 1), 2)]),
]


@pytest.mark.parametrize("name,factory,layers", PACKED, ids=[c[0] for c in PACKED])
def test_operands_packed_in_one_input(name, factory, layers, tmp_path):
    """The vendor's `operands: n` over one input splits its channels equally, in order
    (seed 004): PyTorch writes that as the parts of x.split(c, dim=1)."""
    model = factory().eval()
    randomize(model, np.random.default_rng(3))
    x = np.random.default_rng(4).integers(-128, 128, size=(2, 6, 5, 5))
    assert_same(simulate(model, x), reference(model, x, tmp_path / "p.onnx"))
    net, _ = to_network(model, torch.zeros(1, 6, 5, 5))
    assert [(lay.name, lay.in_sequences, lay.operands) for lay in net.layers] == layers
    assert layer_differences(net, read_model(tmp_path / "p.onnx")) == []


def test_channel_split_errors(tmp_path):
    d = _error(_Wrap(lambda s, x: (lambda p: s.add(p[1], p[0]))(x.split(3, dim=1)),
                     add=ai8x.Add()), tmp_path, shape=(1, 6, 5, 5))
    assert d.where == "add" and "in order" in d.message
    d = _error(_Wrap(lambda s, x: s.a(x.split(3, dim=1)[0]), a=_conv()), tmp_path,
               shape=(1, 6, 5, 5))
    assert d.where == "a" and "split" in d.message
    d = _error(_Wrap(lambda s, x: (lambda p: s.add(p[0], p[1]))(x.split(2, dim=2)),
                     add=ai8x.Add()), tmp_path, shape=(1, 6, 4, 4))
    assert "dimension 2" in d.message and "dim=1" in d.hint
