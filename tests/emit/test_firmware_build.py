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

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from onnx2ai8x.devices import get_device
from onnx2ai8x.emit.build import (
    RISCV_DEBIAN,
    RISCV_ELF,
    BuildResult,
    build_project,
    describe,
    fit_problems,
    linker_regions,
    missing_tools,
    riscv_toolchain,
)
from onnx2ai8x.emit.dual_core import PICOLIBC_CONSOLE
from onnx2ai8x.emit.elf import berkeley_sizes, read_elf
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


# the compilers whose command lines VERBOSE=1 prints: the Arm core's and either RISC-V one
COMPILERS = ("arm-none-eabi-gcc", "riscv64-unknown-elf-gcc", "riscv-none-elf-gcc")


def _in_project(path: str, project: Path) -> bool:
    return (project / path).resolve().is_relative_to(project.resolve())


def _strict_recheck(log: str, project: Path) -> list[str]:
    """Compile the project's own sources again with -Wextra -Wformat -Werror, with the
    exact command the SDK's build used (VERBOSE=1 prints it), for either core. Returns
    the files checked.
    """
    checked = []
    for line in log.splitlines():
        if not line.startswith(COMPILERS) or not line.endswith(".c"):
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
            elif arg.startswith("-I") and not _in_project(arg[2:], project):
                # the SDK's headers are not ours to hold to -Wextra (its RISC-V CMSIS
                # header has unused parameters)
                strict += ["-isystem", arg[2:]]
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
           sources: frozenset[str] = frozenset({"main.c", "cnn.c"}),
           werror: bool = True) -> BuildResult:
    """Build with make's output checked for warnings and, with `werror`, every warning an
    error (PROJ_CFLAGS=-Werror from the environment, which the SDK's makefiles append to).
    """
    dev = get_device(device)
    result = build_project(project, dev, board=board, maxim_path=sdk, jobs=2,
                           env={"PROJ_CFLAGS": "-Werror"} if werror else {},
                           make_args=("VERBOSE=1", *make_args))
    warnings = [ln for ln in result.log.splitlines() if _WARNING.search(ln)
                and not ln.startswith(COMPILERS)]  # a command line names -W flags
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
    # the ELF reader that sizes RISC-V images counts as the size tool does
    assert list(berkeley_sizes(read_elf(elf))) == [int(v) for v in size[:3]]
    assert "RISC-V half" not in proc.stdout
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


# --------------------------------------------------------------------------- dual-core
# --riscv projects, both halves: the Arm image and the RISC-V image the SDK's loader flow
# (RISCV_LOAD=1) links into it, with the RISC-V toolchain project.mk selects here (CI:
# Debian's gcc-riscv64-unknown-elf with picolibc-riscv64-unknown-elf, as .ci/run installs
# them). Each RISC-V variant of the command line, for the digits example and two zoo
# networks per part. There is no RISC-V hardware here: what runs on the core is checked
# by the ELF files (where each section lies, what the Arm image holds), not run.
DUAL_CORE_CASES = (
    Case("ai85-mnist-riscv-flash-cache", "MAX78000", golden="ai85-mnist",
         extra=("--riscv-flash", "--riscv-cache"), expect=("MXC_SYS_RISCVRun", "softmax")),
    Case("ai85-cats-dogs-riscv-exclusive-debug", "MAX78000", golden="ai85-cats-dogs",
         extra=("--riscv-exclusive", "--riscv-debug"),
         expect=("Debug_Init();", "MXC_FCR->urvctrl")),
    Case("digits-riscv-debug", "MAX78002", extra=("--riscv-debug",),
         expect=("Debug_Init();",)),
    Case("ai87-kws20_v3_1-riscv-exclusive", "MAX78002", golden="ai87-kws20_v3_1",
         extra=("--riscv-exclusive",), expect=("MXC_FCR->urvctrl", "MXC_F_GCR_IPLL_CTRL_EN")),
    Case("ai87-cats-dogs-riscv-cache-flash", "MAX78002", golden="ai87-cats-dogs",
         extra=("--riscv", "--riscv-cache", "--riscv-flash"), expect=("MXC_SYS_RISCVRun",)),
    Case("ai87-x4-multipass5-stream-riscv-fast-fifo", "MAX78002",
         golden="ai87-suite-x4-multipass5-stream", extra=("--riscv", "--fast-fifo"),
         expect=("MXC_SYS_RISCVRun", "Fast FIFO control")),
)
EM_RISCV = 243
# The peripheral-driver library of the SDK's default variant (soft-float ABI, SPI v1):
# the Arm core's in the SDK (Libraries/PeriphDrivers/bin/<TARGET>/spi-v1_softfp/), the
# RISC-V core's in the project (the RISC-V make runs with BUILD_DIR set, periphdriver.mk).
DRIVER_LIB = "libPeriphDriver_spi-v1_softfp.a"
RISCV_DRIVER_LIB = Path("build") / "buildrv" / "PeriphDriver" / DRIVER_LIB


