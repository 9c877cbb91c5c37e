"""The data buffer in ai8x-ONNX (docs/design.md section 1, data buffer): the builder
writes it as state in / state out, the importer reads the same Network back, and
onnxruntime computes what one inference of the hardware does: shift, insert, read."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import custom_ops
from custom_ops.builder import build_model
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.importer.onnx_reader import read_model
from onnx2ai8x.network import DATA_BUFFER, DataBuffer, Layer, Network, Op

C, L, K = 8, 5, 1


def _layers(rng: np.random.Generator, k: int = K) -> tuple[Layer, Layer, Layer]:
    shift = Layer(name="shift", operator=Op.NONE, input_channels=C, output_channels=C,
                  input_dim=(L - k, 1), pooled_dim=(L - k, 1), output_dim=(L - k, 1),
                  quantization=0, in_sequences=(DATA_BUFFER,), buffer_shift=k)
    # k output positions of C channels: a 1 x k image
    conv = Layer(name="frame", operator=Op.CONV2D, input_channels=4, output_channels=C,
                 input_dim=(3, 2 + k), pooled_dim=(3, 2 + k), output_dim=(1, k),
                 kernel_size=(3, 3), output_shift=-3, in_sequences=(-1,),
                 weights=rng.integers(-128, 128, (C, 4, 3, 3)).astype(np.int8),
                 bias=rng.integers(-4000, 4000, C).astype(np.int64), buffer_insert=k)
    tcn = Layer(name="tcn", operator=Op.CONV1D, input_channels=C, output_channels=6,
                input_dim=(L, 1), pooled_dim=(L, 1), output_dim=(L - 2, 1),
                kernel_size=(3, 1), output_shift=-2, in_sequences=(DATA_BUFFER,),
                weights=rng.integers(-128, 128, (6, C, 3)).astype(np.int8))
    return shift, conv, tcn


def _network(layers, k: int = K) -> Network:
    return Network(layers=tuple(layers), input_shape=(4, 3, 2 + k), name="tcn_net",
                   data_buffer=DataBuffer("frames", C, L))


def _run(network: Network, feeds: dict) -> list[np.ndarray]:
    return custom_ops.session(build_model(network)).run(None, feeds)


@pytest.mark.parametrize("k", [1, 2])
def test_round_trip(k: int) -> None:
    net = _network(_layers(np.random.default_rng(k), k), k)
    back = read_model(build_model(net))
    assert back.data_buffer == net.data_buffer
    assert back.outputs == (2,)  # the buffer's state output is no output layer
    for a, b in zip(net.layers, back.layers, strict=True):
        for f in ("name", "operator", "in_sequences", "input_dim", "output_dim",
                  "buffer_shift", "buffer_insert", "input_channels", "output_channels"):
            assert getattr(a, f) == getattr(b, f), (a.name, f)


@pytest.mark.parametrize("k", [1, 2])
def test_one_inference_shifts_inserts_and_reads(k: int) -> None:
    """Checked against the layers run on their own: the frame layer alone on the input,
    the temporal layer alone on the updated buffer."""
    rng = np.random.default_rng(10 + k)
    shift, conv, tcn = _layers(rng, k)
    net = _network((shift, conv, tcn), k)
    x = rng.integers(-128, 128, (1, 4, 3, 2 + k)).astype(np.int8)
    state = rng.integers(-128, 128, (1, C, L)).astype(np.int8)
    out, nxt = _run(net, {"input": x, "frames": state})
    alone = Network(layers=(replace(conv, buffer_insert=0),), input_shape=(4, 3, 2 + k))
    (frame,) = _run(alone, {"input": x})
    assert nxt.shape == (1, C, L)
    np.testing.assert_array_equal(nxt[:, :, :L - k], state[:, :, k:])
    np.testing.assert_array_equal(nxt[:, :, L - k:], frame.reshape(1, C, k))
    temporal = Network(layers=(replace(tcn, in_sequences=(-1,)),), input_shape=(C, L))
    (want,) = _run(temporal, {"input": nxt})
    np.testing.assert_array_equal(out, want)
    # without a state fed, the buffer starts at zero (the C's first inference)
    out0, nxt0 = _run(net, {"input": x})
    assert not nxt0[:, :, :L - k].any()
    np.testing.assert_array_equal(nxt0[:, :, L - k:], frame.reshape(1, C, k))


def _code(net: Network) -> str:
    with pytest.raises(Ai8xError) as err:
        build_model(net)
    return err.value.diagnostics[0].code


def test_builder_refuses_other_orders() -> None:
    shift, conv, tcn = _layers(np.random.default_rng(3))
    assert _code(_network((conv, shift, tcn))) == "network.data-buffer"  # insert first
    assert _code(_network((shift, tcn, conv))) == "network.data-buffer"  # read first
    assert _code(_network((shift, replace(conv, buffer_insert=0), tcn))) == \
        "network.data-buffer"  # nothing inserted, reader reads a stale buffer
    assert _code(Network(layers=(shift, conv, tcn), input_shape=(4, 3, 3))) == \
        "network.data-buffer"  # no buffer declared
    # what a shift, insert or reader must be is legalize's one rule (limit.data-buffer)
    assert _code(_network((replace(shift, pool=(2, 1), pool_stride=(2, 1)), conv, tcn))) \
        == "limit.data-buffer"
    assert _code(_network((shift, replace(conv, output_channels=4), tcn))) == \
        "limit.data-buffer"
    with pytest.raises(Ai8xError, match="unique among the layer names"):
        build_model(replace(_network((shift, conv, tcn)),
                            data_buffer=DataBuffer("tcn", C, L)))


def test_importer_refuses_a_nonzero_initial_buffer() -> None:
    from onnx import numpy_helper

    model = build_model(_network(_layers(np.random.default_rng(4))))
    init = next(i for i in model.graph.initializer if i.name == "frames")
    init.CopyFrom(numpy_helper.from_array(np.ones((1, C, L), np.int8), "frames"))
    with pytest.raises(Ai8xError) as err:
        read_model(model)
    assert err.value.diagnostics[0].code == "model.data-buffer"
    assert "zeros" in err.value.diagnostics[0].message
