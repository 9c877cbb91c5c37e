"""The exactness bounds of the README at their limits: accumulators at the int32 edge
times the largest multiplier (|p| just under 2**62), every shift, and the longest softmax."""
from __future__ import annotations

import numpy as np
import pytest

from onnx2ai8x.cpu import host, reference
from onnx2ai8x.cpu import onnx as cpu_onnx
from onnx2ai8x.cpu import ops as K


def _three_ways(seg: K.Segment, feeds: dict) -> None:
    got_c = host.run_segments([(seg, feeds)])[0]
    got_onnx = cpu_onnx.run(seg, feeds)
    n = next(iter(feeds.values())).shape[0]
    for t in seg.outputs:
        want = np.stack([reference.run_segment(seg.ops, {k: v[i] for k, v in feeds.items()})[t]
                         for i in range(n)])
        assert np.array_equal(want, got_onnx[t]) and np.array_equal(want, got_c[t]), t


@pytest.mark.parametrize("sign", [-1, 1])
def test_dense_at_the_accumulator_limit(sign):
    k = 1024
    w = np.full((6, k), -128)
    limit = k * 128 * 128
    bias = np.full(6, sign * (2 ** 31 - 1 - limit))
    m = np.full(6, K.MAX_MULTIPLIER)
    s = np.array([0, 1, 31, 45, 60, K.MAX_SHIFT])
    op = K.dense("d", "x", "y", (k,), w, bias, m, s)
    x = np.stack([np.full(k, -128), np.full(k, 127), np.zeros(k),
                  np.random.default_rng(0).integers(-128, 128, k)]).astype(np.int8)
    _three_ways(K.segment("edge", [op]), {"x": x})


def test_longest_softmax():
    n = K.SOFTMAX_MAX_AXIS
    op = K.softmax("s", "x", "y", (n,), 0.001)
    x = np.stack([np.zeros(n), np.full(n, 127), np.eye(1, n).ravel() * 127,
                  np.random.default_rng(1).integers(-128, 128, n)]).astype(np.int8)
    _three_ways(K.segment("soft", [op]), {"x": x})


def test_add_mul_extremes():
    shape = (4, 8)
    a = np.stack([np.full(shape, -128), np.full(shape, 127)]).astype(np.int8)
    b = a[::-1].copy()
    add = K.add("a", "a", "b", "y", shape, (K.MAX_MULTIPLIER, K.MAX_MULTIPLIER), 0)
    mul = K.mul("m", "a", "b", "z", shape, K.MAX_MULTIPLIER, K.MAX_SHIFT)
    _three_ways(K.segment("elt", [add, mul]), {"a": a, "b": b})