@pytest.fixture(scope="module")
def riscv_prefix(sdk: Path) -> str:
    """The RISC-V toolchain the projects' make selects here."""
    prefix = riscv_toolchain()
    if prefix is None:
        _unavailable("no RISC-V toolchain (apt-get install gcc-riscv64-unknown-elf "
                     "picolibc-riscv64-unknown-elf, or the MSDK's riscv-none-elf-gcc)")
    return prefix


@pytest.fixture(scope="module")
def driver_libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Part -> a RISC-V peripheral-driver library built by an earlier test (one per part
    and session: every generated project compiles the drivers with the same flags)."""
    return {"dir": tmp_path_factory.mktemp("drivers")}


def _reuse_driver_libraries(project: Path, sdk: Path, device: str, store: dict) -> None:
    """Make the drivers built for an earlier project current for this one. The SDK's
    make rebuilds a library older than the project.mk it depends on, so each new project
    would compile the ~100 driver files of each core again: the Arm library in the SDK
    is touched, the RISC-V one copied into the project's build folder."""
    arm = sdk / "Libraries" / "PeriphDrivers" / "bin" / device / "spi-v1_softfp" / DRIVER_LIB
    if arm.is_file():
        os.utime(arm)
    if device in store:
        (project / RISCV_DRIVER_LIB).parent.mkdir(parents=True)
        shutil.copyfile(store[device], project / RISCV_DRIVER_LIB)


def _keep_driver_library(project: Path, device: str, store: dict) -> None:
    if device not in store:
        store[device] = store["dir"] / f"{device}-{DRIVER_LIB}"
        shutil.copyfile(project / RISCV_DRIVER_LIB, store[device])


def _value(expr: str, names: dict[str, int]) -> int:
    """A linker-script value: a number, a name, or a difference of the two."""
    terms = [t.strip() for t in expr.split("-")]
    values = [names[t] if t in names else int(t, 0) for t in terms]
    return values[0] - sum(values[1:])


def riscv_memories(project: Path, sdk: Path, device: str) -> dict[str, tuple[int, int]]:
    """Memory -> (origin, length) of the SDK's RISC-V linker script (common.ld), with the
    flash start and length make wrote for this build (build/buildrv/common_riscv.ld)."""
    names = {}
    for name, expr in re.findall(r"^(\w+)\s*=\s*([^;]+);", (project / "build" / "buildrv"
                                 / "common_riscv.ld").read_text(), re.M):
        names[name] = _value(expr, names)
    script = (sdk / "Libraries" / "CMSIS" / "Device" / "Maxim" / device / "Source" / "GCC"
              / "common.ld").read_text()
    names["_FlashLength_"] = names["__FlashLength"]
    return {name: (_value(origin, names), _value(length, names)) for name, origin, length in
            re.findall(r"^\s*(\w+)\s*\(\w+\)\s*:\s*ORIGIN\s*=\s*(\w+)\s*,\s*LENGTH\s*=\s*"
                       r"(\w+)", script, re.M)}


def _inside(addr: int, size: int, memories: dict[str, tuple[int, int]]) -> str | None:
    return next((name for name, (origin, length) in memories.items()
                 if origin <= addr and addr + size <= origin + length), None)


