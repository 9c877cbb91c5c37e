"""Reference numerics: the ai8x-ONNX of each golden case computes the vendor's known answer.

case.json + checkpoint -> Network (tests/golden/case_network.py) -> custom_ops.builder ->
onnxruntime (custom_ops.session) on sample.npy -> data memory words -> compared with
`expected_output` of expected.json.gz, to the bit. The numpy layer executor
(custom_ops/numpy_ref.py) is checked against the same known answer.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import GOLDEN, golden_params

pytest.importorskip("torch")  # the vendor checkpoints are read with torch

# Vendor behaviour the reference does not reproduce, with the reason. Keep it to
# differences that are understood; everything else must be equal to the bit.
KNOWN_DIFFERENCES: dict[str, str] = {}


def _case(name: str):
    case_dir = GOLDEN / name
    if not (case_dir / "case.json").is_file():
        pytest.skip("golden corpus ../shared/golden is absent")
    from tests.golden.case_network import case_network, case_outputs, load_sample

    net = case_network(case_dir)
    return case_dir, net, case_outputs(case_dir), load_sample(case_dir, net)


def _avg_rounding(case_dir) -> bool:
    args = json.loads((case_dir / "case.json").read_text())["vendor_args"]
    return "--avg-pool-rounding" in args


@pytest.mark.parametrize("name", golden_params())
def test_onnx_reference_matches_expected_output(name):
    import onnx

    import custom_ops
    from custom_ops.builder import build_model
    from tests.golden.case_network import case_words, compare_words, expected_output

    case_dir, net, outs, sample = _case(name)
    model = build_model(net, outputs=outs, avg_pool_rounding=_avg_rounding(case_dir))
    onnx.checker.check_model(model, full_check=True)
    results = custom_ops.run(custom_ops.session(model), sample)
    words = case_words(case_dir, net, [r[0] for r in results], outs)
    problems = compare_words(expected_output(case_dir), words)
    if name in KNOWN_DIFFERENCES:
        pytest.xfail(KNOWN_DIFFERENCES[name])
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", golden_params())
def test_numpy_reference_matches_expected_output(name):
    from custom_ops.numpy_ref import run_network
    from tests.golden.case_network import case_words, compare_words, expected_output

    case_dir, net, outs, sample = _case(name)
    if int(np.prod(net.input_shape)) * sum(
            lay.output_channels for lay in net.layers) > 50_000_000:
        pytest.skip("too large for the plain numpy executor in a test run")
    results = run_network(net, sample, avg_pool_rounding=_avg_rounding(case_dir), outputs=outs)
    words = case_words(case_dir, net, results, outs)
    problems = compare_words(expected_output(case_dir), words)
    if name in KNOWN_DIFFERENCES:
        pytest.xfail(KNOWN_DIFFERENCES[name])
    assert not problems, "\n".join(problems)
