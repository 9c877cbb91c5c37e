"""Every CPU op three ways — numpy reference, onnxruntime on the ONNX nodes, host-compiled
C — bit for bit on random parameters and samples (issue 28, item 4).

By default a fixed small subset (`cases.DEFAULT_CASES` per kind); set
ONNX2AI8X_CPU_CASES=1000 for the full sweep. All cases of a kind compile into one C file.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from onnx2ai8x.cpu import host, reference
from onnx2ai8x.cpu import onnx as cpu_onnx
from onnx2ai8x.cpu import ops as K

from .cases import CASES, GENERATORS


def _reference(seg: K.Segment, feeds: dict) -> dict:
    n = next(iter(feeds.values())).shape[0]
    per = [reference.run_segment(seg.ops, {t: v[i] for t, v in feeds.items()})
           for i in range(n)]
    return {t: np.stack([p[t] for p in per]) for t in seg.outputs}


def _describe(seg: K.Segment) -> str:
    return "; ".join(f"{op.kind} {op.in_shapes}->{op.out_shape} k={op.kernel} "
                     f"s={op.strides} p={op.pads} d={op.dilations} g={op.group} "
                     f"axis={op.axis} perm={op.perm}" for op in seg.ops)


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_reference_onnx_and_c_agree(kind):
    rng = np.random.default_rng(zlib.crc32(kind.encode()))
    cases = []
    for i in range(CASES):
        ops, feeds = GENERATORS[kind](rng, f"{kind}{i}")
        cases.append((K.segment(f"case{i}", ops), feeds))
    got_c = host.run_segments(cases)
    for i, ((seg, feeds), c_out) in enumerate(zip(cases, got_c, strict=True)):
        want = _reference(seg, feeds)
        got_onnx = cpu_onnx.run(seg, feeds)
        for t in seg.outputs:
            assert want[t].dtype == got_onnx[t].dtype == c_out[t].dtype, (i, t)
            assert np.array_equal(want[t], got_onnx[t]), \
                f"case {i} ({_describe(seg)}): onnxruntime differs from the reference"
            assert np.array_equal(want[t], c_out[t]), \
                f"case {i} ({_describe(seg)}): the C differs from the reference"