def _check_riscv_image(project: Path, sdk: Path, device: str, result: BuildResult,
                       prefix: str) -> None:
    """The RISC-V image's sections lie in the RISC-V linker script's memories, its flash
    starts at the Arm image's `_riscv_boot`, and the Arm image holds its bytes there."""
    rv = result.riscv
    assert rv is not None and rv.elf == project / RISCV_ELF
    image = read_elf(rv.elf)
    assert image.machine == EM_RISCV
    memories = riscv_memories(project, sdk, device)
    arm = read_elf(result.elf)
    boot = arm.symbols["_riscv_boot"]
    assert memories["FLASH"][0] == boot == arm.symbols["_binary_riscv_bin_start"]
    dev = get_device(device)
    assert boot + memories["FLASH"][1] == FLASH_BASE + dev.flash_bytes  # the rest of flash
    raw = rv.elf.read_bytes()
    loaded = 0
    for sec in image.allocated():
        where = _inside(sec.addr, sec.size, memories)
        assert where is not None, f"{sec.name} at 0x{sec.addr:08x} (+{sec.size})"
        if sec.has_bytes:  # its bytes come from flash: the Arm image's, at the same place
            assert _inside(sec.load, sec.size, memories) == "FLASH", sec.name
            assert arm.bytes_at(sec.load, sec.size) == \
                raw[sec.offset:sec.offset + sec.size], sec.name
            loaded += sec.size
    assert loaded == rv.sizes.flash > 0
    # the sizes --build reports are the toolchain's own size tool's
    size = subprocess.run([f"{prefix}-size", "--format=berkeley", str(rv.elf)],
                          capture_output=True, text=True, check=True).stdout
    assert [int(v) for v in size.splitlines()[1].split()[:3]] == \
        [rv.sizes.text, rv.sizes.data, rv.sizes.bss]
    assert rv.flash >= rv.sizes.flash and rv.sram >= rv.sizes.sram
    if prefix == RISCV_DEBIAN:
        # printf's stream is the console's: the linker keeps console_put only when
        # picolibc's stdout (the stream it sits in) is used, and nothing discards output
        assert {"console_put", "stdout", "printf"} <= set(image.symbols)
        link = (project / "build" / "buildrv" / "ln_args.txt").read_text()
        assert "dummyhost" not in link and "-lc_nano" not in link


FLASH_BASE = 0x10000000


@pytest.mark.parametrize("case", DUAL_CORE_CASES, ids=[c.id for c in DUAL_CORE_CASES])
def test_dual_core_project_builds(case: Case, sdk: Path, riscv_prefix: str,
                                  driver_libraries: dict, tmp_path: Path,
                                  request: pytest.FixtureRequest) -> None:
    out = tmp_path / case.id
    _convert(case, out, tmp_path)
    _reuse_driver_libraries(out, sdk, case.device, driver_libraries)
    sources = {"main.c", "main_riscv.c", "cnn.c"}
    if riscv_prefix == RISCV_DEBIAN:
        sources.add(PICOLIBC_CONSOLE)
    # No PROJ_CFLAGS from the environment: make exports such a variable with what the
    # Arm build appended to it, and the MAX78002 board's Arm-only display flags
    # (-DTFT_NEWHAVEN) then break the RISC-V build of board.c. Warnings are still caught
    # in make's output and by the strict second compile.
    result = _build(out, case.device, case.board, sdk, sources=frozenset(sources),
                    werror=False)
    assert f"{riscv_prefix}-gcc " in result.log
    # every RISC-V command, the driver library's sub-make's too, used that toolchain
    assert all(ln.startswith(riscv_prefix) for ln in result.log.splitlines()
               if ln.startswith(("riscv64-unknown-elf-", "riscv-none-elf-")))
    _keep_driver_library(out, case.device, driver_libraries)
    _check_riscv_image(out, sdk, case.device, result, riscv_prefix)
    record_firmware_size(request.config, case.id, result)
    record_firmware_size(request.config, f"{case.id} (RISC-V half)", SimpleNamespace(
        target=result.target, board=result.board, sizes=result.riscv.sizes))
    if case is DUAL_CORE_CASES[0]:
        # `make RISCV_LOAD=0` (project.mk) builds the Arm half alone (relinked: make
        # does not know the image it made holds the RISC-V half)
        result.elf.unlink()
        arm = build_project(out, get_device(case.device), board=case.board,
                            maxim_path=sdk, jobs=2, make_args=("RISCV_LOAD=0",))
        assert arm.riscv is None and arm.sizes.text < result.sizes.text


def test_convert_build_reports_both_halves(sdk: Path, riscv_prefix: str,
                                           tmp_path: Path) -> None:
    """`convert --riscv --build`: the digits example, built with every warning an error
    (compiler and linker), reports the Arm image's and the RISC-V half's figures."""
    out = tmp_path / "digits-riscv"
    # (MAX78000: its board adds no Arm-only flags to PROJ_CFLAGS, see above)
    env = dict(os.environ, PROJ_CFLAGS="-Werror", PROJ_LDFLAGS="-Wl,--fatal-warnings")
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(DIGITS), "--device",
                           "MAX78000", "--riscv", "-o", str(out), "--build", "--maxim-path",
                           str(sdk), "--json"], capture_output=True, text=True,
                          timeout=1800, env=env)
    assert proc.returncode == 0, proc.stderr
    rv = json.loads(proc.stdout)["firmware"]["riscv"]
    assert Path(rv["elf"]) == out / RISCV_ELF
    text, data, bss = berkeley_sizes(read_elf(out / RISCV_ELF))
    assert (rv["text"], rv["data"], rv["bss"]) == (text, data, bss)
    # flash and SRAM as the RISC-V link's memory table counts them: the RISC-V image
    # linked again (make's output shows the table), then the summary line says the same
    (out / RISCV_ELF).unlink()
    again = build_project(out, get_device("MAX78000"), board="EvKit_V1", maxim_path=sdk,
                          jobs=2, env=env)
    table = linker_regions(again.log, after=again.log.find("buildrv/riscv.elf"))
    assert rv["flash"] == dict(table)["FLASH"] == again.riscv.flash >= text + data
    assert rv["sram"] == sum(v for k, v in table if k.startswith("SRAM")) \
        == again.riscv.sram >= data + bss
    assert re.search(rf"RISC-V half \S+riscv.elf: {rv['flash']:,} B flash .*, "
                     rf"{rv['sram']:,} B SRAM", describe(again, get_device("MAX78000")))


