"""Cycle estimate: equal to the vendor tool's estimate recorded in the golden traces."""
from __future__ import annotations

import dataclasses
import gzip
import json

import pytest

from onnx2ai8x.map.latency import LayerTiming, estimate_cycles, frame_cycles
from tests.conftest import GOLDEN, golden_params
from tests.lowering import lowered


def _timing(**kw) -> LayerTiming:
    base = dict(input_channels=16, input_dim=(8, 8), pool=(1, 1), pooled_dim=(8, 8),
                passes=1, output_channels=16, output_dim=(8, 8), kernel_size=(3, 3),
                padding=(1, 1), operands=1, pool_first=True, passthrough=False,
                timeslots=1, flatten=False, streaming=False, kernel_offset=0)
    base.update(kw)
    return LayerTiming(**base)


def test_streaming_is_one_and_a_half_times() -> None:
    plain = frame_cycles(_timing())
    assert frame_cycles(_timing(streaming=True)) == (15 * plain + 9) // 10


def test_passthrough_cost_per_pixel() -> None:
    # A passthrough layer reads and writes every pixel: read + TRAM write per pass and
    # operand, then one write slot per pass (numbers written out independently).
    t = _timing(passthrough=True, kernel_size=(1, 1), padding=(0, 0), passes=2,
                operands=3, timeslots=4)
    assert frame_cycles(t) == 8 * 8 * (2 * 3 * (1 + 1) + 2 * 4)


def test_more_passes_cost_more() -> None:
    one, two = frame_cycles(_timing()), frame_cycles(_timing(passes=2))
    assert two > one
    assert frame_cycles(_timing(pool=(2, 2))) > one


@pytest.mark.parametrize("case", golden_params())
def test_golden_latency(case: str) -> None:
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus absent")
    expected = json.loads(gzip.open(GOLDEN / case / "expected.json.gz").read())
    if expected.get("latency_cycles") is None:
        pytest.skip("the vendor prints no estimate for this device")
    from tests.golden.case_placement import case_placement

    placement = case_placement(GOLDEN / case)
    est = estimate_cycles(lowered(placement))
    assert est == [v for _, v in expected["latency_layers"]]
    assert sum(est) == expected["latency_cycles"]


def test_estimate_is_deterministic() -> None:
    if not (GOLDEN / "ai85-mnist").is_dir():
        pytest.skip("golden corpus absent")
    from tests.golden.case_placement import case_placement

    p = case_placement(GOLDEN / "ai85-mnist")
    q = dataclasses.replace(p)
    assert estimate_cycles(lowered(p)) == estimate_cycles(lowered(q))
