"""Dual-core projects (`--riscv`) and the RISC-V core's fast FIFO (`--fast-fifo`).

With `--riscv` the accelerator is driven by the RISC-V core (seed 000, "Fast FIFO" and
the RISC-V option group): the Arm core boots, sets the clocks, starts the RISC-V core
and sleeps; the RISC-V core runs what `main.c` runs in an Arm project (load, configure,
infer, known-answer test) and wakes the Arm core through the semaphore block's interrupt.
The register program is the same for both cores; only the interrupt plumbing differs
(`cnn.c`), and the fast FIFO, which only the RISC-V core can write, changes the FIFO
control and start writes (`registers/control.py`) and the feed (`project.fifo_feed`).

The SDK builds such a project with its RISC-V loader (project.mk: RISCV_LOAD, RISCV_APP):
this directory is compiled a second time for the RISC-V core and the RISC-V image is
linked into the Arm ELF at `_riscv_boot`. Constant tables need no section attribute: the
SDK's RISC-V linker script keeps `.rodata` in flash.

The RISC-V half builds with either RISC-V toolchain: the MSDK's xPack `riscv-none-elf`
(newlib-nano), which the SDK's makefiles expect, or Debian's `riscv64-unknown-elf` with
picolibc, which project.mk selects when only it is installed. picolibc's printf writes to
a `stdout` stream instead of calling `_write`, so the project carries that stream
(PICOLIBC_CONSOLE, compiled only with picolibc); the files the xPack build reads do not
change.
"""
from __future__ import annotations

from ..errors import Ai8xError
from ..map.hw import HwView
from ..map.kernels import fifo_input_map
from ..options import EmitOptions

ARM_MAIN = "main.c"
RISCV_MAIN = "main_riscv.c"
# the RISC-V core's console with picolibc (project.mk adds it to the RISC-V build only)
PICOLIBC_CONSOLE = "console_picolibc.c"


# --------------------------------------------------------------------------- fast FIFO rules
# One rule per limit of the fast FIFO (seed 000, "Fast FIFO"; the vendor tool's checks);
# each returns a problem text or None, and its docstring is the reason a user reads.

def fast_fifo_needs_riscv(hw: HwView, options: EmitOptions) -> str | None:
    """The fast FIFO is wired to the RISC-V core only: a project using it must run the
    network on the RISC-V core (--riscv)."""
    return None if options.riscv else "--fast-fifo without --riscv"


def fast_fifo_channels(hw: HwView, options: EmitOptions) -> str | None:
    """The fast FIFO carries one channel in CHW format or up to four channels in HWC
    format."""
    dev = hw.placement.device
    lay = hw.network.layers[hw.start_layer]
    chw = hw.placement.layers[hw.start_layer].big_data
    limit = dev.fast_fifo_channels_chw if chw else dev.fast_fifo_channels_hwc
    if lay.input_channels <= limit:
        return None
    return (f"the input has {lay.input_channels} channels in {'CHW' if chw else 'HWC'} "
            f"format, the fast FIFO takes at most {limit}")


def fast_fifo_processors(hw: HwView, options: EmitOptions) -> str | None:
    """The fast FIFO feeds processors 0-3 (HWC) or 0, 16, 32, 48 (CHW) only."""
    dev = hw.placement.device
    pl = hw.placement.layers[hw.start_layer]
    allowed = dev.fast_fifo_processors_chw if pl.big_data else dev.fast_fifo_processors_hwc
    pmap = fifo_input_map(hw.placement)
    if pmap and pmap & ~allowed == 0:
        return None
    return f"the input sits on processor map {pmap:#018x}"


def fast_fifo_output_width(hw: HwView, options: EmitOptions) -> str | None:
    """A layer fed by the fast FIFO must write 8-bit output (output_width 8)."""
    lay = hw.network.layers[hw.start_layer]
    return None if lay.output_width == 8 else f"the layer writes {lay.output_width}-bit output"


def fast_fifo_convolution(hw: HwView, options: EmitOptions) -> str | None:
    """The layer fed by the fast FIFO must compute (a convolution or linear layer), not pass
    its input through."""
    lay = hw.network.layers[hw.start_layer]
    return "the layer is a pass-through" if lay.operator.passthrough else None


FAST_FIFO_RULES = (fast_fifo_needs_riscv, fast_fifo_channels, fast_fifo_processors,
                   fast_fifo_output_width, fast_fifo_convolution)

FIXES = {
    "fast_fifo_needs_riscv": "add --riscv, or use --fifo (the Arm core's FIFOs)",
}


def check_fast_fifo(hw: HwView, options: EmitOptions) -> None:
    """Every fast-FIFO rule when --fast-fifo is on; an Ai8xError naming the first layer and
    the first limit it breaks."""
    if not hw.choices.fast_fifo:
        return
    lay = hw.network.layers[hw.start_layer]
    for rule in FAST_FIFO_RULES:
        problem = rule(hw, options)
        if problem is not None:
            reason = " ".join((rule.__doc__ or "").split())
            fix = FIXES.get(rule.__name__, "use --fifo (the standard FIFOs) instead")
            raise Ai8xError("emit.fast-fifo", lay.name, f"{problem}: {reason}", fix)


# --------------------------------------------------------------------------- project files

def project_templates(options: EmitOptions, files: dict[str, str]) -> dict[str, str]:
    """File name -> template of the project, for the core(s) it runs on: with --riscv the
    known-answer test becomes `main_riscv.c`, `main.c` is the Arm core's start-up, and
    the RISC-V core's console for picolibc is added."""
    if not options.riscv:
        return files
    out = dict(files)
    out[RISCV_MAIN] = out.pop(ARM_MAIN)
    out[ARM_MAIN] = "main_arm.c.j2"
    out[PICOLIBC_CONSOLE] = "console_picolibc.c.j2"
    return out
