"""Built ai8x-ONNX models vs the plain numpy layer executor (custom_ops/numpy_ref.py).

Every layer kind and option of docs/design.md section 1, one small network each; every
model must pass `onnx.checker.check_model(full_check=True)`.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import custom_ops
from custom_ops import numpy_ref
from custom_ops.builder import build_model
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.network import (
    ACT_ABS,
    ACT_RELU,
    ELTWISE_ADD,
    ELTWISE_MUL,
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


def _weights(rng, shape, bits):
    if bits == -1:
        return rng.choice([-1, 1], size=shape)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1)
    return rng.integers(lo, hi, size=shape)


def _pooled(n, p, s, d):
    # The vendor's count of pooled outputs (izer/simulate.py pooling_layer).
    return (n + s - p - d + 1) // s


def conv2d(name, cin, cout, dim, *, k=3, pad=1, stride=1, dil=1, groups=1, pool=1,
           pool_stride=None, pool_dil=1, avg=False, bias=True, bits=8, shift=0,
           act=None, width=8, rng, **extra):
    ps = pool_stride or pool
    pooled = (_pooled(dim[0], pool, ps, pool_dil), _pooled(dim[1], pool, ps, pool_dil)) \
        if pool > 1 else ((dim[0] - 1) // ps + 1, (dim[1] - 1) // ps + 1)
    out = tuple((p + 2 * pad - dil * (k - 1) - 1) // stride + 1 for p in pooled)
    return Layer(name=name, operator=OP_CONV2D, input_channels=cin, output_channels=cout,
                 input_dim=dim, pooled_dim=pooled, output_dim=out, kernel_size=(k, k),
                 padding=(pad, pad), stride=(stride, stride), dilation=(dil, dil),
                 conv_groups=groups, pool=(pool, pool), pool_stride=(ps, ps),
                 pool_dilation=(pool_dil, pool_dil), pool_average=avg, activation=act,
                 output_shift=shift + (8 - abs(bits) if bits != -1 else 7), quantization=bits,
                 output_width=width,
                 weights=_weights(rng, (cout, cin // groups, k, k), bits),
                 bias=rng.integers(-128, 128, cout) * 128 if bias else None, **extra)


def _check(net: Network, samples: int = 3, seed: int = 0, **build):
    model = build_model(net, **build)
    onnx.checker.check_model(model, full_check=True)
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, size=(samples, *net.input_shape))
    x[0] = 127
    if samples > 1:
        x[1] = -128
    got = custom_ops.run(model, x)
    for n in range(samples):
        want = numpy_ref.run_network(net, x[n], avg_pool_rounding=build.get(
            "avg_pool_rounding", False))
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g[n].astype(np.int64), w.reshape(g[n].shape))
            assert g.dtype == (np.int32 if g.dtype == np.int32 else np.int8)
    return model, got


@pytest.mark.parametrize("act", [None, ACT_RELU, ACT_ABS])
@pytest.mark.parametrize("shift", [-3, 0, 2])
def test_conv2d_activation_shift(act, shift):
    rng = np.random.default_rng(1)
    net = Network((conv2d("c", 5, 7, (6, 6), act=act, shift=shift, rng=rng),), (5, 6, 6))
    _check(net)


@pytest.mark.parametrize("bits", [1, 2, 4, 8, -1])
def test_weight_bits(bits):
    rng = np.random.default_rng(abs(bits))
    net = Network((conv2d("c", 4, 6, (5, 5), bits=bits, rng=rng),), (4, 5, 5))
    model, _ = _check(net)
    node = next(n for n in model.graph.node if n.op_type == "OutputShift")
    wb = next(a.i for a in node.attribute if a.name == "weight_bits")
    assert wb == bits


@pytest.mark.parametrize(("k", "pad", "stride", "dil"),
                         [(1, 0, 1, 1), (3, 0, 1, 1), (3, 2, 1, 2), (3, 1, 2, 1), (5, 2, 1, 1)])
def test_conv2d_geometry(k, pad, stride, dil):
    rng = np.random.default_rng(k * 10 + pad)
    net = Network((conv2d("c", 3, 4, (9, 7), k=k, pad=pad, stride=stride, dil=dil,
                          bias=False, rng=rng),), (3, 9, 7))
    _check(net)


def test_depthwise_groups():
    rng = np.random.default_rng(2)
    net = Network((conv2d("dw", 8, 8, (6, 6), groups=8, rng=rng),
                   conv2d("g2", 8, 4, (6, 6), groups=2, rng=rng, act=ACT_RELU)), (8, 6, 6))
    _check(net)


@pytest.mark.parametrize(("pool", "stride", "dil", "avg"), [
    (2, 2, 1, False), (2, 2, 1, True), (3, 3, 1, True), (3, 2, 1, False), (4, 4, 1, True),
    (1, 2, 1, False), (1, 3, 1, False), (2, 1, 2, False), (2, 2, 3, True), (3, 1, 1, True)])
def test_pooling(pool, stride, dil, avg):
    rng = np.random.default_rng(pool * 7 + stride)
    net = Network((conv2d("c", 4, 5, (12, 12), pool=pool, pool_stride=stride, pool_dil=dil,
                          avg=avg, rng=rng),), (4, 12, 12))
    _check(net)


def test_avg_pool_rounding_option():
    rng = np.random.default_rng(3)
    net = Network((conv2d("c", 3, 3, (8, 8), pool=2, avg=True, k=1, pad=0, rng=rng),),
                  (3, 8, 8))
    _, trunc = _check(net)
    _, near = _check(net, avg_pool_rounding=True)
    assert not np.array_equal(trunc[0], near[0])  # the option makes a difference here


def _conv1d(name, cin, cout, length, *, k=3, pad=1, dil=1, stride=1, pool=1, pool_stride=None,
            pool_dil=1, avg=False, act=None, bits=8, groups=1, rng):
    ps = pool_stride or pool
    pooled = _pooled(length, pool, ps, pool_dil) if pool > 1 else (length - 1) // ps + 1
    out = (pooled + 2 * pad - dil * (k - 1) - 1) // stride + 1
    return Layer(name=name, operator=OP_CONV1D, input_channels=cin, output_channels=cout,
                 input_dim=(length, 1), pooled_dim=(pooled, 1), output_dim=(out, 1),
                 kernel_size=(k, 1), padding=(pad, 0), stride=(stride, 1),
                 dilation=(dil, 1), conv_groups=groups, pool=(pool, 1),
                 pool_stride=(ps, 1), pool_dilation=(pool_dil, 1), pool_average=avg,
                 activation=act, output_shift=8 - bits, quantization=bits,
                 weights=_weights(rng, (cout, cin // groups, k), bits),
                 bias=rng.integers(-128, 128, cout) * 128)


@pytest.mark.parametrize(("k", "pad", "dil", "pool", "pdil", "avg", "act"), [
    (3, 1, 1, 1, 1, False, None), (5, 0, 7, 1, 1, False, ACT_ABS), (1, 0, 1, 2, 1, False, None),
    (3, 1, 1, 3, 1, True, ACT_RELU), (3, 1, 1, 3, 2, False, None), (3, 1, 1, 3, 2, True, None),
    (9, 4, 1, 4, 1, True, None)])
def test_conv1d(k, pad, dil, pool, pdil, avg, act):
    rng = np.random.default_rng(k + dil + pool)
    first = _conv1d("c", 6, 5, 60, k=k, pad=pad, dil=dil, pool=pool, pool_dil=pdil, avg=avg,
                    act=act, rng=rng)
    # a second layer reads the first one's output length
    second = _conv1d("d", 5, 3, first.output_dim[0], k=1, pad=0, rng=rng, bits=4)
    _check(Network((first, second), (6, 60)))


@pytest.mark.parametrize(("k", "pad", "opad", "groups"), [
    (3, 1, 1, 1), (3, 0, 0, 1), (3, 2, 1, 1), (3, 1, 1, 4), (2, 0, 0, 1)])
def test_convtranspose2d(k, pad, opad, groups):
    rng = np.random.default_rng(k + pad + groups)
    cin, cout, h, w = 4, 4 if groups > 1 else 6, 5, 7
    out = ((h - 1) * 2 - 2 * pad + (k - 1) + opad + 1, (w - 1) * 2 - 2 * pad + (k - 1) + opad + 1)
    lay = Layer(name="up", operator=OP_CONVTRANSPOSE2D, input_channels=cin,
                output_channels=cout, input_dim=(h, w), pooled_dim=(h, w), output_dim=out,
                kernel_size=(k, k), padding=(pad, pad), stride=(2, 2), conv_groups=groups,
                output_padding=(opad, opad), activation=ACT_RELU, output_shift=-1,
                weights=rng.integers(-128, 128, (cin, cout // groups, k, k)),
                bias=rng.integers(-128, 128, cout) * 128)
    _check(Network((lay,), (cin, h, w)))


def _linear(name, cin, cout, dim=(1, 1), *, flatten=False, width=8, act=None, bits=8, rng,
            pool=1):
    pooled = (dim[0] // pool, dim[1] // pool)
    fan_in = cin * pooled[0] * pooled[1]
    return Layer(name=name, operator=OP_LINEAR, input_channels=cin, output_channels=cout,
                 input_dim=dim, pooled_dim=pooled, output_dim=(1, 1), kernel_size=(1, 1),
                 flatten=flatten, output_width=width, activation=act, pool=(pool, pool),
                 pool_stride=(pool, pool), output_shift=8 - bits, quantization=bits,
                 weights=_weights(rng, (cout, fan_in), bits),
                 bias=rng.integers(-128, 128, cout) * 128)


@pytest.mark.parametrize("width", [8, 32])
def test_linear_flatten_and_wide(width):
    rng = np.random.default_rng(width)
    net = Network((conv2d("c", 3, 8, (4, 4), rng=rng, act=ACT_RELU),
                   _linear("fc1", 8, 20, (4, 4), flatten=True, rng=rng, pool=2, act=ACT_RELU),
                   _linear("fc2", 20, 10, rng=rng, width=width, bits=4)), (3, 4, 4))
    _, got = _check(net)
    assert got[0].shape == (3, 10, 1, 1)
    assert got[0].dtype == (np.int32 if width == 32 else np.int8)


def test_wide_conv_output_is_raw_accumulator():
    rng = np.random.default_rng(9)
    lay = conv2d("c", 16, 4, (3, 3), rng=rng, width=32)
    net = Network((lay,), (16, 3, 3))
    _, got = _check(net)
    # A plainly written accumulator: sum over taps of data*weight plus the bias.
    x = np.full((16, 3, 3), 127)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    want = np.array([[[int((xp[:, r:r + 3, c:c + 3] * lay.weights[o]).sum()) + int(lay.bias[o])
                       for c in range(3)] for r in range(3)] for o in range(4)])
    np.testing.assert_array_equal(got[0][0], want)


def _passthrough(name, c, dim, *, operands=1, eltwise=0, pool=1, pool_stride=None, avg=False,
                 in_seq=None, pool_first=True, width=8, shift=0):
    ps = pool_stride or pool
    pooled = (_pooled(dim[0], pool, ps, 1), _pooled(dim[1], pool, ps, 1)) if pool > 1 \
        else ((dim[0] - 1) // ps + 1, (dim[1] - 1) // ps + 1)
    return Layer(name=name, operator=OP_NONE, input_channels=c, output_channels=c,
                 input_dim=dim, pooled_dim=pooled, output_dim=pooled, pool=(pool, pool),
                 pool_stride=(ps, ps), pool_average=avg, eltwise=eltwise, operands=operands,
                 in_sequences=in_seq, pool_first=pool_first, output_width=width,
                 output_shift=shift, quantization=0)


def test_passthrough_and_pool_only():
    rng = np.random.default_rng(4)
    net = Network((conv2d("c", 3, 4, (8, 8), rng=rng),
                   _passthrough("p", 4, (8, 8)),
                   _passthrough("mp", 4, (8, 8), pool=2),
                   _passthrough("ap", 4, (4, 4), pool=2, avg=True)), (3, 8, 8))
    model, _ = _check(net)
    names = {n.name for n in model.graph.node}
    assert {"c", "p", "mp", "ap"} <= names


@pytest.mark.parametrize("eltwise", [ELTWISE_ADD, ELTWISE_SUB, ELTWISE_MUL, ELTWISE_OR,
                                     ELTWISE_XOR])
@pytest.mark.parametrize("operands", [2, 3, 16])
def test_eltwise(eltwise, operands):
    if eltwise == ELTWISE_MUL and operands == 16:
        pytest.skip("a product of 16 int8 values overflows the vendor's own int64 arithmetic")
    c = 4
    # operands come from one concatenated input split into equal parts
    net = Network((_passthrough("e", c, (5, 5), operands=operands, eltwise=eltwise,
                                shift=1),), (c * operands, 5, 5))
    _check(net)


@pytest.mark.parametrize("pool_first", [True, False])
@pytest.mark.parametrize("avg", [False, True])
def test_eltwise_with_pool_and_conv(pool_first, avg):
    rng = np.random.default_rng(5)
    a = conv2d("a", 3, 6, (8, 8), rng=rng, act=ACT_RELU)
    b = conv2d("b", 3, 6, (8, 8), rng=rng, in_sequences=(-1,))
    res = conv2d("res", 6, 5, (8, 8), pool=2, avg=avg, rng=rng, eltwise=ELTWISE_ADD,
                 operands=2, in_sequences=(0, 1), pool_first=pool_first)
    _check(Network((a, b, res), (3, 8, 8)))


def test_concatenation_and_multiple_outputs():
    rng = np.random.default_rng(6)
    a = conv2d("a", 3, 4, (6, 6), rng=rng)
    b = conv2d("b", 3, 5, (6, 6), rng=rng, in_sequences=(-1,), act=ACT_ABS)
    cat = conv2d("cat", 9, 2, (6, 6), rng=rng, in_sequences=(0, 1))
    side = conv2d("side", 4, 3, (6, 6), rng=rng, in_sequences=(0,), width=32, k=1, pad=0)
    model, got = _check(Network((a, b, cat, side), (3, 6, 6)))
    assert [o.name for o in model.graph.output] == ["cat/output", "side/output"]
    assert got[1].dtype == np.int32


def test_worst_case_1024_channels_is_exact():
    # 1024 input channels of -128 data and -128 weights, 3x3: every accumulator is
    # 1024 * 9 * 16384 = 150,994,944 (beyond float32's 2**24 exact range).
    lay = Layer(name="big", operator=OP_CONV2D, input_channels=1024, output_channels=2,
                input_dim=(3, 3), pooled_dim=(3, 3), output_dim=(1, 1), kernel_size=(3, 3),
                output_width=32, weights=np.full((2, 1024, 3, 3), -128))
    net = Network((lay,), (1024, 3, 3))
    model = build_model(net)
    onnx.checker.check_model(model, full_check=True)
    got = custom_ops.run(model, np.full((1024, 3, 3), -128))
    assert got[0].reshape(-1).tolist() == [1024 * 9 * 128 * 128] * 2
    lay8 = Layer(name="big8", operator=OP_CONV2D, input_channels=1024, output_channels=1,
                 input_dim=(3, 3), pooled_dim=(3, 3), output_dim=(1, 1), kernel_size=(3, 3),
                 output_shift=-15, weights=np.full((1, 1024, 3, 3), -128),
                 bias=np.array([-128 * 128 + 127]))
    net8 = Network((lay8,), (1024, 3, 3))
    out = custom_ops.run(build_model(net8), np.full((1024, 3, 3), -128))[0]
    acc = 1024 * 9 * 128 * 128 - 128 * 128 + 127
    assert int(out.reshape(-1)[0]) == min((acc + 64 * 2 ** 15) // (128 * 2 ** 15), 127)


def test_names_metadata_and_opsets():
    rng = np.random.default_rng(7)
    net = Network((conv2d("conv1", 3, 4, (4, 4), rng=rng, act=ACT_RELU),
                   _linear("fc", 4, 3, (4, 4), flatten=True, rng=rng, width=32)), (3, 4, 4),
                  device="MAX78000", name="tiny")
    model = build_model(net, layer_metadata={"fc": {"ai8x.sidecar": "{}"}}, doc="hello")
    onnx.checker.check_model(model, full_check=True)
    nodes = {n.name: n for n in model.graph.node}
    assert nodes["conv1"].op_type == "ConvInteger"
    assert nodes["fc"].op_type == "MatMulInteger"
    meta = {p.key: p.value for p in nodes["fc"].metadata_props}
    # the wide flattening layer also records what no node shows (its shift, weight bits,
    # and flatten) for the reader
    assert meta == {"ai8x.layer_index": "1", "ai8x.operator": "linear", "ai8x.sidecar": "{}",
                    "ai8x.flatten": "true", "ai8x.output_shift": "0", "ai8x.weight_bits": "8"}
    assert {p.key: p.value for p in nodes["conv1"].metadata_props}["ai8x.operator"] == "conv2d"
    for name in nodes:
        assert name in ("conv1", "fc") or name.split("/")[0] in ("conv1", "fc"), name
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 19), ("ai8x", 1)}
    assert {f.name for f in model.functions} == {"OutputShift", "Clamp", "PoolRound"}
    assert {p.key: p.value for p in model.metadata_props} == {"ai8x.device": "MAX78000"}
    inits = {i.name: i for i in model.graph.initializer}
    assert inits["conv1.weight"].data_type == onnx.TensorProto.INT8
    assert inits["conv1.bias"].data_type == onnx.TensorProto.INT32
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT8
    assert model.doc_string == "hello"


def test_build_is_deterministic():
    rng = np.random.default_rng(8)
    net = Network((conv2d("c", 3, 4, (4, 4), rng=rng, pool=2, avg=True),), (3, 4, 4))
    assert build_model(net).SerializeToString() == build_model(net).SerializeToString()


def test_bad_weights_are_user_errors():
    rng = np.random.default_rng(10)
    lay = conv2d("c", 3, 4, (4, 4), rng=rng)
    bad = Layer(**{**{f: getattr(lay, f) for f in lay.__dataclass_fields__},
                   "weights": np.full((4, 3, 3, 3), 300)})
    with pytest.raises(Ai8xError) as err:
        build_model(Network((bad,), (3, 4, 4)))
    assert err.value.code == "layer.weights-range"
    assert "c" in err.value.render()


def test_run_rejects_out_of_range_input():
    rng = np.random.default_rng(11)
    model = build_model(Network((conv2d("c", 3, 4, (4, 4), rng=rng),), (3, 4, 4)))
    with pytest.raises(Ai8xError):
        custom_ops.run(model, np.full((3, 4, 4), 200))
    with pytest.raises(Ai8xError):
        custom_ops.run(model, np.zeros((3, 5, 4)))


def test_dilated_pool_side_of_one_is_refused():
    # A 2x1 pool window with dilation 2: the vendor counts 6 columns of 7 (it subtracts
    # the dilation on the side of one pixel as well); no case shows which the hardware
    # writes, so the builder refuses instead of slicing (random differential 1399).
    rng = np.random.default_rng(3)
    lay = conv2d("p", 2, 2, (7, 7), k=1, pad=0, rng=rng)
    pooled = (_pooled(7, 2, 1, 2), _pooled(7, 1, 1, 2))
    lay = Layer(**{**lay.__dict__, "pool": (2, 1), "pool_stride": (1, 1),
                   "pool_dilation": (2, 2), "pooled_dim": pooled, "output_dim": pooled})
    with pytest.raises(Ai8xError) as info:
        build_model(Network((lay,), (2, 7, 7)))
    assert info.value.diagnostics[0].code == "layer.pool-window"
    assert "side of 1" in info.value.diagnostics[0].message
    # The same window without the dilation on its side of one builds.
    ok = Layer(**{**lay.__dict__, "pool_dilation": (2, 1),
                  "pooled_dim": (_pooled(7, 2, 1, 2), 7), "output_dim": (_pooled(7, 2, 1, 2), 7)})
    _check(Network((ok,), (2, 7, 7)))
