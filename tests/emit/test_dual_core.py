"""Dual-core projects (--riscv) and the fast FIFO (--fast-fifo).

The register program does not depend on the core that writes it: a RISC-V project's
trace equals the Arm project's except for the interrupt handler's name. With the vendor
tool available locally (AI8X_SYNTHESIS: a checkout of ai8x-synthesis with its
requirements; AI8X_SYNTHESIS_PYTHON: its interpreter) golden cases are converted with
--riscv and --riscv --fast-fifo by both tools and compared with c2trace, plus the parts
c2trace does not read: the FIFO feed loop and the two cores' hand-shake.
"""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x.devices import get_device
from onnx2ai8x.emit.project import ProjectData, write_project
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.network import OP_NONE
from onnx2ai8x.options import EmitOptions
from tests.conftest import GOLDEN
from tests.emit.synthetic import no_bias_memory, one_conv
from tests.golden import pipeline
from tests.lowering import lowered

C2TRACE = GOLDEN.parent / "tools" / "c2trace.py"


def _project(tmp_path: Path, options: EmitOptions, name: str = "proj", **kw) -> Path:
    pl = one_conv(**kw)
    ch = pl.network.layers[0].input_channels
    data = ProjectData(kernels=((0x50180000, (1, 2, 3)),), bias=(),
                       inputs=((0x50400000, tuple(range(16))),),
                       expected=((0x50402000, 0xFFFFFFFF, (7, 8)),),
                       memory=no_bias_memory(pl))
    sample = np.arange(ch * 64).reshape(ch, 8, 8) % 256 - 128
    out = tmp_path / name
    write_project(lowered(pl, options), out, options=options, sample=sample, outputs=[],
                  data=data)
    return out


def _trace(project: Path) -> dict:
    if not C2TRACE.is_file():
        pytest.skip("../shared/tools/c2trace.py is absent")
    return pipeline.trace_of(project)


def test_riscv_project_has_both_cores(tmp_path: Path) -> None:
    out = _project(tmp_path, EmitOptions(riscv=True, timer=0))
    arm = (out / "main.c").read_text()
    rv = (out / "main_riscv.c").read_text()
    # the Arm core starts the RISC-V core and waits for the semaphore interrupt
    assert "MXC_SYS_RISCVRun();" in arm and "MXC_NVIC_SetVector(RISCV_IRQn" in arm
    assert "MXC_SYS_PERIPH_CLOCK_SMPHR" in arm and "cnn_" not in arm
    # the RISC-V core runs the known-answer test and raises that interrupt at the end
    assert "check_output()" in rv and "cnn_start();" in rv and 'asm volatile ("wfi")' in rv
    assert rv.rstrip().endswith("}")
    assert rv.index("MXC_F_SEMA_IRQ0_CM4_IRQ") > rv.index("cnn_disable();")
    assert "MXC_ICC1" in rv and "MXC_SYS_Clock_Select" not in rv
    cnn = (out / "cnn.c").read_text()
    assert 'interrupt("machine"))) CNN_IRQHandler' in cnn and "NVIC_EnableEVENT(CNN_IRQn)" in cnn
    assert "CNN_ISR" not in cnn
    mk = (out / "project.mk").read_text()
    assert "RISCV_LOAD ?= 1" in mk and "RISCV_APP ?= $(CURDIR)" in mk
    assert "SRCS += main.c\n" in mk and "SRCS += main_riscv.c cnn.c\n" in mk


@pytest.mark.parametrize("options", [
    EmitOptions(riscv=True, softmax=True, timer=1, boost="2.5"),
    EmitOptions(riscv=True, no_kat=True, no_unload=True),
], ids=["softmax-timer-boost", "no-kat-no-unload"])
@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
def test_riscv_options_land_on_the_riscv_core(tmp_path: Path, options: EmitOptions,
                                              device: str) -> None:
    out = _project(tmp_path, options, device=device)
    arm = (out / "main.c").read_text()
    rv = (out / "main_riscv.c").read_text()
    mk = (out / "project.mk").read_text()
    assert ("softmax_layer();" in rv) == options.softmax and "softmax" not in arm
    assert ("SRCS += main_riscv.c cnn.c softmax.c" in mk) == options.softmax
    assert ("cnn_boost_enable(MXC_GPIO2, MXC_GPIO_PIN_5)" in rv) == (options.boost == "2.5")
    assert ("check_output() != CNN_OK" in rv) == (not options.no_kat)
    # MAX78002: the Arm core starts the IPLL the RISC-V core's CNN clock waits for
    assert ("MXC_F_GCR_IPLL_CTRL_EN; /* Start" in arm) == (device == "MAX78002")
    assert "main_riscv.c" in (out / "README.md").read_text()


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
def test_riscv_part_check_uses_the_part_header(tmp_path: Path, device: str) -> None:
    # The RISC-V build may not define the part's name; TARGET_NUM comes from its header.
    header = (_project(tmp_path, EmitOptions(riscv=True), device=device) / "cnn.h").read_text()
    assert f"#if TARGET_NUM != {device[3:]}\n#error" in header
    sdk_header = (GOLDEN.parent / "msdk" / "Libraries" / "CMSIS" / "Device" / "Maxim" / device
                  / "Include" / f"{device.lower()}.h")
    if sdk_header.is_file():
        assert f"#define TARGET_NUM {device[3:]}" in sdk_header.read_text()


