"""Sidecar resolution: every field of the vendor's resolved configuration (case.json)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import GOLDEN, golden_params

pytest.importorskip("torch")

from onnx2ai8x.devices import get_device  # noqa: E402
from onnx2ai8x.importer.checkpoint import read_checkpoint  # noqa: E402
from onnx2ai8x.network import OPERATOR_NAMES  # noqa: E402
from onnx2ai8x.sidecar import parse_file  # noqa: E402
from onnx2ai8x.sidecar.resolve import (  # noqa: E402
    resolve,
    resolve_placement,
    to_network,
    to_placement,
)


def _resolve_case(name: str):
    case_dir = GOLDEN / name
    if not (case_dir / "case.json").is_file():
        pytest.skip("golden corpus absent")
    case = json.loads((case_dir / "case.json").read_text())
    sidecar = parse_file(case_dir / "network.yaml")
    ck = read_checkpoint(case_dir / "checkpoint.pth.tar")
    shape = np.load(case_dir / "sample.npy").shape
    return case, resolve(sidecar, ck.layers, get_device(case["device"]), shape, ck.arch)


@pytest.mark.parametrize("name", golden_params())
def test_resolved_configuration_equals_vendor(name):
    case, resolved = _resolve_case(name)
    expected = case["layers"]
    got = resolved.case_layers()
    differing = {k: (got.get(k), v) for k, v in expected.items() if got.get(k) != v}
    assert not differing, f"fields differing from case.json: {sorted(differing)}: {differing}"


@pytest.mark.parametrize("name", golden_params())
def test_network_and_placement_carry_the_resolution(name):
    case, resolved = _resolve_case(name)
    expected = case["layers"]
    network = to_network(resolved)
    placement = to_placement(resolved, network)
    assert len(network.layers) == expected["layers"] == len(placement.layers)
    assert placement.final_layer == expected["final_layer"]
    for i, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        assert OPERATOR_NAMES[lay.operator] == expected["operator_name"][i]
        assert lay.input_channels == expected["input_channels"][i]
        assert list(lay.output_dim) == expected["output_dim"][i]
        assert pl.processor_map == expected["processor_map"][i]
        assert pl.output_processor_map == expected["output_processor_map"][i]
        assert pl.out_offset == expected["out_offset"][i]
        assert pl.in_offset == expected["in_offset"][i]
    # the converter's path: shapes from a Network instead of a checkpoint
    again = resolve_placement(resolved.sidecar, network, get_device(case["device"]))
    assert [p.output_processor_map for p in again.layers] == \
        [p.output_processor_map for p in placement.layers]
    assert [lay.output_shift for lay in again.network.layers] == \
        [lay.output_shift for lay in network.layers]
