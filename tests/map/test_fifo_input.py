"""FIFO input (--fifo) carries at most 16 HWC channels: four FIFOs of four channels.

A wider input used to be spread over FIFOs 4, 5, ... that do not exist, a processor map
past processor 63, and the kernel search then indexed processor 64 (issue 35: `convert
--fifo` of a 32-channel 1x1 network with --avg-pool-rounding ended in an IndexError).
"""
from __future__ import annotations

import numpy as np
import pytest

from onnx2ai8x.devices import MAX78000, MAX78002
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.map.auto import auto_map
from onnx2ai8x.network import Network
from tests.map.test_auto import conv


@pytest.mark.parametrize("device", [MAX78000, MAX78002], ids=lambda d: d.name)
@pytest.mark.parametrize("channels", [17, 32, 64])
def test_fifo_input_wider_than_the_fifos_is_refused(device, channels):
    net = Network(layers=(conv("c0", channels, 16, 8, (-1,), k=1),),
                  input_shape=(channels, 8, 8), device=device.name, name="wide")
    with pytest.raises(Ai8xError) as err:
        auto_map(net, device, fifo=True)
    assert err.value.code == "map.fifo-channels"
    text = err.value.render()
    assert f"{channels} input channels" in text and "at most 16" in text
    assert "drop --fifo" in text
    # without --fifo the same network maps
    assert auto_map(net, device).placement.layers[0].processor_map


def test_sixteen_fifo_channels_map_on_the_fifo_processors():
    net = Network(layers=(conv("c0", 16, 16, 8, (-1,), k=1),),
                  input_shape=(16, 8, 8), device="MAX78000", name="sixteen")
    pmap = auto_map(net, MAX78000, fifo=True).placement.layers[0].processor_map
    assert pmap == sum(0xF << 16 * q for q in range(4))


def _pooled_1x1(tmp_path, channels: int):
    """A float model: 1x1 average pooling of stride 2, then a 1x1 convolution."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(35)
    w = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (100, channels, 1, 1))
                                .astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("AveragePool", ["x"], ["p"], kernel_shape=[1, 1], strides=[2, 2]),
         helper.make_node("Conv", ["p", "w"], ["y"], kernel_shape=[1, 1])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 100, 8, 8])], [w])
    model = tmp_path / "pooled.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    cal = rng.uniform(-1, 1, (8, channels, 16, 16)).astype(np.float32)
    return model, cal


def test_issue_35_fifo_avg_pool_rounding_1x1_is_an_error_not_a_crash(tmp_path):
    from onnx2ai8x import api

    model, cal = _pooled_1x1(tmp_path, 32)
    with pytest.raises(Ai8xError) as err:
        api.convert(model, "MAX78000", tmp_path / "out", calibration=cal, accept_loss=True,
                    fifo=True, avg_pool_rounding=True)
    assert err.value.code == "map.fifo-channels"
    assert not (tmp_path / "out").exists()
    # the same network with 16 channels converts through the FIFOs
    model, cal = _pooled_1x1(tmp_path, 16)
    api.convert(model, "MAX78000", tmp_path / "ok", calibration=cal, accept_loss=True,
                fifo=True, avg_pool_rounding=True)
    assert (tmp_path / "ok" / "cnn.c").is_file()
