"""Golden networks placed without their sidecar: the automatic mapping must fit (checker,
legalizer), survive a sidecar round trip, and never be slower than the vendor's
hand-written mapping by the vendor's own cycle estimate."""
from __future__ import annotations

import pytest

from onnx2ai8x.devices import get_device
from onnx2ai8x.map.auto import auto_place
from onnx2ai8x.map.latency import estimate_cycles
from onnx2ai8x.map.memory_check import check_placement
from onnx2ai8x.sidecar.write import write_sidecar
from tests.conftest import GOLDEN, golden_params
from tests.lowering import lowered


@pytest.mark.parametrize("case", golden_params())
def test_golden_automap(case: str) -> None:
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus ../shared/golden is absent")
    from onnx2ai8x.sidecar.parse import parse_text
    from onnx2ai8x.sidecar.resolve import resolve_placement
    from tests.golden.case_network import case_network
    from tests.golden.case_placement import case_placement

    net = case_network(GOLDEN / case)
    device = get_device(net.device)
    placement = auto_place(net, device)
    assert check_placement(placement) == []

    text = write_sidecar(placement)
    back = resolve_placement(parse_text(text), net, device)
    assert back.layers == placement.layers
    assert back.final_layer == placement.final_layer

    vendor = case_placement(GOLDEN / case)
    ours = sum(estimate_cycles(lowered(placement)))
    theirs = sum(estimate_cycles(lowered(vendor)))
    assert ours <= theirs, f"auto mapping {ours} cycles, the vendor's sidecar {theirs}"


@pytest.mark.parametrize("case", golden_params())
def test_golden_automap_network_is_legal(case: str) -> None:
    """The network the mapper placed passes the legalizer (when it exists)."""
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus ../shared/golden is absent")
    legalize_mod = pytest.importorskip("onnx2ai8x.legalize")
    from tests.golden.case_network import case_network

    net = case_network(GOLDEN / case)
    legalize_mod.legalize(net, get_device(net.device))


@pytest.mark.parametrize("case", golden_params())
def test_golden_sidecar_placement_passes_checker(case: str) -> None:
    """The vendor's own (silicon-validated) mapping passes the independent checker."""
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus ../shared/golden is absent")
    from tests.golden.case_placement import case_placement

    vendor = case_placement(GOLDEN / case)
    assert check_placement(vendor) == []


@pytest.mark.parametrize("case", golden_params())
def test_golden_streaming_chosen_like_the_vendor(case: str) -> None:
    """Where the vendor's sidecar streams k layers, the mapper streaming k layers
    (`stream_layers`) fits the vendor's streaming rules (checker), round-trips through
    the written sidecar and is not slower by the vendor's estimate."""
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus ../shared/golden is absent")
    from onnx2ai8x.sidecar.parse import parse_text
    from onnx2ai8x.sidecar.resolve import resolve_placement
    from tests.golden.case_network import case_network
    from tests.golden.case_placement import case_placement

    vendor = case_placement(GOLDEN / case)
    k = sum(pl.streaming for pl in vendor.layers)
    if not k:
        pytest.skip("the vendor's sidecar does not stream")
    net = case_network(GOLDEN / case)
    device = get_device(net.device)
    placement = auto_place(net, device, stream_layers=k)
    assert [pl.streaming for pl in placement.layers] == [ll < k for ll in range(len(net.layers))]
    assert check_placement(placement) == []
    back = resolve_placement(parse_text(write_sidecar(placement)), net, device)
    assert back.layers == placement.layers
    assert sum(estimate_cycles(lowered(placement))) <= sum(estimate_cycles(lowered(vendor)))
