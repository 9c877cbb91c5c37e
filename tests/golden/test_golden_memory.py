"""Memory sections of the generated C against the vendor tool's golden trace, per section.

Placement and Network come from the case's sidecar + checkpoint (tests/golden/
case_placement.py); reference outputs from the ai8x-ONNX of the case
(tests/golden/case_network.py + custom_ops). Each section of expected.json.gz
(`expected_output`, `unload`, `input`, `kernels`, `bias`) is compared as a whole.
"""
from __future__ import annotations

import gzip
import json
from functools import cache

import pytest

from tests.conftest import GOLDEN, golden_params
from tests.lowering import lowered

pytest.importorskip("torch")  # the vendor checkpoints are read with torch


@cache
def _expected(name: str) -> dict:
    with gzip.open(GOLDEN / name / "expected.json.gz", "rt") as fh:
        return json.load(fh)


def _case(name: str):
    case_dir = GOLDEN / name
    if not (case_dir / "case.json").is_file():
        pytest.skip("golden corpus ../shared/golden is absent")
    from tests.golden.case_placement import case_placement

    placement = case_placement(case_dir)
    return case_dir, placement


def _args(case_dir) -> list[str]:
    return json.loads((case_dir / "case.json").read_text())["vendor_args"]


def _plain(value):
    """Nested tuples/lists of integers as JSON-like lists of ints."""
    if isinstance(value, list | tuple):
        return [_plain(x) for x in value]
    return int(value)


def _first_difference(got: list, want: list) -> str:
    for i in range(max(len(got), len(want))):
        a = got[i] if i < len(got) else None
        b = want[i] if i < len(want) else None
        if a != b:
            return f"entry {i} of {len(got)}/{len(want)}: {str(a)[:200]} != {str(b)[:200]}"
    return "equal"


@pytest.mark.parametrize("name", golden_params())
def test_expected_output(name):
    import custom_ops
    from custom_ops.builder import build_model
    from onnx2ai8x.emit.unload import expected_output
    from tests.golden.case_network import case_network, case_outputs, load_sample

    case_dir, placement = _case(name)
    # The reference runs on the case's Network (execution order); its outputs are the
    # known-answer layers in simulation order, as expected_output() takes them.
    net = case_network(case_dir)
    outs = case_outputs(case_dir)
    model = build_model(net, outputs=outs,
                        avg_pool_rounding="--avg-pool-rounding" in _args(case_dir))
    results = custom_ops.run(custom_ops.session(model), load_sample(case_dir, net))
    got = _plain(expected_output(placement, [r[0] for r in results]))
    want = _expected(name)["expected_output"]
    assert got == want, _first_difference(got, want)


@pytest.mark.parametrize("name", golden_params())
def test_unload(name):
    from onnx2ai8x.emit.unload import unload_plan

    _, placement = _case(name)
    got = _plain(unload_plan(placement))
    want = _expected(name)["unload"]
    assert got == want, _first_difference(got, want)


@pytest.mark.parametrize("name", golden_params())
def test_input(name):
    import numpy as np

    from onnx2ai8x.emit.memory import input_loads

    case_dir, placement = _case(name)
    sample = np.load(case_dir / "sample.npy")
    got = _plain(input_loads(lowered(placement), sample,
                             fifo="--fifo" in _args(case_dir)))
    want = _expected(name)["input"]
    assert got == want, _first_difference(got, want)


@pytest.mark.parametrize("name", golden_params())
def test_kernels(name):
    from onnx2ai8x.emit.memory import kernel_stream

    _, placement = _case(name)
    got = _plain(kernel_stream(lowered(placement)))
    want = _expected(name)["kernels"]
    assert got == want, _first_difference(got, want)


@pytest.mark.parametrize("name", golden_params())
def test_bias(name):
    from onnx2ai8x.emit.memory import bias_loads

    _, placement = _case(name)
    got = _plain(bias_loads(lowered(placement)))
    want = _expected(name)["bias"]
    assert got == want, _first_difference(got, want)
