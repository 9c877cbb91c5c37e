"""Generated projects build as firmware, the way a user builds them.

The real Arm toolchain (Debian's gcc-arm-none-eabi, libnewlib-arm-none-eabi, make, as
.ci/run installs them) runs the MSDK's own make flow against a temporary copy of
../shared/msdk (the SDK writes its peripheral-driver library into the tree it builds
against). Warnings are errors: PROJ_CFLAGS=-Werror reaches every file the SDK compiles,
make's output must hold no warning, and the project's own sources are compiled once
more with -Wextra -Wformat. The linked sizes must fit the part's flash and SRAM.

Skipped only where the tools are missing and CI is unset; with CI set (as .ci/run runs),
a missing toolchain or SDK fails.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from onnx2ai8x.devices import get_device
from onnx2ai8x.emit.build import BuildResult, build_project, fit_problems, missing_tools
from onnx2ai8x.emit.footprint import estimate, project_files
from tests.conftest import GOLDEN, record_firmware_size
from tests.golden import pipeline

REPO = Path(__file__).resolve().parents[2]
MSDK = GOLDEN.parent / "msdk"
DIGITS = REPO / "examples" / "digits" / "digits.onnx"
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI is set: the firmware build must run here)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private, writable copy of the trimmed MSDK."""
    missing = missing_tools()
    if missing:
        _unavailable(f"firmware toolchain not installed: {', '.join(missing)} (apt-get "
                     "install gcc-arm-none-eabi libnewlib-arm-none-eabi make)")
    if not (MSDK / "Libraries" / "libs.mk").is_file():
        _unavailable(f"the MSDK is absent: {MSDK}")
    root = tmp_path_factory.mktemp("sdk") / "msdk"
    shutil.copytree(MSDK, root, symlinks=True)
    return root


@dataclass(frozen=True)
class Case:
    """One project of the build subset."""

    id: str
    device: str
    board: str = "EvKit_V1"
    golden: str | None = None  # None: the digits example
    sidecar: bool = True  # golden: the case's network.yaml (False: automatic mapping)
    extra: tuple[str, ...] = ()
    expect: tuple[str, ...] = ()  # text the generated C must hold (the feature is there)


CASES = (
    Case("digits-evkit", "MAX78000"),
    Case("digits-fthr", "MAX78000", board="FTHR_RevA"),
    Case("ai85-mnist", "MAX78000", golden="ai85-mnist", expect=("softmax_q17p14_q15",)),
    Case("ai85-cats-dogs-fifo", "MAX78000", golden="ai85-cats-dogs",
         expect=("Feed the input FIFO", "softmax")),
    Case("ai85-chan1024-multipass-mlator", "MAX78000", golden="ai85-suite-chan1024",
         extra=("--mlator",), expect=("mlator",)),
    Case("ai87-kws20_v3_1", "MAX78002", golden="ai87-kws20_v3_1",
         expect=("MXC_F_GCR_IPLL_CTRL_EN", "softmax")),
    Case("ai87-x4-multipass5-stream", "MAX78002", golden="ai87-suite-x4-multipass5-stream",
         expect=("Feed the input FIFO",)),
    Case("ai87-cats-dogs-auto", "MAX78002", golden="ai87-cats-dogs", sidecar=False),
)


def _convert(case: Case, out: Path, tmp: Path) -> None:
    extra = ("--board", case.board, *case.extra)
    if case.golden is None:
        proc = pipeline.convert(DIGITS, case.device, out, *extra)
    else:
        if not GOLDEN.is_dir():
            pytest.skip("golden corpus absent")
        # the automatic mapping is converted without the case's options, as a user
        # without the vendor's command line would
        _, proc = pipeline.convert_case(case.golden, tmp, sidecar=case.sidecar,
                                        options=case.sidecar, extra=extra, out=out)
    assert proc.returncode == 0, proc.stderr
    c_text = "".join(p.read_text() for p in sorted(out.glob("*.c")))
    for needle in case.expect:
        assert needle in c_text, f"{needle!r} missing: the case no longer covers it"


_WARNING = re.compile(r"warning", re.I)


