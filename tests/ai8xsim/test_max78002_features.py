"""MAX78002 features of the virtual accelerator (issue 14): depthwise convolution without
broadcast and in 1-D, four output channels per step (calcx4), read-ahead and
time-multiplexed passes.

Each feature runs on the smallest golden case that uses it (the project converted from
the case's own sidecar, register-exact with the vendor's C): the register bit must be set
in the project and its known answer must pass. A second test per feature changes one
register (or moves data together with its pointer) in the generated C and checks that the
model follows the register, so a model that ignored the field would be caught. Two
entries of the allow-list (tests/ai8xsim/exceptions.py) get their evidence recomputed
here.
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

from ai8xsim import engine
from ai8xsim.device import MAX78002
from ai8xsim.verify import FAIL, NOT_MODELLED, execute
from tests.conftest import GOLDEN
from tests.golden import pipeline

pytestmark = pytest.mark.skipif(not GOLDEN.is_dir(), reason="golden corpus is absent")


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """Converted golden projects, one conversion per case for the whole module."""
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            out, proc = pipeline.convert_case(name, tmp_path_factory.mktemp(name),
                                              sidecar=True)
            assert proc.returncode == 0, proc.stderr
            made[name] = out
        return made[name]

    return get


def _copy(project: Path, tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "changed"
    shutil.copytree(project, target)
    return target


_STORE = re.compile(r"\*\(\(volatile uint32_t \*\) (0x[0-9a-f]{8})\) = (0x[0-9a-f]{8});")


def _registers(project: Path) -> dict[int, int]:
    """The last value cnn.c stores to each register address (plain stores only)."""
    regs: dict[int, int] = {}
    for addr, value in _STORE.findall((project / "cnn.c").read_text()):
        regs[int(addr, 16)] = int(value, 16)
    return regs


def _set_register(project: Path, address: int, value: int) -> None:
    """Change the value of every plain store to `address` in cnn.c."""
    path = project / "cnn.c"
    text = path.read_text()
    store = re.escape(f"*((volatile uint32_t *) 0x{address:08x}) = ")
    pattern = re.compile(f"({store})0x[0-9a-f]{{8}};")
    text, count = pattern.subn(lambda m: f"{m.group(1)}0x{value:08x};", text)
    assert count >= 1, f"no store to 0x{address:08x}"
    path.write_text(text)


def _lreg(group: int, reg: int, layer: int) -> int:
    return MAX78002.lreg(group, reg, layer)


def _passes(project: Path) -> None:
    outcome = execute(project)
    assert outcome.error is None, outcome.error
    assert outcome.passed, outcome.mismatches[:3]
    assert outcome.checked_words > 0


# (case, layer, register, bit, value the bit must have) -- the feature in the project
FEATURES = [
    ("ai87-suite-depthwise17x5x7-move", 0, "post", 30, 1),  # depthwise ...
    ("ai87-suite-depthwise17x5x7-move", 0, "lctl", 29, 0),  # ... without broadcast
    ("ai87-suite-depthwise-nopool-c", 0, "lctl", 29, 0),  # 2 passes, bias, 4 quadrants
    ("ai87-suite-depthwise1d", 0, "oned", 12, 1),  # 1-D depthwise
    ("ai87-suite-x4-multipass5", 1, "post", 29, 1),  # calcx4
    ("ai87-suite-power-ai87", 0, "post", 29, 1),  # calcx4 on the first layer
    ("ai87-suite-readahead-multipass5", 1, "lctl", 17, 1),  # read-ahead ...
    ("ai87-suite-readahead-multipass5", 1, "post", 31, 1),  # ... time-multiplexed
    ("ai87-suite-readahead-notcalc-multipass5", 1, "post", 31, 0),  # read-ahead alone
]


@pytest.mark.parametrize("name,layer,reg,bit,value", FEATURES,
                         ids=[f"{f[0]}-{f[2]}{f[3]}" for f in FEATURES])
def test_feature_project_passes(projects, name, layer, reg, bit, value) -> None:
    project = projects(name)
    regs = _registers(project)
    word = regs.get(_lreg(0, getattr(MAX78002, reg), layer), 0)
    assert word >> bit & 1 == value, f"{name}: layer {layer} {reg} = 0x{word:08x}"
    _passes(project)


def test_depthwise_without_broadcast_follows_time_slot_offset(projects, tmp_path) -> None:
    """Slots 4-15 of the first quadrant go one data memory further per four slots by
    WPTR_TOFFS; the mask offset register holds the same value and must not matter."""
    project = _copy(projects("ai87-suite-depthwise17x5x7-move"), tmp_path)
    regs = _registers(project)
    toffs, moffs = _lreg(0, MAX78002.wptr_toffs, 0), _lreg(0, MAX78002.wptr_moffs, 0)
    assert regs[toffs] == regs[moffs] == 1 << MAX78002.write_ptr_shift
    _set_register(project, moffs, 0)
    _passes(project)
    _set_register(project, toffs, 0)
    outcome = execute(project)
    assert outcome.verdict == FAIL and outcome.mismatches


def test_calcx4_bias_address_counts_words(projects, tmp_path) -> None:
    """Moving layer 1's bias 8 words up in its quadrant's bias memory, with the address
    field of its POST register, keeps the known answer (the field counts 4-byte words in
    calcx4 mode); leaving the field behind breaks it."""
    project = _copy(projects("ai87-suite-ffsx4readahead-multipass-bias"), tmp_path)
    regs = _registers(project)
    post = _lreg(1, MAX78002.post, 1)
    assert regs[post] == 0xA0001000  # calcx4, tcalc, bias enabled at address 0
    cnn = project / "cnn.c"
    text = cnn.read_text()
    load = "memcpy_8to32((uint32_t *) 0x52180000, bias_1"
    assert load in text
    cnn.write_text(text.replace(load, f"memcpy_8to32((uint32_t *) 0x{0x52180000 + 8 * 16:08x}"
                                      ", bias_1"))
    assert not execute(project).passed
    _set_register(project, post, 0xA0001000 | 8)
    _passes(project)


def test_read_ahead_shift_count_is_checked(projects, tmp_path) -> None:
    project = _copy(projects("ai87-suite-readahead-multipass5"), tmp_path)
    lctl = _lreg(0, MAX78002.lctl, 1)
    value = _registers(project)[lctl]
    assert value >> 26 & 0xF == 1  # 5 passes, time-multiplexed: (5 - 1) // 4
    _set_register(project, lctl, value & ~(0xF << 26) | 4 << 26)
    outcome = execute(project)
    assert outcome.verdict == NOT_MODELLED and "not modelled yet" in outcome.unmodelled
    assert "shift count 4" in outcome.unmodelled and "not 1" in outcome.unmodelled


def test_read_ahead_needs_separate_instances(projects, tmp_path) -> None:
    """Layer 1 reads at word 0x2000 (instance 2 of 4096 words); pointing its output into
    that instance is what the vendor tool refuses, and the model will not guess."""
    project = _copy(projects("ai87-suite-readahead-multipass5"), tmp_path)
    regs = _registers(project)
    assert regs[_lreg(0, MAX78002.rptr_base, 1)] == 0x2000
    wptr = _lreg(0, MAX78002.wptr_base, 1)
    _set_register(project, wptr, regs[wptr] & ~0x7FFF | 0x2400)
    outcome = execute(project)
    assert outcome.verdict == NOT_MODELLED
    assert "read-ahead with output" in outcome.unmodelled \
        and "not modelled yet" in outcome.unmodelled


def test_time_multiplexing_without_read_ahead_is_refused(projects, tmp_path) -> None:
    project = _copy(projects("ai87-suite-readahead-multipass5"), tmp_path)
    regs = _registers(project)
    for group in range(4):
        lctl = _lreg(group, MAX78002.lctl, 1)
        if lctl in regs:
            _set_register(project, lctl, regs[lctl] & ~(1 << 17))
    outcome = execute(project)
    assert outcome.verdict == NOT_MODELLED and "without read-ahead" in outcome.unmodelled


# ---- evidence for two entries of the allow-list, tests/ai8xsim/exceptions.py

def _expected_words(name: str) -> dict[int, int]:
    with gzip.open(GOLDEN / name / "expected.json.gz", "rt") as handle:
        trace = json.load(handle)
    words = {}
    for address, _mask, values in trace["expected_output"]:
        for k, value in enumerate(values):
            words[address + 4 * k] = value
    return words


def test_multilayer_eltwise_known_answer_splits_channels(projects) -> None:
    """The known answer of ai85-suite-multilayer-eltwise is what one gets by cutting
    layer 0's output (8 channels x 400 pixels, CHW) into two halves and adding them as
    two 8 x 200 operands (then the same with xor); the hardware fetches the operands of
    pixel i at words 2i and 2i + 1 of each processor's own byte lane (seed 000, "Residual
    Connections": each machine fetch gathers one operand). No register setting of layers
    1-2 can make processor c read another processor's lane, so the split is unreachable."""
    name = "ai85-suite-multilayer-eltwise"
    outcome = execute(projects(name), stop_after=0)
    m = outcome.machine
    layer0 = np.stack([m.sram[c // 4, 1024:1424, c % 4].view(np.int8).astype(np.int64)
                       for c in range(8)])

    def sat(x):
        return np.clip(x, -128, 127)

    fetched = sat(layer0[:, 0::2] + layer0[:, 1::2])
    fetched = sat(fetched[:, 0::2] ^ fetched[:, 1::2])
    flat = layer0.reshape(-1)
    split = sat(flat[:1600].reshape(8, 200) + flat[1600:].reshape(8, 200)).reshape(-1)
    split = sat(split[:800].reshape(8, 100) ^ split[800:].reshape(8, 100))

    def as_words(values: np.ndarray) -> dict[int, int]:
        out: dict[int, int] = {}
        for c in range(8):
            for i, v in enumerate(values[c].tolist()):
                address = m.dev.sram_address(c // 4, 3072 + i)
                out[address] = out.get(address, 0) | (v & 0xFF) << 8 * (c % 4)
        return out

    expected = _expected_words(name)
    assert len(expected) == 200
    assert all(as_words(split)[a] == w for a, w in expected.items())
    assert not any(as_words(fetched)[a] == w for a, w in expected.items())
    # and the full project on the model gives the fetched reading
    full = execute(projects(name))
    assert full.verdict == FAIL


def _kernel_words(m, layer: int) -> set[tuple[int, int]]:
    """(processor, kernel word) pairs the layer's registers make it read."""
    lr = engine.decode(m, layer)
    procs = [p for p in range(64) if lr.processors >> p & 1 and lr.masks >> p & 1]
    slots = engine.slot_count(lr)
    slot = np.arange(slots)[:, None]
    step = slot // 4 if lr.calcx4 else slot
    unit = lr.mask_start + (step * lr.passes + np.arange(lr.passes)[None, :]) * 8
    words = unit // 8
    if lr.calcx4:
        words = words + (slot % 4) * engine._instance_words(m, lr)
    return {(p, int(w)) for p in procs for w in np.unique(words)}


def test_nopad_multipass5_kernels_overlap(projects) -> None:
    """ai87-suite-ffsx4readahead-nopad-multipass5-w8: layer 0 (not calcx4) keeps its
    320 kernels per processor at words 784-1103; layer 1 (calcx4) reads instance 1 of the
    same processors from word 1024 on. The C loads both into those words, so one layer
    runs with the other's weights, and the known answer (computed with each layer's own
    weights) is out of the hardware's reach. The first layer that differs from the
    layer-by-layer reference is layer 1."""
    name = "ai87-suite-ffsx4readahead-nopad-multipass5-w8"
    project = projects(name)
    outcome = execute(project, stop_after=1)
    m = outcome.machine
    shared = _kernel_words(m, 0) & _kernel_words(m, 1)
    assert {p for p, _ in shared} == {0, 1, 2}
    assert {w for _, w in shared} == set(range(1024, 1104))
    full = execute(project)
    assert full.verdict == FAIL


def test_model_reference_agrees_on_multipass_depthwise(projects) -> None:
    """`verify --model` compares each layer with the reference channel by channel: a
    two-pass depthwise layer (111 channels on 56 processors, the last pass one processor
    short) must report no bad layer when its known answer passes."""
    from ai8xsim.verify import first_bad_layer
    from onnx2ai8x.verification import _references

    project = projects("ai87-suite-depthwise-nopool-c")
    outcome = execute(project)
    assert outcome.passed
    model = next(project.glob("*.onnx"))
    refs = _references(model, outcome, failed=False)
    assert refs[0].shape[0] == 111
    assert first_bad_layer(outcome, refs) is None


def test_model_reference_runs_on_the_whole_frame(projects, tmp_path) -> None:
    """ai87-suite-depthwise-nopool-110: layer 0 pools 3x3 with stride 2 over an 8 x 9
    frame, so its registers read only rows 0-6. `verify --model` runs the reference on
    the sample as the project holds it (all 8 rows, read from data memory the way layer
    0 reads), which is the case's own sample."""
    from ai8xsim.verify import first_bad_layer, held_input
    from onnx2ai8x.verification import _references, verify

    name = "ai87-suite-depthwise-nopool-110"
    project = projects(name)
    outcome = execute(project)
    assert outcome.passed and outcome.layers[0].regs.rows == 7
    sample = np.load(GOLDEN / name / "sample.npy")
    assert sample.shape == (110, 8, 9)
    assert np.array_equal(held_input(outcome, 8, 9)[:110], sample)
    model = next(project.glob("*.onnx"))
    refs = _references(model, outcome, failed=False)
    assert first_bad_layer(outcome, refs) is None
    result = verify(project, model=model)
    assert result.passed and "first_bad_layer" not in result.data
    # an input word of row 6 (read by layer 0) changed in the project: the known answer
    # fails, and every layer still equals the reference run on the input as held, which
    # is what verify says
    changed = _copy(project, tmp_path)
    path = changed / "sampledata.h"
    text = path.read_text()
    # SAMPLE_INPUT_0 is data memory 0 (processors 0-3), HWC with two passes a pixel:
    # word 2 * 54 is pixel 54 (row 6, column 0), first pass
    words = list(re.finditer(r"0x[0-9a-f]{8}", text[text.index("SAMPLE_INPUT_0"):]))
    target = words[2 * 6 * 9]
    offset = text.index("SAMPLE_INPUT_0")
    value = 0x7F7F7F7F  # channels 0-3 of that pixel at the maximum: the max pool keeps it
    assert int(target.group(0), 16) != value
    path.write_text(text[:offset + target.start()] + f"0x{value:08x}"
                    + text[offset + target.end():])
    bad = verify(changed, model=model)
    assert not bad.passed and "first_bad_layer" not in bad.data
    assert "every layer equals the reference run on the input as the accelerator read it" \
        in bad.text
