"""An output processor map with fewer processors than a pass writes channels is refused
when the unload is planned (the walk over the map would otherwise never finish)."""
from __future__ import annotations

import signal
from dataclasses import replace

import numpy as np
import pytest

from custom_ops.builder import build_model
from onnx2ai8x.convert import plan
from onnx2ai8x.devices import get_device
from onnx2ai8x.emit.unload import expected_output, plan_unload
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.network import Layer, Network, Op


@pytest.fixture
def placement(tmp_path):
    rng = np.random.default_rng(5)
    conv = Layer(name="conv", operator=Op.CONV2D, input_channels=3, output_channels=12,
                 input_dim=(8, 8), pooled_dim=(8, 8), output_dim=(8, 8), kernel_size=(3, 3),
                 padding=(1, 1), output_shift=-3,
                 weights=rng.integers(-128, 128, (12, 3, 3, 3)).astype(np.int8))
    path = tmp_path / "m.onnx"
    path.write_bytes(build_model(Network(layers=(conv,), input_shape=(3, 8, 8)))
                     .SerializeToString())
    return plan(path, get_device("MAX78000"), None).placement


def _alarm(*_):
    raise TimeoutError("the unload walk did not finish")


@pytest.mark.parametrize("omap", [0x7, 0x0F0])
def test_short_output_map_is_refused(placement, omap: int) -> None:
    assert plan_unload(placement) is not None  # the real map works
    short = replace(placement, layers=(replace(placement.layers[0],
                                               output_processor_map=omap),))
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        with pytest.raises(Ai8xError, match="channels per pass") as err:
            plan_unload(short)
        assert err.value.diagnostics[0].where == "conv"
        with pytest.raises(Ai8xError, match="channels per pass"):
            expected_output(short, [np.zeros((1, 12, 8, 8), np.int8)])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
