"""ONNX -> Network: round trips through custom_ops.builder and the reader's errors."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import fields, replace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.network import (
    ACT_ABS,
    ACT_RELU,
    ELTWISE_ADD,
    ELTWISE_OR,
    ELTWISE_SUB,
    ELTWISE_XOR,
    OP_CONV1D,
    OP_NONE,
    Layer,
    Network,
)
from tests.legalize.builders import (
    conv1d,
    conv2d,
    convtranspose2d,
    linear,
    network,
    passthrough,
    weights_for,
)

builder = pytest.importorskip("custom_ops.builder")
from onnx2ai8x.importer.onnx_reader import read_model, read_model_full  # noqa: E402


def _same(u, v) -> bool:
    if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
        if u is None or v is None:
            return u is None and v is None
        u, v = np.asarray(u), np.asarray(v)
        return u.shape == v.shape and np.array_equal(u, v)
    return u == v


def layer_differences(want: Network, got: Network) -> list[tuple[int, str, str]]:
    """(index, layer, field) of every field that differs; in_sequences None is the
    previous layer (the builder's and the vendor's reading)."""
    out = []
    if len(want.layers) != len(got.layers):
        return [(-1, "", f"{len(want.layers)} vs {len(got.layers)} layers")]
    for i, (a, b) in enumerate(zip(want.layers, got.layers, strict=True)):
        for f in fields(Layer):
            u, v = getattr(a, f.name), getattr(b, f.name)
            if f.name == "in_sequences":
                u = (i - 1,) if u is None else tuple(u)
                v = (i - 1,) if v is None else tuple(v)
            if not _same(u, v):
                out.append((i, a.name, f.name))
    if tuple(want.input_shape) != tuple(got.input_shape):
        out.append((-1, "", "input_shape"))
    return out


def round_trip(net: Network, **kw) -> Network:
    model = builder.build_model(net, **kw)
    onnx.checker.check_model(model)
    return read_model(model)


def _rnd(shape, bits=8, seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = (-1, 2) if bits == -1 else (-(1 << (bits - 1)), 1 << (bits - 1))
    w = rng.integers(lo, hi, size=shape)
    if bits == -1:
        w = np.where(w >= 0, 1, -1)
    return w


def _w(layer: Layer, bits: int = 8, seed: int = 0) -> Layer:
    return replace(layer, weights=_rnd(weights_for(layer).shape, bits, seed))


def _bias(layer: Layer, seed: int = 1) -> Layer:
    hw = np.random.default_rng(seed).integers(-128, 128, size=layer.output_channels)
    return replace(layer, bias=hw * 128, bias_hw=hw)


SYNTHETIC = {
    "conv2d-bias-relu": lambda: network(_bias(_w(conv2d("c", activation=ACT_RELU,
                                                        output_shift=-2)))),
    "conv2d-1x1-abs": lambda: network(_w(conv2d("c", kernel_size=(1, 1), padding=(0, 0),
                                                activation=ACT_ABS, weights=None))),
    "maxpool-conv2d": lambda: network(_w(conv2d(
        "c", dim=16, pool=(2, 2), pool_stride=(2, 2), pooled_dim=(8, 8), output_dim=(8, 8)))),
    "avgpool-conv2d-nonsquare": lambda: network(_w(conv2d(
        "c", dim=12, pool=(3, 2), pool_stride=(2, 2), pooled_dim=(5, 6), pool_average=True,
        output_dim=(5, 6)))),
    "stride-only-pool": lambda: network(_w(conv2d(
        "c", dim=16, pool=(1, 1), pool_stride=(2, 2), pooled_dim=(8, 8), output_dim=(8, 8)))),
    "conv1d-pool-q4": lambda: network(_w(conv1d(
        "c", length=40, pool=(2, 1), pool_stride=(2, 1), pooled_dim=(20, 1),
        output_dim=(20, 1), quantization=4, output_shift=4, kernel_size=(5, 1),
        padding=(2, 0)), bits=4)),
    "conv1d-dilation": lambda: network(_w(conv1d(
        "c", kernel_size=(3, 1), padding=(0, 0), dilation=(7, 1), length=40,
        output_dim=(26, 1)))),
    "convtranspose2d": lambda: network(_bias(_w(convtranspose2d("up", 4, 8)))),
    "depthwise-binary": lambda: network(_w(conv2d(
        "dw", 16, 16, conv_groups=16, quantization=-1, output_shift=7), bits=-1)),
    "conv-then-linear-flatten-wide": lambda: network(
        _w(conv2d("c", 4, 8, 4)),
        _bias(_w(linear("fc", 8, 10, input_dim=(4, 4), pooled_dim=(4, 4), flatten=True,
                        quantization=2, output_shift=6), bits=2))),
    "linear-chain": lambda: network(
        _w(linear("fc1", 32, 16, activation=ACT_RELU)), _w(linear("fc2", 16, 4)),
        input_shape=(32, 1, 1)),
    "passthrough-avgpool": lambda: network(passthrough(
        "p", 8, 8, pool=(2, 2), pool_stride=(2, 2), pooled_dim=(4, 4), output_dim=(4, 4),
        pool_average=True), input_shape=(8, 8, 8)),
    "eltwise-add-two-layers": lambda: network(
        _w(conv2d("a")), _w(conv2d("b", in_sequences=(-1,)), seed=3),
        passthrough("sum", 8, 8, eltwise=ELTWISE_ADD, operands=2, in_sequences=(0, 1))),
    "eltwise-sub-from-input": lambda: network(passthrough(
        "sub", 4, 8, eltwise=ELTWISE_SUB, operands=2), input_shape=(8, 8, 8)),
    "eltwise-xor-3": lambda: network(
        _w(conv2d("a")), _w(conv2d("b", in_sequences=(-1,)), seed=2),
        _w(conv2d("c", in_sequences=(-1,)), seed=4),
        passthrough("x", 8, 8, eltwise=ELTWISE_XOR, operands=3, in_sequences=(0, 1, 2))),
    "eltwise-or-pool-first": lambda: network(
        _w(conv2d("a")), _w(conv2d("b", in_sequences=(-1,)), seed=2),
        _w(conv2d("c", 8, 8, eltwise=ELTWISE_OR, operands=2, in_sequences=(0, 1),
                  pool=(2, 2), pool_stride=(2, 2), pooled_dim=(4, 4), output_dim=(4, 4)))),
    "eltwise-add-pool-last-fused": lambda: network(
        _w(conv2d("a")), _w(conv2d("b", in_sequences=(-1,)), seed=2),
        _w(conv2d("c", 8, 8, eltwise=ELTWISE_ADD, operands=2, in_sequences=(0, 1),
                  pool=(2, 2), pool_stride=(2, 2), pooled_dim=(4, 4), output_dim=(4, 4),
                  pool_first=False))),
    "concat": lambda: network(
        _w(conv2d("a", 4, 4)), _w(conv2d("b", 4, 4, in_sequences=(-1,)), seed=2),
        _w(conv2d("cat", 8, 8, in_sequences=(0, 1)))),
    "reshape-2d-to-1d": lambda: network(
        _w(conv2d("c", 4, 8, 8)),
        _w(conv1d("c1", 8, 8, 64, in_sequences=(0,)))),
    "multi-output": lambda: network(
        _w(conv2d("a")), _w(conv2d("b", 8, 8)), _w(conv2d("side", 8, 4, in_sequences=(0,)))),
}


@pytest.mark.parametrize("case", sorted(SYNTHETIC))
def test_round_trip(case):
    net = SYNTHETIC[case]()
    back = round_trip(net)
    assert layer_differences(net, back) == []
    assert back.layers[0].name == net.layers[0].name


def test_round_trip_wide_output_with_metadata():
    # A wide layer ends with the raw accumulator: no ai8x.OutputShift node carries the
    # shift and weight width, so they travel as metadata of the main node.
    fc = _w(linear("fc", 16, 10, quantization=4, output_shift=3, output_width=32), bits=4)
    net = network(fc, input_shape=(16, 1, 1))
    meta = {"fc": {"ai8x.output_shift": "3", "ai8x.weight_bits": "4"}}
    back = round_trip(net, layer_metadata=meta)
    assert layer_differences(net, back) == []


def test_flatten_of_1x1_data_needs_metadata():
    """1x1 data leaves no Flatten node: the builder records `ai8x.flatten` instead."""
    fc = _w(linear("fc", 12, 10, flatten=True))
    net = network(fc, input_shape=(12, 1, 1))
    model = builder.build_model(net)
    main = next(n for n in model.graph.node if n.name == "fc")
    assert {p.key: p.value for p in main.metadata_props}["ai8x.flatten"] == "true"
    assert layer_differences(net, round_trip(net)) == []
    del main.metadata_props[:]
    assert layer_differences(net, read_model(model)) == [(0, "fc", "flatten")]


def test_metadata_device_and_sidecar_json():
    net = network(_w(conv2d("c")), device="MAX78002")
    meta = {"c": {"ai8x.sidecar": '{"processors": 15, "out_offset": 8192}'}}
    got = read_model_full(builder.build_model(net, layer_metadata=meta))
    assert got.network.device == "MAX78002"
    assert got.sidecar["c"] == {"processors": 15, "out_offset": 8192}
    assert got.metadata["c"]["ai8x.operator"] == "conv2d"


def test_read_from_path(tmp_path):
    net = network(_w(conv2d("c")))
    path = tmp_path / "m.onnx"
    onnx.save(builder.build_model(net), str(path))
    assert layer_differences(net, read_model(path)) == []


def test_passthrough_and_1d_fields():
    net = SYNTHETIC["reshape-2d-to-1d"]()
    back = round_trip(net)
    assert back.layers[1].operator == OP_CONV1D
    assert back.layers[1].input_dim == (64, 1)
    p = round_trip(SYNTHETIC["passthrough-avgpool"]()).layers[0]
    assert p.operator == OP_NONE and p.pool_average and p.pooled_dim == (4, 4)


# --------------------------------------------------------------------------- errors


def _graph_model(nodes, inits=(), in_shape=(1, 4, 8, 8), out_shape=None, in_type=None,
                 out_type=TensorProto.INT8):
    x = helper.make_tensor_value_info("input", in_type or TensorProto.INT8,
                                      ["N", *in_shape[1:]])
    y = helper.make_tensor_value_info(nodes[-1].output[0], out_type,
                                      None if out_shape is None else ["N", *out_shape[1:]])
    g = helper.make_graph(nodes, "g", [x], [y], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def test_unreadable_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a protobuf \xff\xfe")
    with pytest.raises(Ai8xError) as info:
        read_model(bad)
    assert info.value.code == "model.unreadable"


def test_float_conv_is_unsupported_and_named():
    w = onnx.numpy_helper.from_array(np.ones((8, 4, 3, 3), np.float32), "w")
    conv = helper.make_node("Conv", ["xf", "w"], ["y"], name="features.0", pads=[1, 1, 1, 1])
    cast = helper.make_node("Cast", ["input"], ["xf"], name="features.0/cast", to=1)
    model = _graph_model([cast, conv], [w], out_type=TensorProto.FLOAT)
    with pytest.raises(Ai8xError) as info:
        read_model(model)
    d = info.value.diagnostics[0]
    assert d.code == "model.unsupported-op" and d.where == "features.0"
    assert "Conv" in d.message and "ai8x_torch" in d.hint


def test_unnamed_node():
    ident = helper.make_node("Identity", ["input"], ["y"])
    with pytest.raises(Ai8xError) as info:
        read_model(_graph_model([ident], out_shape=(1, 4, 8, 8)))
    assert info.value.code == "model.unnamed-node"


def test_pool_padding_rejected():
    pool = helper.make_node("MaxPool", ["input"], ["y"], name="p", kernel_shape=[2, 2],
                            strides=[2, 2], pads=[1, 1, 1, 1])
    with pytest.raises(Ai8xError) as info:
        read_model(_graph_model([pool], out_shape=(1, 4, 5, 5)))
    d = info.value.diagnostics[0]
    assert d.code == "limit.pool-padding" and d.where == "p"


def test_asymmetric_conv_padding_rejected():
    net = network(_w(conv2d("c")))
    model = builder.build_model(net)
    for node in model.graph.node:
        if node.op_type == "ConvInteger":
            for a in node.attribute:
                if a.name == "pads":
                    a.ints[:] = [1, 1, 0, 0]
    with pytest.raises(Ai8xError) as info:
        read_model(model)
    assert info.value.diagnostics[0].where == "c"
    assert "padding" in info.value.diagnostics[0].message


def test_two_inputs_rejected():
    a = helper.make_tensor_value_info("a", TensorProto.INT8, ["N", 4, 8, 8])
    b = helper.make_tensor_value_info("b", TensorProto.INT8, ["N", 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.INT8, ["N", 4, 8, 8])
    node = helper.make_node("BitwiseOr", ["a", "b"], ["y"], name="o")
    model = helper.make_model(helper.make_graph([node], "g", [a, b], [y]),
                              opset_imports=[helper.make_opsetid("", 19)])
    with pytest.raises(Ai8xError) as info:
        read_model(model)
    assert info.value.code == "model.inputs"


def test_reader_does_not_import_torch():
    code = ("import sys, onnx2ai8x.importer.onnx_reader, onnx2ai8x.legalize, "
            "onnx2ai8x.devices; sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_constant_nodes_are_read_like_initializers():
    # Exporters may write shapes as Constant nodes instead of initializers; the reader
    # (after an optional onnxsim pass) must see the same network.
    net = SYNTHETIC["reshape-2d-to-1d"]()
    model = builder.build_model(net)
    moved = []
    for init in list(model.graph.initializer):
        if init.data_type == TensorProto.INT64:
            moved.append(helper.make_node("Constant", [], [init.name],
                                          name=f"{init.name}/const", value=init))
            model.graph.initializer.remove(init)
    assert moved
    rest = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(moved + rest)
    assert layer_differences(net, read_model(model)) == []


def _two_layer_model():
    lay = passthrough("a", 2, 4)
    return builder.build_model(network(lay, replace(lay, name="b")))


@pytest.mark.parametrize("break_it,where,says", [
    (lambda m: m.graph.node.reverse(), "", "topological order"),
    (lambda m: m.graph.node[1].output.__setitem__(0, m.graph.node[0].output[0]), "",
     "produced twice"),
    (lambda m: m.opset_import.pop(0), "model", "no opset"),
    (lambda m: m.graph.output[0].__setattr__("name", "nowhere"), "nowhere",
     "not produced"),
])
def test_graph_structure_errors_name_the_node(break_it, where, says):
    from onnx2ai8x import onnxpb

    model = onnxpb.from_onnx(_two_layer_model())
    break_it(model)
    with pytest.raises(Ai8xError) as info:
        read_model(model)
    assert info.value.code == "model.invalid"
    assert says in info.value.render() and where in info.value.render()


def test_check_command_runs_the_onnx_checker(tmp_path, capsys):
    from onnx2ai8x.cli import main

    model = _two_layer_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    assert main(["check", str(path), "-d", "MAX78000", "--quiet"]) == 0
    model.graph.node[0].attribute.add(name="bogus")  # an attribute without a type
    onnx.save(model, str(path))
    code = main(["check", str(path), "-d", "MAX78000", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and "model.invalid" in err and "checker" in err