def test_riscv_register_program_equals_the_arm_one(tmp_path: Path) -> None:
    arm = _trace(_project(tmp_path, EmitOptions(), "arm"))
    rv = _trace(_project(tmp_path, EmitOptions(riscv=True), "rv"))
    # c2trace reads `void __attribute__(...) CNN_IRQHandler` as a function `__attribute__`
    assert rv["functions"].pop("__attribute__") == arm["functions"].pop("CNN_ISR")
    assert rv == arm


def test_fast_fifo_feed_and_control(tmp_path: Path) -> None:
    dev = get_device("MAX78000")
    out = _project(tmp_path, EmitOptions(riscv=True, fast_fifo=True), streaming=True)
    rv = (out / "main_riscv.c").read_text()
    # status register 1 (bit 1: full) and data register 4 of the fast-FIFO block
    assert f"0x{dev.fast_fifo_base + 4:08x}" in rv and f"0x{dev.fast_fifo_base + 16:08x}" in rv
    assert "& 0x2) != 0" in rv
    cnn = _trace(out)["functions"]["cnn_configure"]
    assert ["=", dev.fast_fifo_base, 10 << 4] in cnn  # asynchronous, threshold 10
    start = _trace(out)["functions"]["cnn_start"]
    assert all(v & 1 << 22 for op, a, v in start if a == dev.cnn_base)  # fast FIFO enable


def _with_first_layer(**changes):
    def build():
        pl = one_conv(streaming=True)
        lay = dataclasses.replace(pl.network.layers[0], **{k: v for k, v in changes.items()
                                                           if k != "processor_map"})
        net = dataclasses.replace(pl.network, layers=(lay,))
        place = pl.layers[0]
        if "processor_map" in changes:
            place = dataclasses.replace(place, processor_map=changes["processor_map"])
        return dataclasses.replace(pl, network=net, layers=(place,))
    return build


@pytest.mark.parametrize(("build", "needle"), [
    (lambda: one_conv(streaming=True, channels=5), "at most 4"),
    (lambda: one_conv(streaming=True, big_data=True, channels=2), "at most 1"),
    (_with_first_layer(processor_map=0xF0000), "processor map"),
    (_with_first_layer(output_width=32), "32-bit output"),
    (_with_first_layer(operator=OP_NONE), "pass-through"),
])
def test_fast_fifo_limits_are_named_errors(tmp_path: Path, build, needle: str) -> None:
    pl = build()
    lay = pl.network.layers[0]
    sample = np.zeros((lay.input_channels, 8, 8), dtype=np.int64)
    data = ProjectData(kernels=(), bias=(), inputs=(), expected=(), memory=no_bias_memory(pl))
    with pytest.raises(Ai8xError) as err:
        options = EmitOptions(riscv=True, fast_fifo=True)
        write_project(lowered(pl, options), tmp_path / "p", options=options, sample=sample,
                      outputs=[], data=data)
    assert err.value.code == "emit.fast-fifo" and lay.name in str(err.value)
    assert needle in err.value.render() and "--fifo" in err.value.render()
    assert not (tmp_path / "p").exists()


def test_fast_fifo_option_needs_riscv() -> None:
    with pytest.raises(Ai8xError) as err:
        EmitOptions.from_cli(fast_fifo=True)
    assert "--riscv" in err.value.render() and "riscv=True" in str(err.value)
    assert EmitOptions.from_cli(fast_fifo=True, riscv=True).uses_fifo


# --------------------------------------------------------------------------- vendor tool

def _vendor() -> tuple[str, Path] | None:
    root = os.environ.get("AI8X_SYNTHESIS")
    if not root or not (Path(root) / "ai8xize.py").is_file() or not C2TRACE.is_file():
        return None
    return os.environ.get("AI8X_SYNTHESIS_PYTHON", sys.executable), Path(root)


