"""Where the time goes: the phases of one inference, counted from the generated C.

The accelerator's cycle estimate (map/latency.py) is only one phase of what a user
measures. Before it the Arm (or RISC-V) core stores the weights, the bias, the layer
registers and the input into the accelerator; after it the core reads the output back
(cnn_unload, through the mlator where asked) and may run softmax. A user timing the
whole finds the loads dominate for many networks (MAX78000_SDK #74: cats-dogs,
documented at 2549 us of inference, measured 12481 us with its FIFO input load).

The loads are COUNTED, not estimated: the emitter knows every word each phase function
of the project it writes moves (emit/project.PhaseWords: the kernel stream, the bias
bytes, the register stores, the input words copied or pushed into FIFOs, every read of
cnn_unload, loops included), and the virtual accelerator runs the written cnn_unload()
to check that count (ai8xsim/unload.py, tests/power). The time of a load is then
words x cycles per word at the core's clock, with the cycles-per-word model below
and its source. The inference runs at the accelerator clock the options select
(emit/firmware.clock_plan). No energy figure is given: the relative quantities that
drive it (words moved per phase, accelerator cycles x processors) are.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

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
    per_inference_us: float = 0.0  # the timed per-inference phases added up
    # with CPU segments (--cpu-fallback): their share of the compute time (the CPU
    # segments and the accelerator's inference), the one figure every message states
    cpu_share: float | None = None


def share_text(share: float) -> str:
    """A share as every message prints it (one rounding, so no two lines disagree)."""
    return f"{100 * share:.1f}%"


def cpu_share(cpu_us: float, accelerator_us: float | None) -> float | None:
    """The CPU's share of one inference's compute time, to four places."""
    if not accelerator_us and not cpu_us:
        return None
    return round(cpu_us / (cpu_us + (accelerator_us or 0)), 4)


def _report(phases: list[Phase], model: tuple[str, ...],
            share: float | None = None) -> PhaseReport:
    timed = [p for p in phases if p.us is not None]
    dominant = max((p for p in timed if p.per_inference), key=lambda p: p.us or 0).name
    overall = max(timed, key=lambda p: p.us or 0).name
    total = round(sum(p.us or 0 for p in timed if p.per_inference), 1)
    return PhaseReport(tuple(phases), dominant, overall, model, total, share)


CPU_SEGMENT_SOURCE = ("cpu-*: the Arm core's layers (--cpu-fallback), the M4 cycle model "
                      "of report.json's partition.cpu_cycle_model at the core's clock")


def with_cpu_segments(report: PhaseReport,
                      segments: list[tuple[str, int, float]]) -> PhaseReport:
    """`report` with the layers the Arm core runs as phases: `segments` are (name, M4
    cycles, core MHz) of `cpu-stem` (before the input load: it computes the
    accelerator's input), `cpu-midN` (after the inference it interrupts) and `cpu-head`
    (after the unload it reads). The dominant phases, the total and the CPU share
    follow."""
    rows = [Phase(name, "cpu", 0, cycles, int(mhz), _us(cycles, mhz), True)
            for name, cycles, mhz in segments]
    after = {"cpu-stem": "configure", "cpu-head": "unload"}
    phases = list(report.phases)
    for row in rows:
        anchor = after.get(row.name, "inference")
        names = [p.name for p in phases]
        # after its anchor and the segments already placed behind it
        at = names.index(anchor) + 1
        while at < len(phases) and phases[at].name.startswith("cpu-"):
            at += 1
        phases.insert(at, row)
    cpu_us = sum(r.us or 0 for r in rows)
    inference = next(p for p in phases if p.name == "inference")
    return _report(phases, (*report.model, CPU_SEGMENT_SOURCE),
                   cpu_share(cpu_us, inference.us))


def _us(cycles: int | None, mhz: int) -> float | None:
    return None if cycles is None else round(cycles / mhz, 1)


def phase_report(words: Mapping[str, int], *, fifo: bool, system_mhz: int, run_mhz: int,
                 inference_cycles: int, fast_fifo: bool, mlator: bool, softmax: bool,
                 outputs: int) -> PhaseReport:
    """The phases of a project whose phase functions move `words` (phase name -> 32-bit
    words; emit/project.PhaseWords, the values the templates lay out); `fifo`: the
    input is pushed into FIFOs. `system_mhz`: the core clock; `run_mhz`: the accelerator
    clock of the inference; `inference_cycles`: the accelerator estimate
    (map/latency.py)."""
    phases = []
    for name, _ in PHASE_FUNCTIONS:
        count = words.get(name, 0)
        if name == "input" and fifo:
            how, cycles = ("fast-fifo" if fast_fifo else "fifo"), count * FIFO_WORD_CYCLES
        elif name == "unload":
            how, cycles = ("mlator" if mlator else "cpu"), count * UNLOAD_WORD_CYCLES
        else:
            how, cycles = "cpu", count * CPU_STORE_CYCLES
        if name == "unload":
            phases.append(Phase("inference", "accelerator", 0, inference_cycles, run_mhz,
                                _us(inference_cycles, run_mhz), True))
        phases.append(Phase(name, how, count, cycles, system_mhz, _us(cycles, system_mhz),
                            name in ("input", "unload")))
    if softmax:
        # softmax runs on the core over the outputs; there is no public measurement of
        # its cost, so it is not given a time
        phases.append(Phase("softmax", "not modelled", outputs, None, system_mhz, None, True))
    model = (CPU_STORE_SOURCE, FIFO_WORD_SOURCE,
             "unload: a word read back costs what a word stored does (no separate "
             "measurement)",
             "inference: the accelerator cycle estimate (map/latency.py) at the CNN clock "
             "of the options",
             "energy: not given in joules (no public per-phase measurement); words moved "
             "per phase and accelerator cycles are the quantities that drive it")
    return _report(phases, model)


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
    lines.append(f"  {'total per inference':<36} {report.per_inference_us:>25,.1f}"
                 + (" (softmax not timed)" if any(p.us is None for p in report.phases)
                    else ""))
    if report.cpu_share is not None:
        lines.append(f"  CPU share of the compute time (cpu-* rows and inference): "
                     f"{share_text(report.cpu_share)}")
    lines.append(f"  model: {CPU_STORE_CYCLES} cycles per stored word, {FIFO_WORD_CYCLES} per "
                 "FIFO word (sources in report.json, phases.model)")
    return "\n".join(lines) + "\n"


def phases_json(report: PhaseReport) -> dict:
    return asdict(report)
