"""The all-processors-at-once fill of 8-bit convolutions equals the per-processor fill.

`_bulk_8bit` is a faster route to the bytes `_fill_8bit` writes one processor at a time
(which the golden corpus checks against the vendor's); forcing the per-processor route
must give the same allocation, for contiguous and scattered processors, gaps in the
output map, multi-pass inputs and outputs and kernels that share columns."""
from __future__ import annotations

import numpy as np
import pytest

from onnx2ai8x.map import kernels as kmod
from onnx2ai8x.map.kernels import allocate_kernels
from onnx2ai8x.network import OP_CONV1D
from tests.map.test_kernels import conv, place

SCATTERED = 0x0F0F_0000_0000_F00F  # 16 processors in four groups


def _layers():
    return [
        ("contiguous", [conv("a", 4, 8)], [(0xF, 0xFF)]),
        ("scattered_in", [conv("a", 16, 12)], [(SCATTERED, 0xFFF)]),
        ("output_gaps", [conv("a", 4, 6)], [(0xF, 0b1101_0111)]),
        ("output_starts_late", [conv("a", 4, 5)], [(0xF, 0b11111 << 6)]),
        ("one_by_one", [conv("a", 8, 20, k=(1, 1))], [(0xFF, 0xFFFFF)]),
        ("wide_in", [conv("a", 100, 8, k=(1, 1))], [((1 << 64) - 1, 0xFF)]),
        ("wide_out", [conv("a", 4, 100, k=(1, 1))], [(0xF, (1 << 64) - 1)]),
        ("conv1d", [conv("a", 6, 10, k=(3, 1), op=OP_CONV1D)], [(0x3F, 0x3FF)]),
        ("two_layers", [conv("a", 8, 8, seed=1), conv("b", 8, 8, seed=2)],
         [(0xFF, 0xFF), (0xFF << 8, 0xFF)]),
    ]


CASES = _layers()


@pytest.mark.parametrize("name,layers,maps", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
def test_bulk_fill_matches_per_processor_fill(name, layers, maps, device, monkeypatch):
    placement = place(layers, maps, device=device)
    fast = allocate_kernels(placement)
    calls = []
    original = kmod._bulk_8bit

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(kmod, "_bulk_8bit", spy)
    assert allocate_kernels(placement) == fast
    assert calls, "the bulk fill was not used"
    monkeypatch.setattr(kmod, "_bulk_8bit", lambda *args, **kwargs: None)
    slow = allocate_kernels(placement)
    assert slow == fast
    assert slow.columns == fast.columns and slow.owner == fast.owner
    assert any(fast.columns)


def test_allocation_arrays_are_read_only():
    placement = place([conv("a", 4, 8)], [(0xF, 0xFF)])
    alloc = allocate_kernels(placement)
    with pytest.raises(ValueError):
        alloc.image[0, 0, 0] = 1
    assert alloc.owners.shape == alloc.image.shape[:2]
    # owner and columns describe the same columns
    assert [pc for pc, _ in alloc.owner] == [(p, c) for p, cols in enumerate(alloc.columns)
                                             for c, _ in cols]
    assert np.all(alloc.owners[4:] == kmod.FREE)