def _strict_recheck(log: str, project: Path) -> list[str]:
    """Compile the project's own sources again with -Wextra -Wformat -Werror, with the
    exact command the SDK's build used (VERBOSE=1 prints it). Returns the files checked.
    """
    checked = []
    for line in log.splitlines():
        if not line.startswith("arm-none-eabi-gcc") or not line.endswith(".c"):
            continue
        args = shlex.split(line)
        source = (project / args[-1]).resolve()
        if source.parent != project:
            continue  # an SDK file
        strict, skip = [], False
        for arg in args:
            if skip:
                skip = False
            elif arg == "-o":
                skip = True
            elif arg not in ("-MD", "-Wno-format"):
                strict.append(arg)
        strict[-1:-1] = ["-fsyntax-only", "-Wextra", "-Wformat", "-Werror"]
        proc = subprocess.run(strict, cwd=project, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, f"{source.name} with -Wextra -Wformat:\n{proc.stderr}"
        checked.append(source.name)
    return sorted(checked)


def _build(project: Path, device: str, board: str, sdk: Path | None,
           make_args: tuple[str, ...] = (),
           sources: frozenset[str] = frozenset({"main.c", "cnn.c"})) -> BuildResult:
    dev = get_device(device)
    result = build_project(project, dev, board=board, maxim_path=sdk, jobs=2,
                           env={"PROJ_CFLAGS": "-Werror"},
                           make_args=("VERBOSE=1", *make_args))
    warnings = [ln for ln in result.log.splitlines() if _WARNING.search(ln)
                and not ln.startswith("arm-none-eabi-")]  # a command line names -W flags
    assert warnings == [], "\n".join(warnings)
    assert sources <= set(_strict_recheck(result.log, project))
    assert result.sizes.text > 0
    assert fit_problems(result.sizes, dev) == []
    assert result.sizes.flash <= dev.flash_bytes and result.sizes.sram <= dev.sram_bytes
    return result


def _estimate_matches(project: Path, device: str, result: BuildResult) -> None:
    """The estimate convert refuses oversize projects by (emit/footprint.py) is within
    4 KB or 5 % of the linked flash and SRAM."""
    fp = estimate(project_files(project), get_device(device))
    for what, guess, real in (("flash", fp.flash, result.sizes.flash),
                              ("SRAM", fp.sram, result.sizes.sram)):
        assert abs(guess - real) <= max(4096, real // 20), \
            f"{what}: estimated {guess} B, linked {real} B"


# Dual-core projects: the trimmed SDK has no RISC-V start-up files, linker script or
# loader, and there is no RISC-V compiler here, so only the Arm half is built
# (RISCV_LOAD=0, as project.mk says): main.c, which starts the RISC-V core at the SDK's
# _riscv_boot symbol. The RISC-V half (main_riscv.c, cnn.c) is compared with the vendor
# tool's instead (tests/emit/test_dual_core.py).
RISCV_CASES = (
    Case("ai85-mnist-riscv", "MAX78000", golden="ai85-mnist", extra=("--riscv",),
         expect=("MXC_SYS_RISCVRun", "CNN_IRQHandler")),
    Case("ai87-x4-multipass5-stream-riscv-fast-fifo", "MAX78002",
         golden="ai87-suite-x4-multipass5-stream", extra=("--riscv", "--fast-fifo"),
         expect=("MXC_SYS_RISCVRun", "Fast FIFO control")),
)


@pytest.mark.parametrize("case", RISCV_CASES, ids=[c.id for c in RISCV_CASES])
def test_dual_core_arm_half_builds(case: Case, sdk: Path, tmp_path: Path,
                                   request: pytest.FixtureRequest) -> None:
    out = tmp_path / case.id
    _convert(case, out, tmp_path)
    result = _build(out, case.device, case.board, sdk, make_args=("RISCV_LOAD=0",),
                    sources=frozenset({"main.c"}))
    compiled = {Path(shlex.split(ln)[-1]).name for ln in result.log.splitlines()
                if ln.startswith("arm-none-eabi-gcc") and ln.endswith(".c")}
    assert "cnn.c" not in compiled and "main_riscv.c" not in compiled  # RISC-V sources
    record_firmware_size(request.config, f"{case.id} (Arm half)", result)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_project_builds_as_firmware(case: Case, sdk: Path, tmp_path: Path,
                                    request: pytest.FixtureRequest) -> None:
    out = tmp_path / case.id
    _convert(case, out, tmp_path)
    result = _build(out, case.device, case.board, sdk)
    record_firmware_size(request.config, case.id, result)
    _estimate_matches(out, case.device, result)
    if case.golden is None and case.board == "EvKit_V1":
        # The same project, copied into the SDK tree, builds without MAXIM_PATH.
        in_tree = sdk / "Examples" / case.device / "CNN" / case.id
        shutil.copytree(out, in_tree, ignore=shutil.ignore_patterns("build"))
        try:
            again = _build(in_tree, case.device, case.board, None)
            assert "Using the MSDK this project sits in" in again.log
            record_firmware_size(request.config, f"{case.id} (in SDK tree)", again)
        finally:
            shutil.rmtree(in_tree)


def test_max78002_project_builds_in_the_sdk_tree(sdk: Path, tmp_path: Path) -> None:
    """In-tree for the second part as well (its own Examples/MAX78002/CNN folder)."""
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus absent")
    case = next(c for c in CASES if c.id == "ai87-kws20_v3_1")
    in_tree = sdk / "Examples" / "MAX78002" / "CNN" / "kws_in_tree"
    _convert(case, in_tree, tmp_path)
    try:
        result = _build(in_tree, "MAX78002", "EvKit_V1", None)
        assert result.elf == in_tree / "build" / "max78002.elf"
    finally:
        shutil.rmtree(in_tree)


def test_wrong_target_is_refused_at_compile_time(sdk: Path, tmp_path: Path) -> None:
    """A MAX78000 project built with TARGET=MAX78002 stops with cnn.h's message."""
    out = tmp_path / "digits"
    _convert(CASES[0], out, tmp_path)
    proc = subprocess.run(["make", "-j2", f"MAXIM_PATH={sdk}", "TARGET=MAX78002"], cwd=out,
                          capture_output=True, text=True, timeout=900,
                          env={k: v for k, v in os.environ.items() if k != "MAXIM_PATH"})
    assert proc.returncode != 0
    assert "generated for MAX78000: build it with TARGET=MAX78000" in proc.stdout + proc.stderr


def test_makefile_without_an_sdk_says_what_to_do(sdk: Path, tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "digits"
    _convert(CASES[0], out, tmp_path)
    proc = subprocess.run(["make"], cwd=out, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "MAXIM_PATH"})
    assert proc.returncode != 0
    assert "set MAXIM_PATH" in proc.stderr and not (out / "build").exists()
    proc = subprocess.run(["make", f"MAXIM_PATH={tmp_path}"], cwd=out, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0 and "is not an MSDK root" in proc.stderr


def test_convert_build_reports_the_sizes(sdk: Path, tmp_path: Path) -> None:
    out = tmp_path / "digits"
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(DIGITS), "--device",
                           "MAX78000", "-o", str(out), "--build", "--maxim-path", str(sdk)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    elf = out / "build" / "max78000.elf"
    assert elf.is_file()
    match = re.search(r"built (\S+) \(MAX78000, EvKit_V1\): ([\d,]+) B of [\d,]+ B flash "
                      r"\([\d.]+ %\), ([\d,]+) B of [\d,]+ B SRAM .*sections: text ([\d,]+), "
                      r"data ([\d,]+)", proc.stdout)
    assert match and Path(match.group(1)) == elf, proc.stdout
    size = subprocess.run(["arm-none-eabi-size", str(elf)], capture_output=True, text=True,
                          check=True).stdout.splitlines()[1].split()
    assert int(match.group(4).replace(",", "")) == int(size[0])
    assert int(match.group(5).replace(",", "")) == int(size[1])
    # flash and SRAM are the linker's figures, the ones make prints (issue 25: the sums
    # of the size tool's columns were a few hundred bytes short of them)
    relink = subprocess.run(["make", f"MAXIM_PATH={sdk}", "-B", "-C", str(out)],
                            capture_output=True, text=True, timeout=900)
    table = dict(re.findall(r"^\s*(FLASH|SRAM):\s+(\d+) B", relink.stdout, re.MULTILINE))
    assert int(match.group(2).replace(",", "")) == int(table["FLASH"]), relink.stdout
    assert int(match.group(3).replace(",", "")) == int(table["SRAM"]), relink.stdout


def test_device_memory_facts_match_the_sdk_linker_scripts() -> None:
    """Device.flash_bytes / sram_bytes are the FLASH and SRAM regions the SDK links into."""
    if not MSDK.is_dir():
        _unavailable(f"the MSDK is absent: {MSDK}")
    region = re.compile(r"^\s*(FLASH|SRAM)\s*\([a-z]+\)\s*:\s*ORIGIN\s*=\s*0x[0-9a-fA-F]+\s*,"
                        r"\s*LENGTH\s*=\s*(0x[0-9a-fA-F]+)", re.M)
    for name in ("MAX78000", "MAX78002"):
        script = (MSDK / "Libraries" / "CMSIS" / "Device" / "Maxim" / name / "Source" / "GCC"
                  / f"{name.lower()}.ld").read_text()
        lengths = {kind: int(value, 16) for kind, value in region.findall(script)}
        dev = get_device(name)
        assert lengths == {"FLASH": dev.flash_bytes, "SRAM": dev.sram_bytes}
        # and every board the converter offers exists in the SDK
        for board in dev.boards:
            assert (MSDK / "Libraries" / "Boards" / name / board / "board.mk").is_file()
