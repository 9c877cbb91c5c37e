"""ai8x_torch simulate mode == the exported model on the onnxruntime reference.

The two are independent implementations of the accelerator's arithmetic: simulate mode
is PyTorch float64 arithmetic on the modules' own parameters; the reference is the
exported ai8x-ONNX graph (integer ConvInteger/MatMulInteger and the `ai8x` kernels).
Every export also passes `onnx.checker.check_model(full_check=True)` (inside
`export_onnx`) and reads back through the converter's importer.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from torch import nn

import ai8x_torch as ai8x
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.importer.onnx_reader import read_model
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
    # the converter's importer reads the export back into the same layers
    network = read_model(tmp_path / f"{name}.onnx")
    layers = [m for m in model.modules() if isinstance(m, ai8x.QuantizationAwareModule)]
    assert len(network.layers) >= len(layers)
    for lay in network.layers:
        if lay.weights is not None:
            mod = dict(model.named_modules())[lay.name]
            np.testing.assert_array_equal(lay.weights, mod.op.weight.detach().numpy())


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
