"""Hostile parameters are refused with a clear Ai8xError (code cpu.*), never a crash."""
from __future__ import annotations

import numpy as np
import pytest

from onnx2ai8x.cpu import cgen, host
from onnx2ai8x.cpu import ops as K
from onnx2ai8x.errors import Ai8xError

W3 = np.ones((2, 2, 3, 3), dtype=np.int8)

HOSTILE = {
    "huge input": lambda: K.conv("c", "x", "y", (2, 1 << 25, 4), W3, None, 1, 0),
    "too many values": lambda: K.lut("l", "x", "y", (256, 256, 257), np.zeros(256)),
    "zero dimension": lambda: K.maxpool("p", "x", "y", (2, 0, 4), (1, 1)),
    "rank 7": lambda: K.reshape("r", "x", "y", (1,) * 7, (1,)),
    "not integers": lambda: K.reshape("r", "x", "y", ("a", 2), (2,)),
    "kernel larger than input": lambda: K.conv("c", "x", "y", (2, 2, 2), W3, None, 1, 0),
    "huge kernel": lambda: K.maxpool("p", "x", "y", (1, 4, 4), (1 << 25, 1)),
    "zero stride": lambda: K.maxpool("p", "x", "y", (1, 4, 4), (2, 2), strides=(0, 1)),
    "negative pad": lambda: K.conv("c", "x", "y", (2, 5, 5), W3, None, 1, 0,
                                   pads=(-1, 0, 0, 0)),
    "accumulator overflow": lambda: K.dense("d", "x", "y", (1 << 18,),
                                            np.full((1, 1 << 18), 127), None, 1, 0),
    "bias overflow": lambda: K.conv("c", "x", "y", (2, 5, 5), W3, [2 ** 31 - 1, 0], 1, 0),
    "bias beyond int32": lambda: K.dense("d", "x", "y", (4,), np.ones((1, 4)), [2 ** 40],
                                         1, 0),
    "weights beyond int8": lambda: K.dense("d", "x", "y", (4,), np.full((1, 4), 300), None,
                                           1, 0),
    "non-integer weights": lambda: K.dense("d", "x", "y", (4,), np.full((1, 4), 0.5), None,
                                           1, 0),
    "NaN weights": lambda: K.dense("d", "x", "y", (4,), np.full((1, 4), np.nan), None, 1, 0),
    "multiplier 2**31": lambda: K.dense("d", "x", "y", (4,), np.ones((1, 4)), None,
                                        2 ** 31, 0),
    "negative multiplier": lambda: K.dense("d", "x", "y", (4,), np.ones((1, 4)), None, -1, 0),
    "shift 62": lambda: K.dense("d", "x", "y", (4,), np.ones((1, 4)), None, 1, 62),
    "multipliers per channel mismatch": lambda: K.dense("d", "x", "y", (4,), np.ones((3, 4)),
                                                        None, [1, 2], [0, 0]),
    "clamp outside int8": lambda: K.dense("d", "x", "y", (4,), np.ones((1, 4)), None, 1, 0,
                                          act_max=200),
    "bad group": lambda: K.conv("c", "x", "y", (3, 5, 5), np.ones((2, 1, 3, 3)), None, 1, 0,
                                group=2),
    "weights rank": lambda: K.conv("c", "x", "y", (2, 5, 5), np.ones((2, 2, 3)), None, 1, 0),
    "maxpool window of padding": lambda: K.maxpool("p", "x", "y", (1, 1, 1), (2, 2),
                                                   pads=(1, 1, 2, 2), dilations=(3, 3)),
    "too many MACs": lambda: K.conv("c", "x", "y", (1024, 128, 128),
                                    np.zeros((64, 1024, 7, 7)), None, 1, 0, pads=(3, 3, 3, 3)),
    "avgpool window overflow": lambda: K.avgpool("p", "x", "y", (1, 4096, 4096),
                                                 (4096, 4096), 1, 0),
    "lut of 100 entries": lambda: K.lut("l", "x", "y", (2, 3), np.zeros(100)),
    "lut of 3 tables for 2 channels": lambda: K.lut("l", "x", "y", (2, 3), np.zeros((3, 256))),
    "softmax scale NaN": lambda: K.softmax("s", "x", "y", (10,), float("nan")),
    "softmax negative scale": lambda: K.softmax("s", "x", "y", (10,), -1.0),
    "softmax axis": lambda: K.softmax("s", "x", "y", (10,), 0.1, axis=3),
    "softmax too long": lambda: K.softmax("s", "x", "y", (20000,), 0.1),
    "argmax axis": lambda: K.argmax("a", "x", "y", (10, 2), axis=-3),
    "concat mismatch": lambda: K.concat("c", ["a", "b"], "y", [(2, 3), (3, 4)], axis=0),
    "reshape size": lambda: K.reshape("r", "x", "y", (2, 3), (7,)),
    "transpose perm": lambda: K.transpose("t", "x", "y", (2, 3), (0, 0)),
    "requant scale zero": lambda: K.requant_params(0.0),
    "requant scale huge": lambda: K.requant_params(1e300),
    "lut function NaN": lambda: K.lut_table(lambda x: np.full_like(x, np.nan), 0.1, 0.1),
    "segment name": lambda: K.segment("not an identifier", [K.reshape("r", "x", "y", (2,),
                                                                      (2,))]),
    "tensor written twice": lambda: K.segment("s", [K.reshape("r", "x", "y", (2,), (2,)),
                                                    K.reshape("q", "x", "y", (2,), (2,))]),
    "shape disagreement": lambda: K.segment("s", [
        K.reshape("r", "x", "y", (4, 4), (16,)), K.lut("l", "y", "z", (2, 8), np.zeros(256))]),
    "argmax read by a layer": lambda: cgen.render([K.segment("s", [
        K.argmax("a", "x", "i", (4,)), K.reshape("r", "i", "y", (1,), (1,))])]),
    "duplicate segment names": lambda: cgen.render([
        K.segment("s", [K.reshape("r", "x", "y", (2,), (2,))]),
        K.segment("s", [K.reshape("r", "x", "y", (2,), (2,))])]),
    "host feed out of range": lambda: host.run_segment(
        [K.reshape("r", "x", "y", (2,), (2,))], {"x": np.array([300, 0])}),
    "host feed misshaped": lambda: host.run_segment(
        [K.reshape("r", "x", "y", (2,), (2,))], {"x": np.zeros(3)}),
}


# The limit each refusal must name (a few, to show it is refused for the right reason).
REASON = {"too many MACs": "multiply-accumulates", "avgpool window overflow": "accumulator",
          "accumulator overflow": "int32", "bias overflow": "int32", "shift 62": "shifts",
          "maxpool window of padding": "only padding", "huge kernel": "kernel size",
          "multiplier 2**31": "multipliers", "kernel larger than input": "window spans",
          "shape disagreement": "reshape", "argmax read by a layer": "ArgMax"}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_parameters_are_refused(case):
    with pytest.raises(Ai8xError) as err:
        HOSTILE[case]()
    assert REASON.get(case, "") in err.value.render()
    assert err.value.code.startswith("cpu."), err.value.code
    text = err.value.render()
    assert "hint:" in text and "np." not in text and len(text) < 1200
