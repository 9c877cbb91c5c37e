"""Golden emission tests: register functions, then whole C projects, against the vendor's
recorded traces (golden `expected.json.gz`, compared like ../shared/tools/c2trace.py)."""
from __future__ import annotations

import gzip
import json

import pytest

from onnx2ai8x.emit.registers import WeightMemoryMap, derive, register_program
from tests.conftest import GOLDEN, golden_params
from tests.golden.case_placement import case_options, case_placement

ORDERED = {"cnn_start", "cnn_stop", "cnn_continue", "CNN_ISR"}


def _expected(name: str) -> dict:
    with gzip.open(GOLDEN / name / "expected.json.gz", "rt") as handle:
        return json.load(handle)


def _final(writes: list) -> dict[int, int]:
    """Final value per address (c2trace's rule for unordered functions)."""
    state: dict[int, int] = {}
    for op, addr, val in writes:
        cur = state.get(addr, 0)
        state[addr] = val if op == "=" else (cur | val if op == "|=" else cur & val)
    return state


def _memory_map(placement):
    """Kernel/bias allocation from onnx2ai8x.map (None until that module exists)."""
    try:
        from onnx2ai8x.emit.project import weight_memory_map
        return weight_memory_map(placement)
    except (ImportError, NotImplementedError):
        return None


def _placeholder_map(placement) -> WeightMemoryMap:
    n = len(placement.layers)
    return WeightMemoryMap(kernel_offset=(0,) * n, kernel_count=(1,) * n,
                           kernel_out_channels=(1,) * n, bias_offsets=((),) * n,
                           bias_group=(None,) * n)


def _memory_dependent(placement, options) -> set[int]:
    """Addresses whose values come from kernel/bias allocation (mask pointers, output
    channel count, 1-D kernel start, post-processing bias fields, the first quadrant's
    layer control)."""
    hw = derive(placement, options)
    dev = hw.dev
    out = set()
    for ll in range(placement.first_layer_used, len(placement.layers)):
        slot = hw.hw_index(ll)
        for g in hw.groups_used:
            for reg in (dev.mcnt, dev.mcnt1, dev.mcnt2, dev.ochan, dev.post, dev.oned):
                if reg is not None:
                    out.add(dev.lreg_addr(g, reg, slot))
        out.add(dev.lreg_addr(hw.groups_used[0], dev.lctl, slot))
    return out


@pytest.mark.parametrize("name", golden_params())
def test_register_functions(name: str, golden_dir) -> None:
    case = golden_dir / name
    placement = case_placement(case)
    options = case_options(case)
    expected = _expected(name)["functions"]
    memory = _memory_map(placement)
    program = register_program(placement, memory or _placeholder_map(placement), options)
    skip: set[int] = set() if memory is not None else _memory_dependent(placement, options)
    for fn, writes in program.functions().items():
        mine = [[w.op, w.address, w.value] for w in writes]
        gold = expected.get(fn, [])
        if fn in ORDERED:
            assert mine == gold, f"{fn}: write sequence differs"
            continue
        a = {k: v for k, v in _final(mine).items() if k not in skip}
        b = {k: v for k, v in _final(gold).items() if k not in skip}
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        assert not diff, f"{fn}: " + ", ".join(
            f"0x{k:08x}: {a.get(k, 'absent')!s} != {b.get(k, 'absent')!s}" for k in diff[:8])
