"""The simulator's device facts (ai8xsim/device.py) and the converter's
(onnx2ai8x/devices.py) are written down independently from the same vendor sources, so
that a wrong fact in one shows up as a disagreement with the other here, not as a
project that "passes" because both sides share the same mistake."""
from __future__ import annotations

from dataclasses import fields

import pytest

from ai8xsim import device as sim
from onnx2ai8x.devices import get_device

NAMES = sorted(sim.DEVICES)
# register-index fields both tables hold under the same name
SHARED = sorted({f.name for f in fields(sim.Device)} &
                {f.name for f in fields(type(get_device("MAX78000").regs))})


def test_the_shared_fields_are_many() -> None:
    """A renamed field must not silently drop out of the comparison."""
    assert {"rcnt", "ccnt", "lctl", "lctl2", "ena", "post", "rptr_base", "wptr_base",
            "tptr", "stride", "oned", "cnn_offset", "layer_stride", "max_lreg"} <= set(SHARED)


@pytest.mark.parametrize("name", NAMES)
def test_register_indices_agree(name: str) -> None:
    ours, theirs = get_device(name).regs, sim.DEVICES[name]
    assert {f: getattr(ours, f) for f in SHARED} == {f: getattr(theirs, f) for f in SHARED}
    assert theirs.stream_regs == (ours.stream1, ours.stream2, ours.fmax)


@pytest.mark.parametrize("name", NAMES)
def test_addresses_agree(name: str) -> None:
    ours, theirs = get_device(name), sim.DEVICES[name]
    assert theirs.max_layers == ours.max_layers
    regs = sorted({getattr(ours.regs, f) for f in SHARED
                   if isinstance(getattr(ours.regs, f), int) and f not in
                   ("cnn_offset", "layer_stride", "max_lreg", "write_ptr_shift")})
    for group in range(4):
        for reg in regs:
            for layer in (0, 1, ours.max_layers - 1):
                assert theirs.lreg(group, reg, layer) == ours.lreg_addr(group, reg, layer), \
                    (group, reg, layer)
        assert theirs.ctl(group, 0) == ours.ctl_addr(group, 0)
    # data memory: quadrant 0's base, and every memory's first word
    assert theirs.sram_base == ours.sram_base
    for memory in range(16):
        quad, inst = divmod(memory, 4)
        assert theirs.sram_locate(ours.sram_base + quad * ours.quadrant_stride
                                  + inst * (4 << ours.regs.write_ptr_shift)) == (memory, 0)
    # kernel memory: each processor's first kernel column
    for proc in range(64):
        assert theirs.mram_locate(ours.kernel_address(proc, 0)) == (proc, 0), proc
    # bias memory: each quadrant's first byte
    for quad in range(4):
        assert theirs.bram_locate(ours.bias_address(quad)) == (quad, 0)
