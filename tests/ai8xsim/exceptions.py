"""The one allow-list of `verify` (issue 14): every project that is expected not to pass.

Every verify test reads this module: golden projects converted with the case's own
sidecar (tests/golden/test_golden_verify.py), golden projects from automatic mapping
(same file), projects the vendor's tool writes (tests/ai8xsim/test_vendor_projects.py) and
the SDK's examples (tests/ai8xsim/test_sdk_examples.py). The mutation tests list nothing:
their verdicts come from an independent model in the test.

One entry per case and project kind, each with its reason:

- HARDWARE: the hardware, executing the project's registers, cannot give the known
  answer (the reason says why, with the seed section); expected verdict FAIL.
- VENDOR_DEFECT: the vendor's placement, loader or example is wrong (the evidence is
  named, and recomputed by a test where it can be); expected verdict FAIL.
- SIMULATOR_GAP: the project uses a feature the functional model does not execute;
  expected verdict NOT MODELLED (never PASS or FAIL).

`judge` makes each entry prove it is still needed: a listed project must get exactly the
listed verdict, so one that passes now (or fails in another way) fails its test instead
of being an expected failure. tests/ai8xsim/test_exceptions.py checks the list itself
(known cases, no duplicates, every snoop case listed).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import pytest

from ai8xsim.verify import FAIL, NOT_MODELLED, PASS, Outcome, render


class Kind(Enum):
    """How the project under test was written."""

    SIDECAR = "onnx2ai8x project from the case's own sidecar"
    AUTOMATIC = "onnx2ai8x project from automatic mapping"
    VENDOR = "project the vendor's synthesis tool writes for the case"
    SDK = "the SDK's own CNN example"


class Reason(Enum):
    HARDWARE = "hardware"
    VENDOR_DEFECT = "vendor defect"
    SIMULATOR_GAP = "simulator gap"
    CONVERTER = "converter defect"


@dataclass(frozen=True)
class Allowed:
    """One project expected not to pass, and why."""

    case: str  # golden case name, or the SDK example's path under Examples/
    kind: Kind
    reason: Reason
    why: str

    @property
    def verdict(self) -> str:
        """The verdict the project must keep getting for the entry to stay."""
        return NOT_MODELLED if self.reason is Reason.SIMULATOR_GAP else FAIL


# Layer 1 adds two operands that are both layer 0's single 8-channel output. The vendor's
# expected values cut that output (8 channels x 400 pixels, CHW) into two halves and add
# them as two 8 x 200 operands (then xor the same way in layer 2): recomputed from layer
# 0's output as the model leaves it, that reading gives all 200 expected words and the
# hardware's gives none (tests/ai8xsim/test_max78002_features.py). The accelerator
# fetches the operands of pixel i at words 2i and 2i + 1 of each processor's own byte
# lane (seed 000, "Residual Connections": each machine fetch gathers one operand; every
# other element-wise case passes that way), and processor c reads no other lane, so no
# value of layers 1-2's registers reaches the split. Layer 0 would need a write gap.
# Whoever places the layers, the known answer stays out of the hardware's reach.
_ELTWISE_SPLIT = ("operands read interleaved by the hardware (seed 000, Residual "
                  "Connections), split by channel in the known answer")

# Layer 0 (not calcx4) keeps its 320 kernels per processor at kernel words 784-1103;
# layer 1 (calcx4) reads instance 1 of processors 0-2 from word 1024 (the vendor allocates
# calcx4 kernels in unsplit word numbers after a non-calcx4 layer, its "FIXME ... mixed
# non-x4/x4" workaround in izer/kernels.py). The C loads both into words 1024-1103, so
# layer 1 runs with some of layer 0's weights; the layer-by-layer reference (verify
# --model) first differs at layer 1, in a channel of instance 1
# (tests/ai8xsim/test_max78002_features.py recomputes the overlap). The vendor tool's own
# project for the case fails verify on the same word. Our automatic mapping passes.
_KERNEL_OVERLAP = ("the vendor's placement loads layers 0 and 1 into the same kernel-memory "
                   "words 1024-1103 (its mixed non-x4/x4 kernel allocation)")

# Layer 0 reads three HWC channels on processors 0, 16 and 32, which FIFOs 0, 1 and 2 feed
# (seed 000: "four dedicated FIFOs connected to processors 0-3, 16-19, 32-35, and 48-51").
# The vendor's load_input writes every pixel's three channels as one word to FIFO 0 only
# (processors 0-3): processors 16 and 32 never get their channel. The project onnx2ai8x
# writes for the same sidecar feeds FIFO p // 16 and passes.
_FIFO_ZERO_ONLY = ("the vendor's loader feeds FIFO 0 only; processors 16 and 32 read "
                   "FIFOs 1 and 2")

# The MAX78002's snoop units watch the accelerator's memory traffic and can stop the
# inference or branch to another layer; which accesses they match and when they fire is
# described nowhere public (not in the seeds, the SDK or the vendor tool, which writes the
# 32 values a test gives and states the intended layer order by hand in
# `simulated_sequence`). verify refuses such projects (NOT MODELLED, exit 3); the model
# will not reverse-engineer the units from expected data. Everything else in them is
# checked: run along the order the sidecar states (verify --layer-order), all 14 pass
# (tests/golden/test_golden_verify.py, test_snoop_project_passes_along_its_stated_order).
_SNOOP = "snoop units (conditional execution) are not modelled"
SNOOP_CASES = (
    "ai87-suite-snoop-nocount", "ai87-suite-snoop-noskip", "ai87-suite-snoop-noxval",
    "ai87-suite-snoop-range", "ai87-suite-snoop-skipl1", "ai87-suite-snoop2-count",
    "ai87-suite-snoop2-nocount", "ai87-suite-snoop2-norange", "ai87-suite-snoop2-noskip",
    "ai87-suite-snoop2-nostop", "ai87-suite-snoop2-noxval", "ai87-suite-snoop2-range",
    "ai87-suite-snoop2-skip", "ai87-suite-snoop2-stop",
)

# The SDK's MAX78002 kws20_demo: its cnn.c and weights.h are the vendor tool's output for
# the 2023 KWS20 v3 weights, its sampleoutput.h the known answer for the 2021 weights (the
# demo's main() never runs it). tests/ai8xsim/test_sdk_examples.py regenerates both with
# the vendor tool (opt-in) and shows verify computes the 2023 answer word for word.
_STALE_KNOWN_ANSWER = ("sampleoutput.h is the known answer of the previous (2021) weights; "
                       "cnn.c and weights.h are the 2023 ones")

ALLOWED: tuple[Allowed, ...] = (
    Allowed("ai85-suite-multilayer-eltwise", Kind.SIDECAR, Reason.HARDWARE, _ELTWISE_SPLIT),
    Allowed("ai85-suite-multilayer-eltwise", Kind.AUTOMATIC, Reason.HARDWARE,
            _ELTWISE_SPLIT),
    Allowed("ai85-suite-multilayer-eltwise", Kind.VENDOR, Reason.HARDWARE, _ELTWISE_SPLIT),
    Allowed("ai87-suite-ffsx4readahead-nopad-multipass5-w8", Kind.SIDECAR,
            Reason.VENDOR_DEFECT, _KERNEL_OVERLAP),
    Allowed("ai87-suite-ffsx4readahead-nopad-multipass5-w8", Kind.VENDOR,
            Reason.VENDOR_DEFECT, _KERNEL_OVERLAP),
    Allowed("ai85-suite-fifostream-group-notvga64x48-hwc", Kind.VENDOR,
            Reason.VENDOR_DEFECT, _FIFO_ZERO_ONLY),
    Allowed("MAX78002/CNN/kws20_demo", Kind.SDK, Reason.VENDOR_DEFECT, _STALE_KNOWN_ANSWER),
    # the snoop cases, as converted from their sidecar and as the vendor tool writes them
    # (automatic mapping programs no snoop unit: those projects must pass)
    *(Allowed(case, kind, Reason.SIMULATOR_GAP, _SNOOP)
      for case in SNOOP_CASES for kind in (Kind.SIDECAR, Kind.VENDOR)),
)


def allowed(case: str, kind: Kind) -> Allowed | None:
    """The entry for `case` as a project of `kind`, or None."""
    return next((a for a in ALLOWED if a.case == case and a.kind is kind), None)


def judge(case: str, kind: Kind, outcome: Outcome) -> None:
    """Assert the verify outcome of a project: PASS with a checked known answer, or, for
    a listed project, exactly its listed verdict (then an expected failure)."""
    entry = allowed(case, kind)
    if entry is None:
        assert outcome.verdict == PASS, render(outcome)
        assert outcome.checked_words > 0
        return
    assert outcome.verdict == entry.verdict, (
        f"{case} ({kind.value}) is allow-listed as {entry.verdict} ({entry.reason.value}: "
        f"{entry.why}) but verify says {outcome.verdict}: remove or correct its entry in "
        f"tests/ai8xsim/exceptions.py\n{render(outcome)}")
    pytest.xfail(f"{entry.reason.value}: {entry.why}")


@dataclass(frozen=True)
class RandomClass:
    """A class of disagreement the random differential (tests/ai8xsim/differential.py)
    has classified: which of the three is wrong (`reason`, CONVERTER when onnx2ai8x
    should refuse or do otherwise) and why. `applies` recognizes the class from the
    configuration's sidecar and options; `verdict` is what the vendor's project gets and
    `ours` what onnx2ai8x gives (its verdict, or "refused"; by default the same)."""

    name: str
    reason: Reason
    why: str
    applies: Callable[[str, tuple[str, ...]], bool]
    verdict: str = FAIL
    ours: str = ""
    refusal: str = ""  # where ours is "refused": a piece of the converter's error

    @property
    def our_outcome(self) -> str:
        return self.ours or self.verdict


def _fifo_input_read_twice(sidecar: str, options: tuple[str, ...]) -> bool:
    return "--fifo" in options and "in_sequences: input" in sidecar


def _chw_input_read_twice(sidecar: str, options: tuple[str, ...]) -> bool:
    return "data_format: CHW" in sidecar and "in_sequences: input" in sidecar


def _narrow_calcx4(sidecar: str, options: tuple[str, ...]) -> bool:
    """A calcx4 layer with fewer than 32 output channels (popcount of its output
    processors): with weights narrower than 8 bits its four kernel quarters can fall
    short of whole columns (the converter's rule, map/kernels._calcx4_whole_columns,
    also needs the bits, which the sidecar does not state)."""
    for block in sidecar.split("  - name: ")[1:]:
        if "calcx4: true" not in block or "output_processors: " not in block:
            continue
        omap = int(block.split("output_processors: ")[1].split()[0], 16)
        if bin(omap).count("1") < 32:
            return True
    return False


def _mixed_calcx4(sidecar: str, options: tuple[str, ...]) -> bool:
    convs = [block for block in sidecar.split("  - name: ")[1:]
             if "operation: conv" in block]
    x4 = sum("calcx4: true" in block for block in convs)
    return 0 < x4 < len(convs)


def _blocks(sidecar: str) -> list[dict[str, str]]:
    """The sidecar's layers as {key: value text} (the generator's flat layout)."""
    layers = []
    for block in sidecar.split("  - name: ")[1:]:
        entries = {}
        for line in block.splitlines()[1:]:
            key, _, value = line.strip().partition(": ")
            entries[key] = value
        layers.append(entries)
    return layers


def _readahead(sidecar: str, options: tuple[str, ...]) -> bool:
    return any(b.get("readahead") == "true" for b in _blocks(sidecar))


def _dilated_pool_not_2(sidecar: str, options: tuple[str, ...]) -> bool:
    """A layer with pool_dilation > 1 whose pool window has a side other than 2."""
    for b in _blocks(sidecar):
        size = b.get("max_pool") or b.get("avg_pool")
        if size and int(b.get("pool_dilation", "1")) > 1:
            sides = [int(v) for v in size.strip("[]").split(",")]
            if any(v != 2 for v in sides):
                return True
    return False


def _wide_depthwise(sidecar: str, options: tuple[str, ...]) -> bool:
    """A depthwise layer with 32-bit output."""
    return any("groups" in b and b.get("output_width") == "32" for b in _blocks(sidecar))


def _multipass_depthwise_partial_quadrant(sidecar: str, options: tuple[str, ...]) -> bool:
    """A depthwise layer over several passes (more channels than processors) without
    broadcast (its output on other processors), on more than one quadrant, whose last
    processor is not its quadrant's last."""
    for b in _blocks(sidecar):
        if "groups" not in b or b.get("output_processors") == b.get("processors"):
            continue
        procs = int(b["processors"], 16)
        quadrants = sum(1 for q in range(4) if procs >> 16 * q & 0xFFFF)
        if int(b["groups"]) > bin(procs).count("1") and quadrants > 1 and \
                (procs.bit_length() - 1) % 16 != 15:
            return True
    return False


