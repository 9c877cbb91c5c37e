"""--zero-sram (the vendor's option of that name): cnn_init runs the memories' built-in
self-tests, which leave them zeroed, and all-zero kernels are then not written.

The register values are facts read off the vendor tool's output for the kinetics
action-recognition network (ai8xize.py ... --zero-sram, MAX78000 and MAX78002); the
differential test (test_data_buffer_vendor.py) compares whole projects when the tool is
at hand.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ai8xsim.verify import FAIL, PASS, execute
from onnx2ai8x.cli import main
from onnx2ai8x.convert import plan
from onnx2ai8x.devices import MAX78000, MAX78002
from onnx2ai8x.emit.memory import kernel_stream
from onnx2ai8x.emit.registers.program import register_program
from onnx2ai8x.options import EmitOptions
from tests.emit.data_buffer_nets import ONE, write_net
from tests.lowering import lowered

pytest.importorskip("torch")

# (start, done bits, error bit) of the data, mask, TRAM and bias self-tests, as the
# vendor's cnn_init writes them, in its order
VENDOR_BIST = {
    "MAX78000": ((0x1, 0x8040000, 0x4000), (0x4, 0x8080000, 0x8000),
                 (0x10, 0x8100000, 0x10000), (0x40, 0x8200000, 0x20000)),
    "MAX78002": ((0x1001, 0x40000, 0x4000), (0x2004, 0x80000, 0x8000),
                 (0x3010, 0x100000, 0x10000), (0x1c40, 0x200000, 0x20000)),
}


@pytest.fixture(scope="module")
def zeros(tmp_path_factory):
    """ONE with every third kernel all zeros, imported and converted (data buffer:
    --zero-sram implied)."""
    root = tmp_path_factory.mktemp("zeros")
    yaml, ckpt, sample = write_net(ONE, root, zero_every=3)
    model = root / "m.onnx"
    assert main(["import-izer", "--config-file", str(yaml), "--checkpoint-file", str(ckpt),
                 "--sample", str(sample), "--device", "MAX78000", "-o", str(model)]) == 0
    assert main([str(model), "--sidecar", str(yaml), "--sample-input", str(sample), "-o",
                 str(root / "project"), "--quiet"]) == 0
    return model, yaml, root / "project"


@pytest.mark.parametrize("device", [MAX78000, MAX78002], ids=lambda d: d.name)
def test_self_tests_as_the_vendor_writes_them(zeros, device):
    result = plan(zeros[0], device, zeros[1])
    program = register_program(lowered(result.placement, EmitOptions(zero_sram=True)))
    test_reg = {device.ctl_addr(g, device.regs.reg_sram_test) for g in range(4)}
    seq = [(w.op, w.value, w.mask) for w in program.cnn_init if w.address in test_reg]
    clear = 3 * len(program.groups_used) if device.require_reg_clear else 0
    seq = seq[clear:]  # the MAX78002 register clear comes first (start, wait, reset)
    want = []
    for start, done, error in VENDOR_BIST[device.name]:
        want += [("=", start, 0)] * 4 + [("wait", done, done)] * 4 \
            + [("check", 0, error)] * 4 + [("=", 0, 0)] * 4
    assert seq == want
    plain = register_program(lowered(result.placement))
    kept = [w for w in plain.cnn_init if w.address in test_reg]
    assert len(kept) == clear


def test_main_stops_on_a_self_test_error(zeros):
    main_c = (zeros[2] / "main.c").read_text()
    assert "if (cnn_init() != CNN_OK) fail();" in main_c
    cnn_c = (zeros[2] / "cnn.c").read_text()
    assert "return CNN_FAIL; // Return on BIST error" in cnn_c


def test_zero_kernels_are_not_written(zeros):
    result = plan(zeros[0], MAX78000, zeros[1])
    all_k = kernel_stream(result.hw)
    some_k = kernel_stream(result.hw, skip_zero=True)
    words = sum(len(w) for _, w in all_k)
    assert sum(len(w) for _, w in some_k) < words
    assert len(some_k) > len(all_k)  # a run breaks where a zero kernel is left out
    # every kernel written carries a non-zero byte; none of the others do
    zero_kernels = sum(int(not np.any(np.asarray(lay.weights).reshape(
        lay.output_channels * lay.input_channels, -1)[i]))
        for lay in result.network.layers if lay.weights is not None
        for i in range(lay.output_channels * lay.input_channels))
    assert zero_kernels > 0


def _without(project: Path, tmp: Path, comment: str) -> Path:
    copy = tmp / comment.replace(" ", "-")
    shutil.copytree(project, copy)
    lines = [line for line in (copy / "cnn.c").read_text().splitlines()
             if f"// {comment}" not in line]
    (copy / "cnn.c").write_text("\n".join(lines) + "\n")
    return copy


def test_the_self_tests_make_the_project_independent_of_power_on_memory(zeros, tmp_path):
    project = zeros[2]
    for seed in (None, 11, 12):
        assert execute(project, power_on=seed).verdict == PASS
    # the kernels left out read zero only because the mask-memory test cleared them
    no_mask = _without(project, tmp_path, "Mask SRAM BIST")
    assert execute(no_mask).verdict == PASS
    assert execute(no_mask, power_on=11).verdict == FAIL