# What make hands the SDK's RISC-V rules, with stand-in compilers on PATH: the toolchain
# block of project.mk changes nothing where the MSDK's riscv-none-elf-gcc is installed
# (or chosen), and selects Debian's with picolibc where only it is.
_SHELL_TOOLS = ("sh", "uname", "echo", "cat", "grep", "cut", "sed", "mkdir", "touch", "rm")
_QUERIED = ("PREFIX", "CC", "MARCH", "STD_LIBS", "SRCS", "CFLAGS", "AFLAGS", "LDFLAGS")


def _make_variables(project: Path, sdk: Path, tools: tuple[str, ...], bin_dir: Path,
                    *args: str) -> dict[str, str]:
    shutil.rmtree(bin_dir, ignore_errors=True)
    bin_dir.mkdir()
    for tool in tools:  # compilers that print nothing (the SDK asks the linker's --help)
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / tool).chmod(0o755)
    for tool in _SHELL_TOOLS:  # what the SDK's makefiles run besides the compilers
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    env = {"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/")}
    proc = subprocess.run([shutil.which("make"), f"MAXIM_PATH={sdk}", "RISCV_CORE=1",
                           "RISCV_LOAD=0", "query", f"QUERY_VAR={' '.join(_QUERIED)}", *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = dict(ln.replace(str(project), "<project>").split("=", 1)
                 for ln in proc.stdout.splitlines() if ln.split("=", 1)[0] in _QUERIED)
    assert set(found) == set(_QUERIED), proc.stdout
    return found


def test_toolchain_block_selects_only_without_the_msdk_toolchain(sdk: Path,
                                                                 tmp_path: Path) -> None:
    from tests.emit.test_dual_core import TOOLCHAIN_BLOCK

    case = Case("digits-riscv", "MAX78000", extra=("--riscv",))
    ours, before = tmp_path / "ours", tmp_path / "before"
    _convert(case, ours, tmp_path)
    shutil.copytree(ours, before)
    mk = (ours / "project.mk").read_text()
    (before / "project.mk").write_text(TOOLCHAIN_BLOCK.sub("\n", mk))
    bin_dir = tmp_path / "bin"
    vendor, debian = ("riscv-none-elf-gcc",), ("riscv64-unknown-elf-gcc",)
    sdk_own = _make_variables(before, sdk, vendor, bin_dir)
    assert sdk_own["PREFIX"] == "riscv-none-elf" and "-lc_nano" in sdk_own["STD_LIBS"]
    # the MSDK's toolchain installed (alone or with Debian's), or chosen: as without it
    assert _make_variables(ours, sdk, vendor, bin_dir) == sdk_own
    assert _make_variables(ours, sdk, vendor + debian, bin_dir) == sdk_own
    assert _make_variables(ours, sdk, debian, bin_dir, "RISCV_PREFIX=riscv-none-elf") == \
        _make_variables(before, sdk, debian, bin_dir, "RISCV_PREFIX=riscv-none-elf")
    # neither: the SDK's default stays, and make names the MSDK's compiler
    assert _make_variables(ours, sdk, (), bin_dir) == _make_variables(before, sdk, (), bin_dir)
    # Debian's alone: picolibc, the rv32 libraries, and the console stream
    picolibc = _make_variables(ours, sdk, debian, bin_dir)
    assert picolibc["PREFIX"] == "riscv64-unknown-elf"
    assert picolibc["STD_LIBS"].split() == ["-lc", "-lm"]
    for flags in ("CFLAGS", "AFLAGS", "LDFLAGS"):
        assert "-misa-spec=2.2 --specs=picolibc.specs" in picolibc[flags]
    assert PICOLIBC_CONSOLE in picolibc["SRCS"].split()
    assert PICOLIBC_CONSOLE not in sdk_own["SRCS"].split()