# Facts of the hand-shake both tools' projects must have (the C spelling may differ).
ARM_FACTS = {
    "semaphore clock": r"MXC_SYS_ClockEnable\(MXC_SYS_PERIPH_CLOCK_SMPHR\)",
    "wake-up handler": r"MXC_NVIC_SetVector\(RISCV_IRQn,",
    "RISC-V started": r"MXC_SYS_RISCVRun\(\)|MXC_SYS_PERIPH_CLOCK_CPU1",
    "boot address": r"MXC_SYS_RISCVRun\(\)|urvbootaddr",
    "sleeps": r"MXC_LP_EnterSleepMode\(\)",
}
RISCV_FACTS = {
    "RISC-V cache": r"MXC_ICC_Enable\(MXC_ICC1\)",
    "waits for the CNN": r"\"wfi\"",
    "wakes the Arm core": r"MXC_SEMA->irq0 = MXC_F_SEMA_IRQ0_EN \| MXC_F_SEMA_IRQ0_CM4_IRQ",
    "known-answer test": r"check_output\(\)",
}
VENDOR_FIFO = re.compile(r"\(\*\(\(volatile uint32_t \*\) (0x[0-9a-f]+)\) & (\w+)\)\) != 0\);.*?\n"
                         r"\s*\*\(\(volatile uint32_t \*\) (0x[0-9a-f]+)\) = \*in(\d+)\+\+;")
OUR_FIFO_REG = re.compile(r"\*(status|fifo_\d+) = \(volatile uint32_t \*\) (0x[0-9a-f]+);")
OUR_FIFO_WAIT = re.compile(r"while \(\(\*status & (0x[0-9a-f]+)\) != 0\) ;\n\s*\*fifo_(\d+) =")


def fifo_writes(project: Path) -> list[tuple[int, int, int, int]]:
    """(status address, full mask, data address, stream) of each FIFO write in the RISC-V
    main, from either tool's spelling of the feed loop."""
    text = (project / "main_riscv.c").read_text()
    found = [(int(s, 16), int(m, 0), int(d, 16), int(i)) for s, m, d, i in
             VENDOR_FIFO.findall(text)]
    if found:
        return found
    regs = {name: int(addr, 16) for name, addr in OUR_FIFO_REG.findall(text)}
    return [(regs["status"], int(mask, 16), regs[f"fifo_{i}"], int(i))
            for mask, i in OUR_FIFO_WAIT.findall(text)]


def sample_streams(project: Path) -> list[list[int]]:
    text = (project / "sampledata.h").read_text()
    macros = re.findall(r"#define SAMPLE_INPUT_\d+ \{(.*?)\}", text, re.S)
    return [[int(v, 16) for v in re.findall(r"0x[0-9a-fA-F]+", body)] for body in macros]


def missing_facts(text: str, facts: dict[str, str]) -> list[str]:
    return [name for name, pattern in facts.items() if not re.search(pattern, text)]


DIFFERENTIAL = [
    ("ai85-mnist", ("--riscv",)),
    ("ai85-suite-fifostream-32", ("--riscv",)),
    ("ai85-suite-fifostream-32-hwc", ("--riscv", "--fast-fifo")),
    ("ai85-suite-fifostream-pool-stride-hwc", ("--riscv", "--fast-fifo")),
    ("ai87-kws20_v3_1", ("--riscv",)),
    ("ai87-suite-x4-multipass5-stream", ("--riscv",)),
    ("ai87-suite-x4-multipass5-stream", ("--riscv", "--fast-fifo")),
]


@pytest.mark.parametrize(("case", "extra"), DIFFERENTIAL,
                         ids=[f"{c}{''.join(e)}" for c, e in DIFFERENTIAL])
def test_dual_core_matches_the_vendor_tool(tmp_path: Path, case: str, extra) -> None:

    vendor = _vendor()
    if vendor is None:
        pytest.skip("vendor tool absent: set AI8X_SYNTHESIS (and AI8X_SYNTHESIS_PYTHON)")
    if not (GOLDEN / case).is_dir():
        pytest.skip(f"golden case {case} absent")
    python, root = vendor
    info = pipeline.case_json(case)
    ours, done = pipeline.convert_case(case, tmp_path, sidecar=True, extra=extra)
    assert done.returncode == 0, done.stderr
    vargs = [a for a in info["vendor_args"] if a != "--verbose"]
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    subprocess.run([python, "ai8xize.py", "--test-dir", str(tmp_path / "vendor"), "--prefix",
                    "p", "--checkpoint-file", str(GOLDEN / case / "checkpoint.pth.tar"),
                    "--config-file", str(GOLDEN / case / "network.yaml"), "--device",
                    info["device"], "--sample-input", str(GOLDEN / case / "sample.npy"),
                    "--no-version-check", "--overwrite", *vargs, *extra],
                   cwd=root, env=env, check=True, capture_output=True, timeout=900)
    theirs = tmp_path / "vendor" / "p"
    cmp = subprocess.run([sys.executable, str(C2TRACE), "compare", str(ours), str(theirs)],
                         capture_output=True, text=True, timeout=300)
    assert cmp.returncode == 0, cmp.stdout
    for project in (ours, theirs):
        assert missing_facts((project / "main.c").read_text(), ARM_FACTS) == []
        assert missing_facts((project / "main_riscv.c").read_text(), RISCV_FACTS) == []
    assert fifo_writes(ours) == fifo_writes(theirs)
    if fifo_writes(ours):
        assert sample_streams(ours) == sample_streams(theirs)


