"""Execute a project on the functional model and check its own known answer.

`execute(dir)` reads the project (`ai8xsim.creader`), applies every operation of its
`main()` to a `Machine` in order, runs the accelerator when the C starts it, performs
`cnn_unload` and the project's own known-answer check, and returns an `Outcome`.
`first_bad_layer(outcome, references)` compares every layer's output, as it sits in the
simulated data memory, with reference tensors (one per hardware layer, in order).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .creader import (
    Call,
    Check,
    CReadError,
    Feed,
    Load,
    LoadSample,
    Unload,
    Write,
    read_project,
)
from .device import DEVICES
from .engine import CTL_FIFO, LayerResult, input_processors, read_input, snoop_use
from .machine import Machine, NotModelled, SimError
from .overlap import Clobbered
from .sequencer import run


@dataclass(frozen=True)
class Mismatch:
    """One data-memory word that differs: absolute address, expected and actual value."""

    address: int
    expected: int
    actual: int
    mask: int = 0xFFFFFFFF
    layer: int | None = None  # the layer that wrote the word, when known


PASS = "PASS"
FAIL = "FAIL"
ERROR = "ERROR"
NOT_MODELLED = "NOT MODELLED"


@dataclass
class Outcome:
    """The result of `execute`."""

    device: str
    passed: bool
    error: str | None = None
    # a hardware feature the model does not execute (the snoop units, ...): the project
    # is neither passed nor failed
    unmodelled: str | None = None
    checked_words: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    layers: list[LayerResult] = field(default_factory=list)
    unloaded: list[int] = field(default_factory=list)
    machine: Machine | None = None
    note: str | None = None  # how the known answer was found, when not from main()
    # the data memories as the accelerator found them when it started (the sample the
    # project loaded, before any layer wrote over it)
    start_sram: np.ndarray | None = None
    # the layer order the run assumed (a project whose snoop units choose it): the
    # verdict holds for that order only
    assumed_order: tuple[int, ...] | None = None
    # a layer wrote output over input it still needed (overlap.Clobbered): the chip
    # would compute from overwritten input, so the project fails
    clobber: str | None = None

    @property
    def verdict(self) -> str:
        """PASS, FAIL (known-answer words differ), NOT MODELLED or ERROR."""
        if self.unmodelled is not None:
            return NOT_MODELLED
        if self.clobber is not None and not self.layers:
            return FAIL  # stopped: too many pixels read overwritten input to emulate
        if self.error is not None:
            return ERROR
        return PASS if self.passed else FAIL


def execute(directory: str | Path, *, stop_after: int | None = None,
            power_on: int | None = None,
            layer_order: tuple[int, ...] | None = None) -> Outcome:
    """Read the project in `directory`, run it and check its known answer.

    With `stop_after`, the accelerator stops after that layer (the known-answer check is
    then skipped: `passed` stays False and `error` is None). `power_on`: the memories
    start with random bytes from this seed, as SRAM does after power-up (None: zeros),
    so that what a project leaves uninitialized shows (a data buffer without
    --zero-sram). `layer_order`: the hardware layers in the order the project is stated
    to run them (`sequencer.run`'s `order`; a project whose snoop units choose the order
    needs one); an order its registers cannot give raises `engine.LayerOrderError`.
    """
    try:
        project = read_project(directory)
    except (CReadError, OSError) as exc:
        return Outcome("?", False, error=str(exc))
    m = Machine(DEVICES[project.device])
    if power_on is not None:
        rng = np.random.default_rng(power_on)
        for mem in (m.sram, m.mram, m.bram):
            mem[...] = rng.integers(0, 256, mem.shape, dtype=np.uint8)
    out = Outcome(project.device, False, machine=m)
    if project.driven:
        # An application's main() (a demo reading a microphone) checks nothing; the
        # project's sampledata.h/sampleoutput.h are then the only known answer, and an
        # example that updated its weights without them fails for that reason alone
        # (the SDK's MAX78002 kws20_demo: sampleoutput.h is from its previous network).
        out.note = ("main() runs no known-answer test: the project's API was driven as "
                    "the generated test does (SAMPLE_INPUT_n, then SAMPLE_OUTPUT); a FAIL "
                    "can also mean sampleoutput.h is not from the network in weights.h")
    checks = []
    pending = False  # started with FIFO input: runs once the C has fed the FIFOs

    def start() -> bool:
        if out.start_sram is None:
            out.start_sram = m.sram.copy()
        out.layers = run(m, stop_after, layer_order)
        if layer_order is not None and snoop_use(m) is not None:
            out.assumed_order = tuple(layer_order)
        return stop_after is not None

    try:
        for op in project.operations:
            if pending and isinstance(op, (Unload, Check)):
                pending = False
                if start():
                    return out
            if isinstance(op, Write):
                if m.write(op.address, op.value, op.op, op.width):
                    if m.runs and op.op == "|=":
                        # cnn_continue re-enables quadrant 0 after cnn_stop: it resumes
                        # the force-stopped inference (seed 000, cnn_continue), which the
                        # model ran to its end at the start; it is no new inference
                        # (cnn_start writes the whole control word).
                        continue
                    if m.ctl(0, m.dev.reg_ctl) & CTL_FIFO:
                        pending = True
                    elif start():
                        return out
            elif isinstance(op, Feed):
                m.feed(op.address, op.words)
            elif isinstance(op, Load):
                m.load(op.address, op.words, op.express)
            elif isinstance(op, LoadSample):
                rptr = m.lreg(op.processor // 16, m.dev.rptr_base, 0)
                m.load(m.dev.sram_address(op.processor // 4, rptr), op.words)
            elif isinstance(op, Unload):
                for addr, n in op.runs:
                    out.unloaded.extend(m.read_words(addr, n))
            elif isinstance(op, Check):
                # the memory as the check reads it, at its place in main(): a project
                # that runs on afterwards (--forever starts the accelerator again)
                # must not change what was compared
                checks.append((op, [m.read_words(addr, len(words))
                                    for addr, _, words in op.groups]))
            elif isinstance(op, Call):
                continue
        if pending and start():
            return out
    except NotModelled as exc:
        out.unmodelled = str(exc)
        return out
    except Clobbered as exc:
        out.clobber = str(exc)
        return out
    except SimError as exc:
        out.error = str(exc)
        return out
    notes = [res.clobber for res in out.layers if res.clobber]
    if notes:
        out.clobber = notes[0]
    if m.runs == 0:
        out.error = ("the project never starts the accelerator (no write sets quadrant 0's "
                     "enable bit)")
        return out
    if not checks:
        out.error = "the project has no known-answer check (check_output over SAMPLE_OUTPUT)"
        return out
    for chk, seen in checks:
        for (addr, mask, words), values in zip(chk.groups, seen, strict=True):
            for k, (want, got) in enumerate(zip(words, values, strict=True)):
                a = addr + 4 * k
                out.checked_words += 1
                if (got & mask) != (want & mask):
                    out.mismatches.append(Mismatch(a, want & mask, got & mask, mask,
                                                   written_by(out, a)))
    out.passed = not out.mismatches
    return out


def run_again(outcome: Outcome, directory: str | Path) -> list[int]:
    """One more inference on the machine `execute` left: the input loaded again as the
    project's `load_input` does, the accelerator run with the registers as they are, and
    the words `cnn_unload` reads (none when main() does not unload). What the first
    inference left in data memory stays (a data buffer's positions, seed 000 Rolling
    Buffers), as on the chip when an application calls load_input, cnn_start and
    cnn_unload once per frame."""
    m = outcome.machine
    if m is None:
        raise SimError("no machine: run execute() first")
    project = read_project(directory)
    loading, unload = False, None
    for op in project.operations:
        if isinstance(op, Call) and op.name == "load_input":
            loading = op.enter
        elif loading and isinstance(op, Write):
            m.write(op.address, op.value, op.op, op.width)
        elif loading and isinstance(op, Load):
            m.load(op.address, op.words, op.express)
        elif isinstance(op, (Feed, LoadSample)):
            raise SimError("run_again models load_input from data memory only")
        elif isinstance(op, Unload) and unload is None:
            unload = op
    outcome.layers = run(m, order=outcome.assumed_order)
    words: list[int] = []
    for addr, n in unload.runs if unload is not None else ():
        words.extend(m.read_words(addr, n))
    return words


def written_by(outcome: Outcome, address: int) -> int | None:
    """The last layer that wrote the word at `address`, or None."""
    m = outcome.machine
    if m is None:
        return None
    loc = m.dev.sram_locate(address)
    if loc is None:
        return None
    for res in reversed(outcome.layers):
        if np.any((res.memory == loc[0]) & (res.word == loc[1])):
            return res.regs.index
    return None


def input_tensor(outcome: Outcome) -> np.ndarray | None:
    """The sample as layer 0 read it, channels in the hardware's order: pass by pass,
    the enabled processors in ascending order ((C, H, W); operands stacked as channels).
    """
    if not outcome.layers or outcome.layers[0].source is None:
        return None
    src = outcome.layers[0].source  # (P, passes, operands, rows, cols)
    p, k, o, h, w = src.shape
    return src.transpose(2, 1, 0, 3, 4).reshape(o * k * p, h, w)


def held_input(outcome: Outcome, rows: int, cols: int) -> np.ndarray | None:
    """The sample the project holds in data memory, read the way layer 0 reads its input
    but over a `rows` x `cols` frame, in `input_tensor`'s channel order.

    Layer 0 may read fewer rows than the frame holds (a pooling window that does not
    reach the last row); the model's reference runs on the whole frame. None when layer
    0's input is not in data memory (FIFO or transposed input) or nothing ran.
    """
    m = outcome.machine
    if m is None or outcome.start_sram is None or not outcome.layers \
            or m.ctl(0, m.dev.reg_ctl) & CTL_FIFO:
        return None
    lr = dataclasses.replace(outcome.layers[0].regs, rows=rows, cols=cols)
    if lr.transposed:
        return None
    try:
        src = read_input(m, lr, input_processors(lr), outcome.start_sram)
    except SimError:  # the frame runs past the end of data memory
        return None
    p, k, o, h, w = src.shape
    return src.transpose(2, 1, 0, 3, 4).reshape(o * k * p, h, w)


def layer_tensor(res: LayerResult) -> np.ndarray:
    """A layer's output values as written: (output slots, rows, cols)."""
    return res.value.reshape(res.shape)


