"""ai8x_torch simulate mode equals custom_ops.numpy_ref, the independent int64 statement of
the accelerator's arithmetic (proven equal to the vendor tool on the golden corpus).

Each case builds one ai8x_torch module (or a few for element-wise layers), fills it with
random quantized parameters as a `-q` checkpoint holds them, and compares the module's
simulate-mode output with `numpy_ref.run_network` on a hand-built `Layer`. The Layer is
written here from the module's constructor arguments and the checkpoint conventions of
the golden README (final shift = stored shift + 8 - weight bits, accumulator bias =
floor(stored / 2**(bits - 1)) * 128); it does not use `hardware_params` or the export.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from torch import nn

import ai8x_torch as ai8x
from custom_ops import numpy_ref
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.network import (
    ACT_ABS,
    ACT_RELU,
    ELTWISE_ADD,
    ELTWISE_NONE,
    ELTWISE_OR,
    ELTWISE_SUB,
    ELTWISE_XOR,
    OP_CONV1D,
    OP_CONV2D,
    OP_CONVTRANSPOSE2D,
    OP_LINEAR,
    OP_NONE,
    Layer,
    Network,
)
from tests.ai8x_torch.helpers import fill_layer

_ELTWISE = {"add": ELTWISE_ADD, "sub": ELTWISE_SUB, "or": ELTWISE_OR, "xor": ELTWISE_XOR}
_ACT = {None: None, "ReLU": ACT_RELU, "Abs": ACT_ABS}


def _fill(layer: ai8x.QuantizationAwareModule, rng: np.random.Generator, bits: int,
          binary: bool, extreme: int | None, shift: int | None) -> None:
    """Random quantized parameters (an extreme layer gets the extreme bias -128 too)."""
    fill_layer(layer, rng, bits=bits, binary=binary, extreme=extreme, shift=shift,
               extreme_bias=True)


def _pair(v, one_d: bool) -> tuple[int, int]:
    if isinstance(v, (tuple, list)):
        return (int(v[0]), 1) if one_d else (int(v[0]), int(v[1]))
    return (int(v), 1) if one_d else (int(v), int(v))


def _ref_layer(m: ai8x.QuantizationAwareModule, in_shape: tuple[int, ...], *,
               eltwise: int = ELTWISE_NONE, operands: int = 1,
               pool_first: bool = True) -> Layer:
    """The numpy_ref Layer for module `m` on per-operand input `in_shape` (C, H, W)/(C, L)."""
    one_d = len(in_shape) == 2
    dims = (in_shape[1], 1) if one_d else (in_shape[1], in_shape[2])
    pool, pool_stride, pool_dil, avg = (1, 1), (1, 1), (1, 1), False
    pooled = dims
    if m.pool is not None:
        p = m.pool
        pool = _pair(p.kernel_size, one_d)
        pool_stride = _pair(p.stride, one_d)
        pool_dil = _pair(getattr(p, "dilation", 1), one_d)
        avg = isinstance(p, (nn.AvgPool1d, nn.AvgPool2d))
        # The pooled size the vendor computes (with the dilated window).
        pooled = tuple((d - dl * (k - 1) - 1) // s + 1
                       for d, k, s, dl in zip(dims, pool, pool_stride, pool_dil, strict=True))
        if one_d:
            pooled = (pooled[0], 1)
    common = dict(name="layer", input_channels=in_shape[0], input_dim=dims,
                  pooled_dim=pooled, pool=pool, pool_stride=pool_stride,
                  pool_dilation=pool_dil, pool_average=avg, pool_first=pool_first,
                  eltwise=eltwise, operands=operands)
    op = m.op
    if op is None:
        return Layer(operator=OP_NONE, output_channels=in_shape[0], output_dim=pooled,
                     quantization=0, **common)
    bits = int(m.weight_bits)
    weights = op.weight.detach().numpy().astype(np.int64)
    bias = None
    if op.bias is not None:
        stored = op.bias.detach().numpy().astype(np.float64)
        bias = np.floor(stored / 2 ** (bits - 1)).astype(np.int64) * 128
    kw = dict(activation=_ACT[m.activation], output_shift=int(m.output_shift) + 8 - bits,
              quantization=bits, output_width=32 if m.wide else 8, weights=weights,
              bias=bias)
    if isinstance(op, nn.Linear):
        return Layer(operator=OP_LINEAR, output_channels=op.out_features,
                     output_dim=(1, 1), **kw, **common)
    code = {nn.Conv1d: OP_CONV1D, nn.Conv2d: OP_CONV2D,
            nn.ConvTranspose2d: OP_CONVTRANSPOSE2D}[type(op)]
    extra = {}
    if code == OP_CONVTRANSPOSE2D:
        extra["output_padding"] = _pair(op.output_padding, False)
    padding = _pair(op.padding, one_d)
    if one_d:
        padding = (padding[0], 0)
    return Layer(operator=code, output_channels=op.out_channels, output_dim=(0, 0),
                 kernel_size=_pair(op.kernel_size, one_d), padding=padding,
                 stride=_pair(op.stride, one_d), dilation=_pair(op.dilation, one_d),
                 conv_groups=op.groups, **extra, **kw, **common)


@dataclass(frozen=True)
class Case:
    """One module configuration: `make()` builds the module under `device`."""

    id: str
    make: object
    in_shape: tuple[int, ...]
    device: int = 85
    bits: int = 8
    binary: bool = False
    round_avg: bool = False
    extreme: int | None = None
    shift: int | None = None
    data_range: tuple[int, int] = (-128, 127)
    kwargs: dict = field(default_factory=dict)


def _c2(*a, **k):
    return lambda: ai8x.Conv2d(*a, **k)


def _c1(*a, **k):
    return lambda: ai8x.Conv1d(*a, **k)


def _cases() -> list[Case]:
    cases: list[Case] = []
    # Kernels, padding, stride, activations, bias, every weight width.
    for bits in (1, 2, 4, 8):
        for act in (None, "ReLU", "Abs"):
            for bias in (False, True):
                cases.append(Case(f"conv2d-k3p1-{bits}bit-{act}-bias{int(bias)}",
                                  _c2(5, 6, 3, padding=1, bias=bias, activation=act),
                                  (5, 7, 6), bits=bits))
    for k, pad, stride in ((1, 0, 1), (3, 0, 1), (3, 2, 1), (3, 1, 2), (3, 0, 3), (1, 0, 2)):
        cases.append(Case(f"conv2d-k{k}p{pad}s{stride}", _c2(4, 5, k, padding=pad,
                                                             stride=stride), (4, 9, 8)))
    # Pooling before the convolution: kinds, sizes, strides, rounding, dilation.
    for pooling in ("Max", "Avg"):
        for size, stride in ((2, 2), (3, 1), (4, 4), (3, 2), ((2, 3), 2), (16, 1)):
            for round_avg in ((False, True) if pooling == "Avg" else (False,)):
                cases.append(Case(
                    f"conv2d-{pooling}pool{size}s{stride}-round{int(round_avg)}",
                    _c2(3, 4, 3, padding=1, pooling=pooling, pool_size=size,
                        pool_stride=stride, activation="ReLU"),
                    (3, 17, 18), round_avg=round_avg))
    cases.append(Case("conv2d-stride-without-pooling-1x1-pool",
                      _c2(3, 4, 3, padding=1, pooling="Max", pool_size=1, pool_stride=2),
                      (3, 8, 9)))
    cases.append(Case("conv2d-maxpool-dilation2-ai87",
                      _c2(3, 4, 3, padding=1, pooling="Max", pool_size=2, pool_stride=1,
                          pool_dilation=2), (3, 9, 9), device=87))
    # Wide (32-bit) output, with and without bias; large positive and negative shifts.
    cases.append(Case("conv2d-wide-bias", _c2(6, 4, 3, padding=1, wide=True), (6, 5, 5)))
    cases.append(Case("conv2d-wide-nobias-4bit", _c2(6, 4, 3, padding=1, wide=True,
                                                      bias=False), (6, 5, 5), bits=4))
    for shift in (-15, -7, 5, 15):
        cases.append(Case(f"conv2d-shift{shift}", _c2(4, 4, 3, padding=1), (4, 5, 5),
                          shift=shift))
    # MAX78002: depthwise, binary weights.
    cases.append(Case("depthwise-conv2d-relu-ai87",
                      lambda: ai8x.FusedDepthwiseConv2dReLU(6, 6, 3, padding=1),
                      (6, 7, 7), device=87))
    cases.append(Case("maxpool-depthwise-conv2d-bnrelu-folded-ai87",
                      lambda: _folded(ai8x.FusedMaxPoolDepthwiseConv2dBNReLU(
                          4, 4, 3, padding=1, pool_size=2, pool_stride=2)),
                      (4, 8, 8), device=87))
    cases.append(Case("binary-weights-ai87", _c2(5, 3, 3, padding=1, activation="ReLU"),
                      (5, 6, 6), device=87, bits=1, binary=True))
    # Transposed convolution (stride 2, doubles the size).
    cases.append(Case("convtranspose2d-k3p1",
                      lambda: ai8x.ConvTranspose2d(4, 3, 3, stride=2, padding=1),
                      (4, 5, 6)))
    cases.append(Case("convtranspose2d-avgpool-relu",
                      lambda: ai8x.FusedAvgPoolConvTranspose2dReLU(
                          4, 3, 3, stride=2, padding=1, pool_size=2, pool_stride=2),
                      (4, 8, 8)))
    # 1-D convolutions: kernel 1..9, padding, dilation, pooling.
    for k in range(1, 10):
        pad = min(2, k - 1)
        cases.append(Case(f"conv1d-k{k}p{pad}", _c1(5, 4, k, padding=pad, activation="ReLU"),
                          (5, 20)))
    cases.append(Case("conv1d-dilation2", _c1(3, 4, 3, padding=2, dilation=2), (3, 16)))
    for pooling in ("Max", "Avg"):
        for size, stride in ((2, 2), (3, 1), (4, 3)):
            for round_avg in (False, True):
                cases.append(Case(f"conv1d-{pooling}pool{size}s{stride}-round{int(round_avg)}",
                                  _c1(3, 4, 3, padding=1, pooling=pooling, pool_size=size,
                                      pool_stride=stride, activation="Abs"),
                                  (3, 23), round_avg=round_avg))
    cases.append(Case("conv1d-maxpool-dilation2-ai87",
                      _c1(3, 4, 3, padding=1, pooling="Max", pool_size=3, pool_stride=1,
                          pool_dilation=2), (3, 15), device=87))
    cases.append(Case("conv1d-wide", _c1(3, 4, 3, padding=1, wide=True), (3, 12)))
    # Linear layers.
    for name, make in (("linear", lambda: ai8x.Linear(40, 10, bias=True)),
                       ("linear-nobias", lambda: ai8x.Linear(40, 10)),
                       ("linear-relu", lambda: ai8x.FusedLinearReLU(40, 10, bias=True)),
                       ("linear-abs", lambda: ai8x.FusedLinearAbs(40, 10, bias=True)),
                       ("linear-wide", lambda: ai8x.Linear(40, 10, bias=True, wide=True))):
        for bits in (2, 8):
            cases.append(Case(f"{name}-{bits}bit", make, (40,), bits=bits))
    # Pooling only.
    for name, make, shape in (
            ("maxpool2d", lambda: ai8x.MaxPool2d(2), (3, 8, 9)),
            ("maxpool2d-k3s1", lambda: ai8x.MaxPool2d(3, 1), (3, 8, 9)),
            ("avgpool2d", lambda: ai8x.AvgPool2d(2), (3, 8, 9)),
            ("avgpool2d-k3s1", lambda: ai8x.AvgPool2d(3, 1), (3, 8, 9)),
            ("avgpool2d-k4s4", lambda: ai8x.AvgPool2d(4, 4), (3, 16, 16)),
            ("maxpool1d", lambda: ai8x.MaxPool1d(3, 2), (3, 17)),
            ("avgpool1d", lambda: ai8x.AvgPool1d(2), (3, 17)),
            ("avgpool1d-k3s1", lambda: ai8x.AvgPool1d(3, 1), (3, 17))):
        for round_avg in (False, True):
            cases.append(Case(f"{name}-round{int(round_avg)}", make, shape,
                              round_avg=round_avg))
    # The worst case: 1024 input channels, all data and weights -128, 3x3 kernel.
    cases.append(Case("worst-case-1024ch-all-minus128", _c2(1024, 4, 3, padding=1, wide=True),
                      (1024, 3, 3), extreme=-128, data_range=(-128, -128)))
    cases.append(Case("worst-case-1024ch-all-minus128-shift",
                      _c2(1024, 4, 3, padding=1, activation="Abs"),
                      (1024, 3, 3), extreme=-128, shift=-15, data_range=(-128, -128)))
    return cases


def _folded(m: ai8x.QuantizationAwareModule) -> ai8x.QuantizationAwareModule:
    ai8x.fuse_bn_layers(nn.Sequential(m))
    return m


CASES = _cases()


def _data(rng: np.random.Generator, shape, lo: int, hi: int) -> np.ndarray:
    return rng.integers(lo, hi + 1, size=shape).astype(np.int64)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_simulate_equals_numpy_reference(case: Case) -> None:
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    with ai8x.using_device(case.device):
        module = case.make()
    _fill(module, rng, case.bits, case.binary, case.extreme, case.shift)
    x = _data(rng, (2, *case.in_shape), *case.data_range)
    with ai8x.using_device(case.device, simulate=True, round_avg=case.round_avg), \
            torch.no_grad():
        got = module(torch.from_numpy(x.astype(np.float32))).numpy()
    assert got.dtype == np.float64
    assert np.all(got == np.round(got)), "simulate mode gave non-integers"
    if isinstance(module.op, nn.Linear):
        ref_shape = (case.in_shape[0], 1, 1)
    else:
        ref_shape = case.in_shape
    layer = _ref_layer(module, ref_shape)
    net = Network((layer,), ref_shape)
    for n in range(x.shape[0]):
        (want,) = numpy_ref.run_network(net, x[n].reshape(ref_shape),
                                        avg_pool_rounding=case.round_avg)
        np.testing.assert_array_equal(got[n].reshape(want.shape), want, err_msg=case.id)
    if not module.wide:
        assert got.min() >= -128 and got.max() <= 127


# ---------------------------------------------------------------------------------------
# Element-wise operations (2 to 16 operands), alone and fused with pooling and a layer


_ELT_MODULES = {"add": ai8x.Add, "sub": ai8x.Sub, "or": ai8x.BitwiseOr,
                "xor": ai8x.BitwiseXor}


@pytest.mark.parametrize("operands", [2, 3, 16])
@pytest.mark.parametrize("op", sorted(_ELT_MODULES))
def test_eltwise_equals_numpy_reference(op: str, operands: int) -> None:
    rng = np.random.default_rng(operands * 7 + len(op))
    shape = (3, 5, 4)
    xs = [_data(rng, (2, *shape), -128, 127) for _ in range(operands)]
    module = _ELT_MODULES[op]()
    assert module.op_name == op
    with ai8x.using_device(85, simulate=True):
        got = module(*[torch.from_numpy(x.astype(np.float32)) for x in xs]).numpy()
    # numpy_ref reads the operands one after the other along the channels.
    layer = Layer(name="e", operator=OP_NONE, input_channels=3 * operands,
                  output_channels=3, input_dim=(5, 4), pooled_dim=(5, 4), output_dim=(5, 4),
                  eltwise=_ELTWISE[op], operands=operands, quantization=0)
    net = Network((layer,), (3 * operands, 5, 4))
    for n in range(2):
        joined = np.concatenate([x[n] for x in xs], axis=0)
        (want,) = numpy_ref.run_network(net, joined)
        np.testing.assert_array_equal(got[n], want.reshape(shape))


class _EltThenLayer(nn.Module):
    """An element-wise result fed to a pooling convolution: the vendor's `eltwise` layer
    with `pool_first: false` (its res-simplenet writes `conv(resid(x, y))`)."""

    def __init__(self, op: str, layer: nn.Module) -> None:
        super().__init__()
        self.elt = _ELT_MODULES[op]()
        self.layer = layer

    def forward(self, *xs):
        return self.layer(self.elt(*xs))


class _PoolThenElt(nn.Module):
    """Each operand pooled, then combined (`pool_first: true`, no convolution)."""

    def __init__(self, op: str) -> None:
        super().__init__()
        self.pool = ai8x.MaxPool2d(2, 2)
        self.elt = _ELT_MODULES[op]()

    def forward(self, *xs):
        return self.elt(*[self.pool(x) for x in xs])


@pytest.mark.parametrize("op", sorted(_ELT_MODULES))
def test_eltwise_then_pooling_convolution_equals_numpy_reference(op: str) -> None:
    rng = np.random.default_rng(len(op))
    layer = ai8x.FusedMaxPoolConv2dReLU(3, 4, 3, padding=1, pool_size=2, pool_stride=2)
    _fill(layer, rng, 8, False, None, None)
    model = _EltThenLayer(op, layer)
    xs = [_data(rng, (1, 3, 6, 8), -128, 127) for _ in range(3)]
    with ai8x.using_device(85, simulate=True), torch.no_grad():
        got = model(*[torch.from_numpy(x.astype(np.float32)) for x in xs]).numpy()
    ref = _ref_layer(layer, (3, 6, 8), eltwise=_ELTWISE[op], operands=3, pool_first=False)
    net = Network((ref,), (9, 6, 8))
    (want,) = numpy_ref.run_network(net, np.concatenate([x[0] for x in xs], axis=0))
    np.testing.assert_array_equal(got[0], want)


@pytest.mark.parametrize("op", ["add", "xor"])
def test_pooling_each_operand_then_eltwise_equals_numpy_reference(op: str) -> None:
    rng = np.random.default_rng(3)
    model = _PoolThenElt(op)
    xs = [_data(rng, (1, 3, 6, 8), -128, 127) for _ in range(2)]
    with ai8x.using_device(85, simulate=True), torch.no_grad():
        got = model(*[torch.from_numpy(x.astype(np.float32)) for x in xs]).numpy()
    ref = _ref_layer(model.pool, (3, 6, 8), eltwise=_ELTWISE[op], operands=2,
                     pool_first=True)
    net = Network((ref,), (6, 6, 8))
    (want,) = numpy_ref.run_network(net, np.concatenate([x[0] for x in xs], axis=0))
    np.testing.assert_array_equal(got[0], want)


# ---------------------------------------------------------------------------------------
# Module inventory and attributes the export reads


def test_every_vendor_module_name_exists_with_the_exported_attributes() -> None:
    # The vendor's layer module names (its ai8x.py), a representative spread.
    names = ["FusedMaxPoolConv2d", "FusedMaxPoolConv2dBN", "FusedMaxPoolConv2dReLU",
             "FusedMaxPoolConv2dBNReLU", "FusedMaxPoolConv2dAbs", "FusedMaxPoolConv2dBNAbs",
             "MaxPool2d", "FusedAvgPoolConv2d", "FusedAvgPoolConv2dReLU",
             "FusedAvgPoolConv2dBNReLU", "FusedAvgPoolConv2dAbs", "FusedAvgPoolConv2dBNAbs",
             "AvgPool2d", "FusedConv2dReLU", "FusedConv2dBN", "FusedConv2dBNReLU",
             "FusedConv2dAbs", "DepthwiseConv2d", "FusedDepthwiseConv2dReLU",
             "FusedDepthwiseConv2dBNReLU", "FusedAvgPoolDepthwiseConv2d",
             "FusedAvgPoolDepthwiseConv2dReLU", "FusedAvgPoolDepthwiseConv2dBNReLU",
             "FusedMaxPoolDepthwiseConv2d", "FusedMaxPoolDepthwiseConv2dReLU",
             "FusedMaxPoolDepthwiseConv2dBNReLU", "ConvTranspose2d",
             "FusedConvTranspose2dReLU", "FusedConvTranspose2dAbs",
             "FusedConvTranspose2dBNReLU", "FusedMaxPoolConvTranspose2d",
             "FusedMaxPoolConvTranspose2dReLU", "FusedMaxPoolConvTranspose2dBNReLU",
             "FusedMaxPoolConvTranspose2dAbs", "FusedAvgPoolConvTranspose2d",
             "FusedAvgPoolConvTranspose2dReLU", "FusedAvgPoolConvTranspose2dBNReLU",
             "FusedAvgPoolConvTranspose2dAbs", "DepthwiseConvTranspose2d",
             "FusedDepthwiseConvTranspose2dReLU", "FusedDepthwiseConvTranspose2dBNReLU",
             "FusedAvgPoolDepthwiseConvTranspose2d", "FusedMaxPoolDepthwiseConvTranspose2d",
             "FusedMaxPoolDepthwiseConvTranspose2dBNReLU", "Linear", "FusedLinearReLU",
             "FusedLinearAbs", "Conv1d", "FusedMaxPoolConv1d", "FusedMaxPoolConv1dBN",
             "FusedMaxPoolConv1dReLU", "FusedMaxPoolConv1dBNReLU", "FusedMaxPoolConv1dAbs",
             "FusedMaxPoolConv1dBNAbs", "MaxPool1d", "FusedAvgPoolConv1d",
             "FusedAvgPoolConv1dReLU", "FusedAvgPoolConv1dBNReLU", "FusedAvgPoolConv1dAbs",
             "FusedAvgPoolConv1dBNAbs", "AvgPool1d", "FusedConv1dReLU", "FusedConv1dBNReLU",
             "FusedConv1dAbs", "FusedConv1dBNAbs"]
    missing = [n for n in names if not hasattr(ai8x, n)]
    assert missing == []
    for name in names:
        assert issubclass(getattr(ai8x, name), ai8x.QuantizationAwareModule), name
    for name in ("Add", "Sub", "BitwiseOr", "BitwiseXor", "Abs", "Empty", "SoftwareLinear",
                 "FusedSoftwareLinearReLU", "normalize", "fold", "set_device",
                 "update_model", "fuse_bn_layers", "initiate_qat", "quantize_model",
                 "hardware_params"):
        assert hasattr(ai8x, name), name


@pytest.mark.parametrize("make, op, pool, activation", [
    (lambda: ai8x.FusedMaxPoolConv2dBNReLU(3, 4, 3, padding=1), nn.Conv2d, nn.MaxPool2d,
     "ReLU"),
    (lambda: ai8x.FusedAvgPoolConv1dAbs(3, 4, 3), nn.Conv1d, nn.AvgPool1d, "Abs"),
    (lambda: ai8x.FusedConvTranspose2dReLU(3, 4, 3, stride=2, padding=1),
     nn.ConvTranspose2d, type(None), "ReLU"),
    (lambda: ai8x.Linear(8, 4, wide=True), nn.Linear, type(None), None),
    (lambda: ai8x.MaxPool2d(1, 2), type(None), nn.MaxPool2d, None),
    (lambda: ai8x.AvgPool1d(4), type(None), nn.AvgPool1d, None),
])
def test_layer_attributes(make, op, pool, activation) -> None:
    m = make()
    assert isinstance(m, ai8x.QuantizationAwareModule)
    assert isinstance(m.op, op) and isinstance(m.pool, pool)
    assert m.activation == activation and m.eltwise is None
    assert isinstance(m.wide, bool)
    for buf in ("output_shift", "weight_bits", "bias_bits", "quantize_activation",
                "adjust_output_shift", "shift_quantile"):
        assert getattr(m, buf).shape == (1,), buf


def test_depthwise_sets_groups_and_bn_variants_default_to_affine() -> None:
    m = ai8x.FusedDepthwiseConv2dBNReLU(8, 8, 3, padding=1)
    assert m.op.groups == 8 and m.bn.affine
    m = ai8x.FusedConv2dBN(8, 4, 3, padding=1, batchnorm="NoAffine")
    assert not m.bn.affine and m.activation is None


def test_hardware_params_of_a_narrow_layer() -> None:
    """bias memory = floor(stored / 2**(bits - 1)); accumulator bias = that * 128; final
    shift = stored + 8 - bits (golden README)."""
    m = ai8x.Conv2d(2, 2, 3, bias=True)
    m.op.weight.data = torch.ones(2, 2, 3, 3)
    m.op.bias.data = torch.tensor([-8.0, 13.0])  # 4-bit: 8 * bias value
    m.weight_bits.data = torch.tensor([4])
    m.output_shift.data = torch.tensor([-1.0])
    p = ai8x.hardware_params(m)
    assert p["weights"].dtype == np.int64 and p["weight_bits"] == 4
    np.testing.assert_array_equal(p["bias_hw"], [-1, 1])
    np.testing.assert_array_equal(p["bias"], [-128, 128])
    assert p["output_shift"] == -1 + 4
    m.op.weight.data = torch.full((2, 2, 3, 3), 0.5)
    with pytest.raises(ValueError, match="not integers"):
        ai8x.hardware_params(m)


def test_simulate_without_quantized_weights_is_refused() -> None:
    m = ai8x.FusedConv2dReLU(1, 1, 3)
    with ai8x.using_device(85, simulate=True), pytest.raises(Ai8xError) as err:
        m(torch.zeros(1, 1, 3, 3))
    assert "quantize_model" in err.value.render()


@pytest.mark.parametrize("data", [[0.5, -0.25], [200.0, 0.0], [-129.0, 3.0]])
def test_simulate_refuses_data_that_are_not_8_bit_integers(data) -> None:
    m = ai8x.MaxPool2d(1)
    x = torch.tensor(data).reshape(1, 1, 1, 2)
    with ai8x.using_device(85, simulate=True), pytest.raises(Ai8xError) as err:
        m(x)
    assert err.value.code == "ai8x_torch.layer" and "MaxPool2d" in err.value.render()


@pytest.mark.parametrize("make", [
    lambda: ai8x.Conv2d(2, 2, 3, weight_bits=3, bias_bits=3, quantize_activation=True),
    lambda: ai8x.Conv2d(2, 2, 3, wide=True, activation="ReLU"),
    lambda: ai8x.FusedConv2dBNReLU(2, 2, 3, bias=False),
    lambda: ai8x.Conv2d(2, 2, 3, pooling="Min"),
    lambda: ai8x.Conv2d(2, 2, 3, weight_bits=8),  # neither float nor QAT
    lambda: ai8x.Add()(torch.zeros(1)),
    lambda: ai8x.FusedMaxPoolConv2d(2, 2, 3, pool_size=17, pool_stride=1),
    lambda: ai8x.FusedMaxPoolConv1d(2, 2, 3, pool_size=2, pool_stride=17),
    lambda: ai8x.FusedAvgPoolConv2d(2, 2, 3, pool_size=2, pool_dilation=2),
    lambda: ai8x.Conv2d(4, 8, 3, groups=4),  # groups must equal in = out channels
])
def test_configuration_errors_are_user_errors(make) -> None:
    with pytest.raises(Ai8xError) as err:
        make()
    assert isinstance(err.value, ValueError)  # as code catching the vendor's errors expects
    assert err.value.diagnostics[0].hint
