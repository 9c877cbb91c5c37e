"""A later layer that reads CHW input again (issue 26, "CHW input read again").

The input of a CHW network sits one channel per data-memory instance, four pixels a
word, byte 0 first (seed 000, "CHW (Big Data)"). Which way a layer reads the words at its
read pointer is set by its own LCTRL0 bit 6 and nothing else: the hardware keeps no
record of what wrote a word, so a layer without the bit reads the input's words exactly
as it reads any HWC layer output, one pixel a word, processor p taking byte p % 4. The
vendor tool sets the bit on layer 0 only, and its known answer is computed from tensors,
i.e. as if the later reader read CHW.

Here: the model's read path from first principles (CI), the classification of the
sweep's disagreements (CI), and, against the vendor tool (opt-in with
ONNX2AI8X_RANDOM_SWEEP), that the vendor's known answers are the CHW reading: each FAIL
of such a vendor project turns into PASS when the reader is made to read CHW, and each
PASS is a PASS under both readings (its known answer cannot tell them apart).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from ai8xsim import engine, sequencer
from ai8xsim.device import DEVICES
from ai8xsim.engine import LayerRegs, read_input
from ai8xsim.machine import Machine
from ai8xsim.verify import FAIL, PASS, execute, render
from tests.ai8xsim.differential import Result, run_config, vendor_available
from tests.ai8xsim.exceptions import RANDOM_CLASSES, Reason, random_class
from tests.ai8xsim.random_nets import generate

SWEEP = int(os.environ.get("ONNX2AI8X_RANDOM_SWEEP", "0") or 0)
ROWS, COLS = 6, 16  # random 1518's input: 4 channels of 6x16 on processors 0, 4, 8, 12
PROCS = [0, 4, 8, 12]


def _reader(parallel: bool) -> LayerRegs:
    """The read-path fields of a layer over the input (one pass, one operand, read
    pointer 0); the rest is irrelevant to `read_input`."""
    return LayerRegs(
        index=1, processors=0x1111, masks=0x1111, rows=ROWS, cols=COLS, pad=(1, 1),
        passes=1, parallel=parallel, pool=(1, 1), pool_dilation=(1, 1), stride=1,
        pool_average=False, relu=False, absolute=False, wide=False, kernel=(3, 3),
        one_d=False, weight_bits=8, mask_start=0, mask_last=0, oned_start=0, timeslots=1,
        operands=1, eltwise=None, pool_first=False, conv_after_eltwise=False, shift=0,
        flatten=False, transposed=False, write_base=(0, 0, 0, 0), timeslot_offset=0,
        mask_offset=0, channel_offset=0, write_increment=0, read_base=0, per_pass=1,
        bias=None)


def _chw_machine(image: np.ndarray) -> Machine:
    """A machine whose data memories hold `image` (channels, rows, cols) as CHW input:
    channel c in instance PROCS[c] // 4, pixel i in byte i % 4 of word i // 4."""
    m = Machine(DEVICES["MAX78002"])
    for c, p in enumerate(PROCS):
        flat = image[c].reshape(-1).astype(np.int8).view(np.uint8)
        m.sram[p // 4, :len(flat) // 4] = flat.reshape(-1, 4)
    return m


def test_a_layer_without_the_chw_bit_reads_the_input_words_as_hwc() -> None:
    image = np.random.default_rng(1518).integers(-128, 128, (4, ROWS, COLS))
    m = _chw_machine(image)
    chw = read_input(m, _reader(True), PROCS)
    assert np.array_equal(chw[:, 0, 0], image)  # the bit set: the image itself
    hwc = read_input(m, _reader(False), PROCS)[:, 0, 0].reshape(4, -1)
    # without it, pixel i is byte p % 4 = 0 of word i: the image's pixel 4i while the
    # input's 24 words last, then the empty memory after them
    quarter = ROWS * COLS // 4
    assert np.array_equal(hwc[:, :quarter], image.reshape(4, -1)[:, ::4])
    assert not hwc[:, quarter:].any()
    # and a processor at byte 1 of its instance's words reads pixel 4i + 1
    one = dataclasses.replace(_reader(False), processors=0x2)
    assert np.array_equal(read_input(m, one, [1])[0, 0, 0].reshape(-1)[:quarter],
                          image[0].reshape(-1)[1::4])


def test_chw_readers_the_vendor_passes_are_a_vendor_defect_not_open() -> None:
    """The vendor's PASSes (random 1518 on the MAX78002 the one with a varied known
    answer) are classified as a vendor defect its known answer misses, not as an open
    converter question."""
    config = generate(1518, "MAX78002")
    result = Result(config.name, 1518, "MAX78002", config.kinds, PASS, "refused", None,
                    "error[map.chw] network.yaml:26: layer `l1`, `in_sequences`: reads "
                    "the network input again")
    entry = random_class(config, result)
    assert entry is not None and entry.reason is Reason.VENDOR_DEFECT, entry
    assert "known answer" in entry.name
    assert not [c.name for c in RANDOM_CLASSES if c.why.startswith("open")]


def _chw_decode(m: Machine, layer: int) -> LayerRegs:
    """`engine.decode`, except that a later layer reading layer 0's CHW input (same read
    pointer and processors) reads it as CHW: what the vendor's known answer assumes."""
    lr, first = engine.decode(m, layer), engine.decode(m, 0)
    if layer and first.parallel and not lr.parallel and lr.read_base == first.read_base \
            and engine.input_processors(lr) == engine.input_processors(first):
        return dataclasses.replace(lr, parallel=True, read_gap=0)
    return lr


# Sweep configurations refused by onnx2ai8x (map.chw), with the verdict of the vendor's
# project on the model: 1518 and 2115 (MAX78002) PASS with the reader's output the same
# under both readings (its bias saturates every output channel: 1518's layer 1 biases
# -86..-114 and 71, 103 x 128 exceed its sums' reach over the sample); 1308 (MAX78000)
# PASSes with a different reader output that later layers hide; 1031 (MAX78000), 1915
# (MAX78002) FAIL.
VENDOR_SEEDS = (("MAX78002", 1518, PASS), ("MAX78002", 2115, PASS), ("MAX78000", 1308, PASS),
                ("MAX78000", 1031, FAIL), ("MAX78002", 1915, FAIL))


@pytest.mark.skipif(not SWEEP, reason="set ONNX2AI8X_RANDOM_SWEEP=N to run the sweep")
@pytest.mark.parametrize(("device", "seed", "verdict"), VENDOR_SEEDS)
def test_the_vendors_known_answer_is_the_chw_reading(device: str, seed: int, verdict: str,
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if not vendor_available():
        pytest.skip("vendor synthesis tool or c2trace absent")
    r = run_config(generate(seed, device), tmp_path)
    assert (r.vendor, r.ours) == (verdict, "refused") and "map.chw" in r.detail, r
    project = tmp_path / "vendor" / "p"
    monkeypatch.setattr(sequencer, "decode", _chw_decode)
    outcome = execute(project)
    assert outcome.verdict == PASS and outcome.checked_words > 0, render(outcome)
