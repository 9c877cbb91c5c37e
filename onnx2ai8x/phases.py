"""Where the time goes: the phases of one inference, counted from the generated C.

The accelerator's cycle estimate (map/latency.py) is only one phase of what a user
measures. Before it the Arm (or RISC-V) core stores the weights, the bias, the layer
registers and the input into the accelerator; after it the core reads the output back
(cnn_unload, through the mlator where asked) and may run softmax. A user timing the
whole finds the loads dominate for many networks (MAX78000_SDK #74: cats-dogs,
documented at 2549 us of inference, measured 12481 us with its FIFO input load).

The loads are COUNTED, not estimated: the virtual accelerator's reader
(ai8xsim.creader) follows main() of the written project into each phase function and
collects every store, memcpy word, FIFO word and read it performs. The time of a load is
then words x cycles per word at the core's clock, with the cycles-per-word model below
and its source. The inference runs at the accelerator clock the options select
(emit/firmware.clock_plan). No energy figure is given: the relative quantities that
drive it (words moved per phase, accelerator cycles x processors) are.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

# ---- the cycles-per-word model (core clock cycles per 32-bit word) -------------------
# A word copied by the core into accelerator memory (memcpy32 of input, the kernel
# table loop, bias bytes, a register store): calibrated on the one public measurement of
# a whole weight load: 20.9 ms for cifar-10's weights on MAX78000 at 100 MHz (Nokia Bell
# Labs, "Ultra-low Power DNN Accelerators for IoT: Resource Characterization of the
# MAX78000", 2022), over the 76,144 words the cifar-10 project's cnn_load_weights writes
# (counted here, each express run's byte store included): 2,090,000 / 76,144 = 27 cycles
# per word. (The same paper's 4.6 ms of inference is what map/latency.py estimates for
# that project: 228,217 cycles at 50 MHz, 4.56 ms.) Stores to the accelerator
# cross the APB bridge into the CNN clock domain, which is why they cost far more than
# the copy loop's own instructions.
CPU_STORE_CYCLES = 27
CPU_STORE_SOURCE = ("27 core cycles per word stored into the accelerator: calibrated on "
                    "the cifar-10 weight load measured at 20.9 ms on MAX78000 at 100 MHz "
                    "(Nokia Bell Labs, MAX78000 resource characterization, 2022)")
# A word pushed into an input FIFO by the core (status poll + store): calibrated on
# MAX78000_SDK #74, cats-dogs at 100 MHz: 12481 us for the FIFO load together with the
# inference, over the 16,384 words its load_input pushes (counted here): 76 cycles per
# word. The inference overlaps the load there, so this bounds the FIFO cost from above.
FIFO_WORD_CYCLES = 76
FIFO_WORD_SOURCE = ("76 core cycles per FIFO word: calibrated on the cats-dogs example "
                    "measured at 12481 us for FIFO load and inference together on MAX78000 "
                    "at 100 MHz (MAX78000_SDK issue #74; an upper bound, the inference "
                    "overlaps the load)")
# A word read back from accelerator memory by cnn_unload (load + store to SRAM): the same
# bridge crossing as a store; no separate public measurement, so the store figure is used.
UNLOAD_WORD_CYCLES = CPU_STORE_CYCLES

# The phase functions of a project (the generated test's and the vendor's names)
PHASE_FUNCTIONS = (("weights", "cnn_load_weights"), ("bias", "cnn_load_bias"),
                   ("configure", "cnn_configure"), ("input", "load_input"),
                   ("unload", "cnn_unload"))


@dataclass(frozen=True)
class Phase:
    """One phase of an inference: what the C moves and what that takes."""

    name: str  # weights, bias, configure, input, inference, unload, softmax
    how: str  # "cpu", "fifo", "fast-fifo", "mlator", "accelerator", "not modelled"
    words: int  # 32-bit words moved by the core (stores, FIFO pushes, reads); 0 for compute
    cycles: int | None  # at `clock_mhz`; None: not modelled
    clock_mhz: int
    us: float | None
    per_inference: bool  # runs for every inference (input, inference, unload, softmax)


@dataclass(frozen=True)
class PhaseReport:
    """All phases, the dominant one and the model's sources."""

    phases: tuple[Phase, ...]
    dominant: str  # of the per-inference phases
    dominant_overall: str  # including the one-time loads
    model: tuple[str, ...]


@dataclass
class _Count:
    words: int = 0
    fifo_words: int = 0