def first_bad_layer(outcome: Outcome, references: list[np.ndarray]) -> Mismatch | None:
    """The first layer whose output in memory differs from its reference tensor.

    `references[i]` is hardware layer i's expected output ((C, H, W) or (C, L)). Output
    slot s of a layer holds channel s (the slot order is the write order of the mask
    counter); a layer with more slots than channels is compared on its first channels.
    """
    m = outcome.machine
    if m is None:
        return None
    for res in outcome.layers:
        i = res.regs.index
        if i >= len(references):
            break
        ref = np.asarray(references[i], dtype=np.int64)
        ref = ref.reshape(ref.shape[0], -1)
        got = res.value.reshape(res.shape[0], -1)
        if got.shape[1] != ref.shape[1] or got.shape[0] < ref.shape[0]:
            addr = m.dev.sram_address(int(res.memory[0]), int(res.word[0])) \
                if res.memory.size else 0
            return Mismatch(addr, -1, -1, 0, i)
        n = ref.shape[0]
        diff = np.flatnonzero(got[:n] != ref)
        if diff.size == 0:
            continue
        flat = int(diff[0])
        mem, word = int(res.memory[flat]), int(res.word[flat])
        actual = m.sram_word(mem, word)
        lane = int(res.lane[flat])
        want = int(ref.reshape(-1)[flat])
        if lane < 0:
            expected = want & 0xFFFFFFFF
        else:
            expected = actual & ~(0xFF << 8 * lane) | (want & 0xFF) << 8 * lane
        return Mismatch(m.dev.sram_address(mem, word), expected, actual, 0xFFFFFFFF, i)
    return None