# --------------------------------------------------------------------------- toolchains
# Issue 38 made the RISC-V half build with Debian's toolchain as well. A user of the
# MSDK's xPack toolchain must get the project as before: the files the xPack build reads
# (project.mk, the Makefile, every .c and .h it compiles) equal the ones the converter
# wrote before that change, except for project.mk's toolchain block, which does nothing
# when riscv-none-elf-gcc is installed (tests/emit/test_firmware_build.py runs make on it).
BEFORE_TOOLCHAINS = "69b6ed870c0644ae168bb9010845ce068c2aac9a"
# project.mk ends with the block
TOOLCHAIN_BLOCK = re.compile(r"\n\n# --- the RISC-V toolchain -+\n.*\Z", re.S)
DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits" / "digits.onnx"
DUAL_CORE_OPTIONS = (
    ("MAX78000", ("--riscv",)), ("MAX78000", ("--riscv-flash",)),
    ("MAX78000", ("--riscv-cache",)), ("MAX78000", ("--riscv-exclusive",)),
    ("MAX78000", ("--riscv-debug",)), ("MAX78002", ("--riscv",)),
    ("MAX78002", ("--riscv-debug", "--riscv-exclusive", "--softmax")),
)
_CONVERT_ALL = """
import sys
from onnx2ai8x.cli import main
model, out = sys.argv[1], sys.argv[2]
for i, arg in enumerate(sys.argv[3:]):
    device, *flags = arg.split()
    assert main([model, "--device", device, "-o", f"{out}/{i}", "-q", *flags]) == 0
"""


def _convert_all(code_root: Path | None, out: Path) -> None:
    """The digits example with each DUAL_CORE_OPTIONS, converted by the package under
    `code_root` (None: the installed one), in one interpreter."""
    env = dict(os.environ)
    if code_root is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code_root), env.get("PYTHONPATH", "")])
    cases = [" ".join((device, *flags)) for device, flags in DUAL_CORE_OPTIONS]
    proc = subprocess.run([sys.executable, "-c", _CONVERT_ALL, str(DIGITS), str(out), *cases],
                          env=env, capture_output=True, text=True, timeout=900,
                          cwd=code_root or Path.cwd())
    assert proc.returncode == 0, proc.stderr[-3000:]


def _checkout_before(tmp: Path) -> Path:
    repo = Path(__file__).resolve().parents[2]
    root = tmp / "before"
    root.mkdir()
    try:
        archive = subprocess.run(["git", "archive", BEFORE_TOOLCHAINS, "onnx2ai8x",
                                  "custom_ops", "ai8x_torch"], cwd=repo,
                                 capture_output=True, timeout=120)
    except FileNotFoundError:
        pytest.skip("git is not installed")
    if archive.returncode != 0:
        pytest.skip(f"commit {BEFORE_TOOLCHAINS[:10]} is not in this checkout's history")
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True,
                   timeout=120)
    return root


def test_xpack_build_reads_the_files_it_read_before(tmp_path: Path) -> None:
    now, before = tmp_path / "now", tmp_path / "then"
    _convert_all(None, now)
    _convert_all(_checkout_before(tmp_path), before)
    for i, (device, flags) in enumerate(DUAL_CORE_OPTIONS):
        new, old = now / str(i), before / str(i)
        label = f"{device} {' '.join(flags)}"
        read = sorted(p.name for p in old.iterdir()
                      if p.suffix in (".c", ".h") or p.name in ("Makefile", "project.mk"))
        assert "main_riscv.c" in read and "project.mk" in read, label
        for name in read:
            text = (new / name).read_text()
            if name == "project.mk":
                block = TOOLCHAIN_BLOCK.findall(text)
                assert len(block) == 1 and "riscv64-unknown-elf" in block[0], label
                text = TOOLCHAIN_BLOCK.sub("\n", text)
            assert text == (old / name).read_text(), f"{label}: {name} changed"
        # the one source added is compiled with picolibc only (and the project's
        # manifest, issue 35, which no build reads)
        added = {p.name for p in new.iterdir()} - {p.name for p in old.iterdir()}
        assert added == {"console_picolibc.c", "onnx2ai8x-manifest.txt"}, label
        assert "SRCS += console_picolibc.c" in TOOLCHAIN_BLOCK.search(
            (new / "project.mk").read_text()).group(0)
        if C2TRACE.is_file():
            assert pipeline.trace_of(new) == pipeline.trace_of(old), label