def count_phase_words(project: str | Path) -> dict[str, _Count]:
    """Per phase function: the words its C stores into the accelerator (memcpy and
    table-loop words, single stores), the words it pushes into a FIFO, and for
    cnn_unload the words it reads. The first execution of each function in main()'s
    order is counted (a measurement loop repeats the same work)."""
    from ai8xsim.creader import Call, Feed, Load, Unload, Write, read_project

    ops = read_project(project).operations
    names = dict((fn, phase) for phase, fn in PHASE_FUNCTIONS)
    counts: dict[str, _Count] = {}
    stack: list[str] = []
    done: set[str] = set()
    for op in ops:
        if isinstance(op, Call):
            if op.enter:
                stack.append(op.name)
            elif stack:
                left = stack.pop()
                if left in names:
                    done.add(left)
            continue
        owner = next((fn for fn in stack if fn in names), None)
        if owner is None or owner in done:
            continue
        count = counts.setdefault(names[owner], _Count())
        if isinstance(op, Load):
            # an express (packed) kernel run starts with one byte store of its own
            count.words += len(op.words) + (1 if op.express else 0)
        elif isinstance(op, Write):
            count.words += 1
        elif isinstance(op, Feed):
            count.fifo_words += len(op.words)
        elif isinstance(op, Unload):
            count.words += sum(n for _, n in op.runs)
    return counts


def _us(cycles: int | None, mhz: int) -> float | None:
    return None if cycles is None else round(cycles / mhz, 1)


def phase_report(project: str | Path, *, system_mhz: int, run_mhz: int,
                 inference_cycles: int, fast_fifo: bool, mlator: bool, softmax: bool,
                 outputs: int) -> PhaseReport:
    """The phases of the project written in `project`. `system_mhz`: the core clock;
    `run_mhz`: the accelerator clock of the inference; `inference_cycles`: the
    accelerator estimate (map/latency.py)."""
    counts = count_phase_words(project)
    phases = []
    for name, _ in PHASE_FUNCTIONS:
        c = counts.get(name, _Count())
        if name == "input" and c.fifo_words:
            how, words = ("fast-fifo" if fast_fifo else "fifo"), c.fifo_words
            cycles = words * FIFO_WORD_CYCLES
        elif name == "unload":
            how, words = ("mlator" if mlator else "cpu"), c.words
            cycles = words * UNLOAD_WORD_CYCLES
        else:
            how, words = "cpu", c.words + c.fifo_words
            cycles = words * CPU_STORE_CYCLES
        if name == "unload":
            phases.append(Phase("inference", "accelerator", 0, inference_cycles, run_mhz,
                                _us(inference_cycles, run_mhz), True))
        phases.append(Phase(name, how, words, cycles, system_mhz, _us(cycles, system_mhz),
                            name in ("input", "unload")))
    if softmax:
        # softmax runs on the core over the outputs; there is no public measurement of
        # its cost, so it is not given a time
        phases.append(Phase("softmax", "not modelled", outputs, None, system_mhz, None, True))
    timed = [p for p in phases if p.us is not None]
    dominant = max((p for p in timed if p.per_inference), key=lambda p: p.us or 0).name
    overall = max(timed, key=lambda p: p.us or 0).name
    model = (CPU_STORE_SOURCE, FIFO_WORD_SOURCE,
             "unload: a word read back costs what a word stored does (no separate "
             "measurement)",
             "inference: the accelerator cycle estimate (map/latency.py) at the CNN clock "
             "of the options",
             "energy: not given in joules (no public per-phase measurement); words moved "
             "per phase and accelerator cycles are the quantities that drive it")
    return PhaseReport(tuple(phases), dominant, overall, model)


def render_phases(report: PhaseReport) -> str:
    """The phase table as plain text."""
    lines = ["where the time goes (per inference unless marked once):",
             f"  {'phase':<10} {'how':<12} {'words':>9} {'cycles':>12} {'MHz':>4} {'us':>10}"]
    for p in report.phases:
        cycles = "-" if p.cycles is None else f"{p.cycles:,}"
        us = "-" if p.us is None else f"{p.us:,.1f}"
        mark = "" if p.per_inference or p.name == "inference" else " (once)"
        flag = "  <- dominant" if p.name == report.dominant else ""
        lines.append(f"  {p.name:<10} {p.how:<12} {p.words:>9,} {cycles:>12} "
                     f"{p.clock_mhz:>4} {us:>10}{mark}{flag}")
    lines.append(f"  model: {CPU_STORE_CYCLES} cycles per stored word, {FIFO_WORD_CYCLES} per "
                 "FIFO word (sources in report.json, phases.model)")
    return "\n".join(lines) + "\n"


def phases_json(report: PhaseReport) -> dict:
    return asdict(report)