def _moving_depthwise_conv1d(sidecar: str, options: tuple[str, ...]) -> bool:
    """A depthwise Conv1d without broadcast (its output on other processors)."""
    return any("groups" in b and b.get("operation") == "conv1d" and
               b.get("output_processors") != b.get("processors") for b in _blocks(sidecar))


def _any_calcx4(sidecar: str, options: tuple[str, ...]) -> bool:
    return any(b.get("calcx4") == "true" for b in _blocks(sidecar))


def _dilated_pool_side_1(sidecar: str, options: tuple[str, ...]) -> bool:
    """A layer with pool_dilation > 1 whose pool window has a side of 1."""
    for b in _blocks(sidecar):
        size = b.get("max_pool") or b.get("avg_pool")
        if size and int(b.get("pool_dilation", "1")) > 1 and \
                1 in [int(v) for v in size.strip("[]").split(",")]:
            return True
    return False


def _kernels_after_others(sidecar: str, options: tuple[str, ...]) -> bool:
    """A 1x1 or linear layer after another layer with weights, both only on processors
    with extended kernel memory (0, 16, 32, 48 on the MAX78002), one in common: both are
    placed from the end of kernel memory, where the start is rounded down to four
    words."""
    extended, seen = 0x0001000100010001, 0
    for b in _blocks(sidecar):
        procs = int(b.get("processors", "0"), 16)
        if b.get("operation", "none") == "none" or procs & ~extended:
            continue
        if procs & seen and (b.get("kernel_size") == "1x1" or b.get("operation") == "mlp"):
            return True
        seen |= procs
    return False