def memory_dump(outcome: Outcome, layer: int) -> str:
    """`address: word` lines of every data-memory word the layer wrote, in address order."""
    m = outcome.machine
    res = next((r for r in outcome.layers if r.regs.index == layer), None)
    if m is None or res is None:
        return ""
    cells = sorted({(int(a), int(b)) for a, b in zip(res.memory, res.word, strict=True)},
                   key=lambda c: m.dev.sram_address(*c))
    return "".join(f"0x{m.dev.sram_address(a, b):08x}: 0x{m.sram_word(a, b):08x}\n"
                   for a, b in cells)


def render(outcome: Outcome, bad: Mismatch | None = None, limit: int = 1) -> str:
    """PASS, or FAIL/ERROR with the first differing word and the layer that wrote it."""
    layers = len(outcome.layers)
    if outcome.unmodelled is not None:
        return (f"{NOT_MODELLED}: {outcome.unmodelled}\n  the functional model does not "
                "execute this, so it neither passes nor fails the project: run its "
                "known-answer test on the chip")
    if outcome.clobber is not None and not outcome.layers:
        return f"FAIL: {outcome.device}, {outcome.clobber}"
    if outcome.error:
        return f"ERROR: {outcome.error}"
    if outcome.passed:
        return (f"PASS: {outcome.device}, {layers} layer{'s' if layers != 1 else ''}, "
                f"{outcome.checked_words} known-answer words equal{_assumed(outcome)}")
    lines = [f"FAIL: {outcome.device}, {len(outcome.mismatches)} of "
             f"{outcome.checked_words} known-answer words differ{_assumed(outcome)}"]
    for mm in outcome.mismatches[:limit]:
        who = f" (written by layer {mm.layer})" if mm.layer is not None else \
            " (no layer wrote it)"
        lines.append(f"  first: address 0x{mm.address:08x}{who}: expected "
                     f"0x{mm.expected:08x}, actual 0x{mm.actual:08x} (mask 0x{mm.mask:08x})")
    if outcome.note:
        lines.append(f"  note: {outcome.note}")
    if outcome.clobber is not None:
        lines.append(f"  cause: {outcome.clobber}")
    if bad is not None:
        if bad.mask == 0:
            lines.append(f"  first bad layer: {bad.layer} (its output does not have the "
                         "reference's shape)")
        else:
            lines.append(f"  first bad layer: {bad.layer}: address 0x{bad.address:08x} "
                         f"expected 0x{bad.expected:08x}, actual 0x{bad.actual:08x}")
    return "\n".join(lines)


def _assumed(outcome: Outcome) -> str:
    """The verdict's condition when the layer order was stated, not executed."""
    if outcome.assumed_order is None:
        return ""
    steps = " -> ".join(map(str, outcome.assumed_order))
    return (f"\n  assuming the layer order {steps}: the snoop units that choose it are not "
            "modelled, so the verdict holds for that order only")