RANDOM_CLASSES: tuple[RandomClass, ...] = (
    # With --fifo the input comes through the FIFOs into layer 0 only; it is never in
    # data memory. A later layer that reads the input again (in_sequences: input, here
    # the second operand of an element-wise block) reads data memory where it never
    # was: the vendor tool accepts the sidecar and writes a project whose known answer
    # no hardware gives (the first layer that differs is that reader, verify --model).
    # onnx2ai8x refuses it (map.fifo-input, memory_check.fifo_input_read_once).
    RandomClass("FIFO input read again by a later layer", Reason.VENDOR_DEFECT,
                "the FIFO feeds layer 0 only; the vendor's C for a later reader of the "
                "input fails, onnx2ai8x refuses it", _fifo_input_read_twice,
                ours="refused", refusal="map.fifo-input"),
    # CHW input (LCTRL0 bit 6, one channel per processor, four pixels a word) read
    # again by a later layer (in_sequences: input): the vendor tool sets the CHW bit on
    # layer 0 only (it refuses `data_format: CHW` elsewhere), so the later layer reads
    # the input's words as HWC (random 42 on the MAX78000: verify --model, layer 1
    # first differs). The hardware cannot do otherwise: a layer's read mode is its own
    # bit, and no state tells it who wrote the words. The vendor's known answer is the
    # CHW reading: all 37 such FAILs of the sweep (20 MAX78000, 17 MAX78002) PASS when
    # the reader is made to read CHW (test_chw_reread.py). onnx2ai8x refuses it
    # (map.chw, chw_input_read_once) and its automatic mapping keeps such an input HWC.
    RandomClass("CHW input read again by a later layer", Reason.VENDOR_DEFECT,
                "the CHW (big data) bit is set on layer 0 only; the vendor's C for a later "
                "reader of the input fails, onnx2ai8x refuses it", _chw_input_read_twice,
                ours="refused", refusal="map.chw"),
    # calcx4 computes channel 4a + b from kernel memory instance b, and the kernels
    # are stored a quarter of the layer's columns per instance: with narrow weights and
    # few output channels (4 channels of 2-bit weights: 2 bits a tap per instance) the
    # quarters are not whole columns, all four channels' kernels sit in instance 0 and
    # channels 1-3 read empty words (random 67 on the MAX78002, layer 3: verify
    # --model, that layer first differs once layer 0 is right). The vendor tool lays
    # them out the same way; onnx2ai8x refuses the layer (map/kernels.py,
    # _calcx4_whole_columns). (Random 67's layer 0, a streaming calcx4 layer on
    # processor 0 with its kernels in the extended memory, was the converter's error:
    # it copied the vendor's writer, which adds start / 4 past the memory's end and
    # crashes on it; fixed in emit/memory.py _kernel_index.)
    RandomClass("calcx4 kernels short of whole columns per instance", Reason.VENDOR_DEFECT,
                "the four calcx4 kernel quarters do not hold whole columns; the vendor "
                "lays them out regardless, onnx2ai8x refuses the layer", _narrow_calcx4,
                ours="refused", refusal="calcx4 with"),
    # calcx4 and plain convolutions in one network: the vendor allocates the calcx4
    # layer's kernels in split (per-instance) word numbers and the other layer's in
    # unsplit ones, so both can land on the same kernel words of instance 0 (its
    # "FIXME ... mixed non-x4/x4" in izer/kernels.py; the golden case
    # ai87-suite-ffsx4readahead-nopad-multipass5-w8 is the same, _KERNEL_OVERLAP).
    # Random 26 on the MAX78002: layer 0 (calcx4, 4-bit) reads instance 0 words 4-11,
    # layer 1 (plain) words 0-15 of the same memory; verify --model: layer 1 first
    # differs. onnx2ai8x copies the allocation (register-exact), so it is ours too.
    RandomClass("calcx4 and plain kernels share kernel words", Reason.VENDOR_DEFECT,
                "the vendor's mixed calcx4/plain kernel allocation overlaps; the "
                "converter copies it", _mixed_calcx4),
    # Read-ahead (`readahead: true`, MAX78002 LCTRL0 bit 25 with a pass shift count in
    # bits 26-29): the model executes read-ahead only with a shift count of 0; the
    # vendor sets 8 on single- and multi-pass layers (random 1016, 1035, 1099 on the
    # MAX78002: both projects register-exact, both NOT MODELLED). Nothing public says
    # what the hardware reads with it.
    RandomClass("read-ahead with a pass shift count", Reason.SIMULATOR_GAP,
                "read-ahead with a non-zero pass shift count is not modelled; both "
                "projects are register-exact", _readahead, verdict=NOT_MODELLED),
    # Pool dilation d > 1 with a window side p other than 2: the vendor computes the
    # pooled size as (h + stride - p - d + 1) // stride, which is the true
    # (h - d(p - 1) - 1) // stride + 1 only when d = 1 or p = 2; its known answer and
    # registers follow the wrong size (random 1092 on the MAX78002: avg_pool [3, 1],
    # pool_dilation 2 over 14x4 gives (11, 3) for the true (10, 4); its C FAILs).
    # onnx2ai8x refuses the layer (layer.pool-window: "the vendor's last windows would
    # read past the data").
    RandomClass("pool dilation with a window side other than 2", Reason.VENDOR_DEFECT,
                "the vendor's pooled size is wrong for dilated windows of sides other "
                "than 2; its C fails, onnx2ai8x refuses the layer", _dilated_pool_not_2,
                ours="refused", refusal="layer.pool-window"),
    # A depthwise layer with 32-bit output: no public case has one (none of the
    # vendor's suite configurations or golden cases). Without broadcast its time-slot
    # count is (processors of a quadrant x 32 + 7) // 8, which for more than four
    # processors does not fit the 4-bit count: the vendor tool stops on its assertion
    # `0 <= val < 2**4` in create_net (random 1073 and 1175 on the MAX78002, 8
    # processors), and onnx2ai8x writes a project that FAILs. With broadcast both
    # projects are register-exact and both FAIL (random 1305, 1308, 1313: 16
    # processors, 2-bit weights, no bias; layer 0 first differs, every word). Which of
    # the model and the vendor's registers is wrong is not known, so the converter
    # refuses the layer (limit.output-width) until a case shows what the hardware does.
    RandomClass("depthwise with 32-bit output", Reason.VENDOR_DEFECT,
                "no case shows depthwise with 32-bit output; the vendor crashes without "
                "broadcast (time-slot count above 4 bits) and its project fails with it; "
                "onnx2ai8x refuses the layer", _wide_depthwise, ours="refused",
                refusal="32-bit output is not supported on a depthwise"),
    # Depthwise over two passes without broadcast, on several quadrants, ending inside
    # its last quadrant (random 1200 on the MAX78002: 96 channels on processors 4-51
    # to 12-59; 2110: 12-59 to 0-47): both projects register-exact, both FAIL; verify
    # --model: that layer first differs, only in channels of the last quadrant's second
    # pass (1200: channel 94; 2110: 86, 87). The vendor lays each quadrant's bias out as
    # many bytes a pass as the quadrant spans up to the layer's last processor
    # (izer/kbias.py: 16, 16, 16 and 4 bytes for 1200), while the time-slot count
    # (ONED bits 0-3, 15 in every quadrant's register) makes the model step 16: the
    # model reads a second-pass bias 12 bytes too far (bias byte 18 instead of 6 of
    # quadrant 3 for channel 94: 21 for -30, so 127 for 0). The vendor's known answer
    # is computed from the bias values, not from its layout, so one of the two is
    # wrong and no case shows which (the golden and suite layers with a partial last
    # quadrant use broadcast; with broadcast, one pass, or a full last quadrant both
    # readings agree, and those PASS). onnx2ai8x refuses the layer (map.bias,
    # map/bias._check_last_quadrant) until a case shows what the hardware reads.
    RandomClass("multi-pass depthwise ending inside its last quadrant", Reason.VENDOR_DEFECT,
                "without broadcast the vendor's bias layout of a partial last quadrant "
                "does not follow the time-slot count the model steps by; which is right "
                "is unknown, its C fails; onnx2ai8x refuses the layer",
                _multipass_depthwise_partial_quadrant, ours="refused",
                refusal="not at its quadrant's last"),
    # A depthwise Conv1d moving its data (output processors other than its input's:
    # random 1379 and 1748 on the MAX78002; one-layer probes with kernels 1, 3 and 5,
    # processors 0-7 to 4-11, 8-15 or 40-47, all FAILed). The values are right (verify
    # --model: every layer equals the reference; the vendor's known answer has the
    # model's values), their places are not: without broadcast the processors write
    # in time slots, four a data memory, stepped by the time-slot offset (WPTR_TOFFS),
    # as pass-through layers do (MOFFS unwritten there, and their known answers pass).
    # The vendor sets that offset for depthwise Conv2d and Linear layers only
    # (izer/backend/max7800x.py) and leaves 0 for Conv1d, so channels 4-7 land on
    # channels 0-3 (1379: memory 0 gets channels 4-7, memory 1 nothing). In the
    # vendor's depthwise Conv2d projects the time-slot and mask offsets are both one
    # data memory, so they do not show which the hardware steps by; onnx2ai8x now
    # writes the time-slot offset for Conv1d too (emit/registers/layer_geometry.py),
    # which is right under either reading, and PASSes (not register-exact there).
    RandomClass("depthwise Conv1d moving its data", Reason.VENDOR_DEFECT,
                "the vendor leaves the time-slot offset 0 for a depthwise Conv1d without "
                "broadcast, so its channels 4-7 overwrite 0-3 and its C fails; onnx2ai8x "
                "sets it and PASSes", _moving_depthwise_conv1d, ours=PASS),
    # calcx4 kernels short of whole columns (the class above) where the vendor's C
    # PASSes only because its known answer cannot see the defect: random 1385 (four
    # 2-bit output channels; 121 of its 124 known-answer words are 0x7f00007f, the
    # output saturated) and 1388 (72 2-bit channels; 15 of 18 words zero) on the
    # MAX78002. onnx2ai8x refuses the layer.
    RandomClass("calcx4 kernels short of whole columns; the known answer misses it",
                Reason.VENDOR_DEFECT, "the vendor lays out calcx4 kernels short of whole "
                "columns; its saturated or zero known answer does not show it; onnx2ai8x "
                "refuses", _any_calcx4, verdict=PASS, ours="refused", refusal="calcx4 with"),
    # Pool dilation 2 on a window with a side of 1 (random 1399 on the MAX78002:
    # max_pool [2, 1], pool_dilation 2 over 7x7): the vendor's pooled width is
    # (7 + 1 - 1 - 2 + 1) = 6 for the true 7 (the pooled-size class above), but here
    # onnx2ai8x does not refuse: it follows the vendor's size (register-exact) and its
    # project FAILs (verify --model: layer 0's output does not have the reference's
    # shape). onnx2ai8x now refuses the layer (layer.pool-window, as for sides of 3):
    # which count the hardware uses on a dilated side of 1 is not shown by any case.
    RandomClass("pool dilation on a window side of 1", Reason.VENDOR_DEFECT,
                "the vendor's pooled size is wrong on a dilated side of 1 and its C "
                "fails; onnx2ai8x refuses the layer", _dilated_pool_side_1,
                ours="refused", refusal="a dilated side of 1"),
    # Two layers' kernels in one kernel word (random 1401 on the MAX78002: layer 0, a
    # 1x1 convolution with one 8-bit kernel, and layer 3, a 4-bit linear layer 1 -> 10,
    # both on processor 0). The vendor places a layer of extended-memory processors by
    # searching down from the last kernel word (5119) and rounds the start down to four
    # words (izer/kernels.py): layer 0 goes to word 5116, and layer 3's search again
    # finds 5119 free and rounds to 5116 too. Its five bytes join layer 0's byte in that
    # word (bytes 7-3 after layer 0's byte 8), but its mask start (MCNT, 72 units per
    # 1x1 word: izer/backend/max7800x.py) names the whole word, so output channels 0
    # and 1 read layer 0's byte 0x55 and every channel after reads its neighbour's
    # kernel two places back: exactly what the model computes (verify --model: layer 3
    # first differs; channel k gains 127 x w[k - 2]). Where the rounded word is full,
    # the vendor stops on `kernels_used[p][col] <= 8` (random 1682: a 3x3 layer 0 in
    # word 5116, then 64 2-bit 1x1 kernels; onnx2ai8x, copying the placement, used to
    # write the byte into the word before and FAILed). The model reads what the
    # registers name, so the vendor's placement is wrong: onnx2ai8x now skips a
    # rounded start that reaches another layer's words (map/kernels._search_from_end)
    # and PASSes; not register-exact with the vendor there.
    RandomClass("kernels rounded into another layer's kernel word", Reason.VENDOR_DEFECT,
                "the vendor rounds a later layer's kernel start down into a word another "
                "layer's 1x1 kernels fill; its mask start then reads that layer's byte and "
                "its C fails; onnx2ai8x places the kernels apart and PASSes",
                _kernels_after_others, ours=PASS),
    # FIFO input read again (the class above) where the vendor's C PASSes only because
    # its known answer cannot see it: random 1535 on the MAX78000 (the second operand
    # of an element-wise block reads the input; 48 of the 60 known-answer data words
    # are 0x7f7f7f7f, the output saturated). onnx2ai8x refuses.
    RandomClass("FIFO input read again; the vendor's known answer misses it",
                Reason.VENDOR_DEFECT, "the FIFO feeds layer 0 only; the vendor's saturated "
                "known answer does not show the later reader's wrong input; onnx2ai8x "
                "refuses", _fifo_input_read_twice, verdict=PASS, ours="refused",
                refusal="map.fifo-input"),
    # calcx4 kernels short of whole columns (refused by onnx2ai8x) in a network whose
    # vendor project is NOT MODELLED for another reason (read-ahead: random 1729 on the
    # MAX78002).
    RandomClass("calcx4 kernels short of whole columns; the vendor's project not modelled",
                Reason.VENDOR_DEFECT, "onnx2ai8x refuses the calcx4 layer; the vendor's "
                "project uses read-ahead, which the model does not execute", _any_calcx4,
                verdict=NOT_MODELLED, ours="refused", refusal="calcx4 with"),
    # A depthwise layer with 32-bit output (refused by onnx2ai8x, the class above) in a
    # network whose vendor project is NOT MODELLED for another reason (read-ahead:
    # random 1601 and 1729 on the MAX78002).
    RandomClass("depthwise with 32-bit output; the vendor's project not modelled",
                Reason.VENDOR_DEFECT, "onnx2ai8x refuses the depthwise layer with 32-bit "
                "output; the vendor's project uses read-ahead, which the model does not "
                "execute", _wide_depthwise, verdict=NOT_MODELLED, ours="refused",
                refusal="32-bit output is not supported on a depthwise"),
    # CHW input read again (the class above), where the vendor's C PASSes only because
    # its known answer cannot see the reading: all 15 of the sweep (MAX78000 1308, 1690,
    # 1751, 1785, 2110; MAX78002 1218, 1518, 1616, 1642, 1759, 1942, 1946, 2057, 2082,
    # 2115) PASS on the model both as the registers say (the reader HWC) and with the
    # reader made to read CHW. In 1518 and 2115 the reader's output itself is the same
    # both ways: 1518's layer 1 (LCTRL0 0x00888b20, no bit 6; it reads bytes 0 of words
    # 0-95 where the input fills words 0-23, ReLU) has biases -86, -104, -33, -81,
    # -57, 71, 103, -114 (x 128) that outweigh each channel's sums over the sample in
    # either reading (channel 2: bias -4224, sums at most 4022), so every channel is 0
    # or 127 whatever it reads (verify --stop-after 1 matched the reference for that
    # reason). In the other 13 the reader's output differs and
    # later layers hide it (saturation, few known-answer words). onnx2ai8x refuses.
    RandomClass("CHW input read again; the vendor's known answer misses it",
                Reason.VENDOR_DEFECT, "the CHW bit is set on layer 0 only; the vendor's "
                "known answer gives the same words for the later reader's HWC reading and "
                "for the CHW one it assumes; onnx2ai8x refuses", _chw_input_read_twice,
                verdict=PASS, ours="refused", refusal="map.chw"),
)


def random_class(config, result) -> RandomClass | None:
    """The class of a random-differential disagreement (`result` of `config`), or
    None (unexplained). The vendor's project must get the class's verdict (or the
    vendor tool refuse), ours exactly the class's outcome for us."""
    for c in RANDOM_CLASSES:
        if c.applies(config.sidecar, config.options) and \
                result.ours == c.our_outcome and c.refusal in result.detail and \
                result.vendor in (c.verdict, "refused", "not run"):
            return c
    return None
