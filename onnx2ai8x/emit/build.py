"""Build a generated project as firmware, the way a user does (`convert --build`).

The project's own Makefile runs the MSDK's make flow with the Arm GNU toolchain; this
module only finds the tools and the SDK, runs `make` and reads the ELF's sizes with
`arm-none-eabi-size`. A dual-core (--riscv) project's make also builds the RISC-V half
with either RISC-V toolchain (project.mk chooses); its image is sized from its ELF file.
Nothing is installed or downloaded here.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..devices import Device
from ..errors import EXIT_USAGE, Ai8xError
from .elf import berkeley_sizes, read_elf

TOOLS = ("arm-none-eabi-gcc", "arm-none-eabi-size", "make")
# A dual-core (--riscv) project also compiles its RISC-V half, with the SDK's RISC-V
# compiler (RISCV_PREFIX in the part's makefile, Source/GCC/<part>.mk): the MSDK's xPack
# toolchain, or Debian's with picolibc (project.mk selects it when only it is installed).
RISCV_VENDOR = "riscv-none-elf"
RISCV_DEBIAN = "riscv64-unknown-elf"
RISCV_TOOLS = (f"{RISCV_VENDOR}-gcc",)
# Where the SDK's RISC-V loader flow writes the RISC-V image (Source/GCC/<part>.mk:
# RISCV_BUILD_DIR, PROJECT=riscv).
RISCV_ELF = Path("build") / "buildrv" / "riscv.elf"
# the start of the RISC-V image in the Arm image (riscv-loader.S), at _riscv_boot
RISCV_IMAGE_SYMBOL = "_binary_riscv_bin_start"
# An SDK root is recognised by the makefile every SDK project includes.
SDK_MARKER = Path("Libraries") / "libs.mk"
BUILD_TIMEOUT_S = 1800
_FIX_TOOLS = ("install the Arm GNU toolchain and make (Debian/Ubuntu: apt-get install "
              "gcc-arm-none-eabi libnewlib-arm-none-eabi make), or drop --build")


@dataclass(frozen=True)
class ElfSizes:
    """Section sizes of the linked firmware (bytes), as arm-none-eabi-size reports them."""

    text: int
    data: int
    bss: int

    @property
    def flash(self) -> int:
        """What the flash holds: code and constants, plus the initial values of data."""
        return self.text + self.data

    @property
    def sram(self) -> int:
        """What the SRAM holds at run time before heap and stack."""
        return self.data + self.bss


@dataclass(frozen=True)
class RiscvImage:
    """The RISC-V half of a dual-core build: its own ELF and sizes, and the linker's
    memory-region table of its link (region -> bytes; empty when the log has none). The
    Arm ELF holds this image in its flash, at `_riscv_boot`."""

    elf: Path
    sizes: ElfSizes
    regions: tuple[tuple[str, int], ...] = ()

    @property
    def flash(self) -> int:
        return dict(self.regions).get("FLASH") or self.sizes.flash

    @property
    def sram(self) -> int:
        srams = [used for name, used in self.regions if name.startswith("SRAM")]
        return sum(srams) if srams else self.sizes.sram


@dataclass(frozen=True)
class BuildResult:
    """A finished build: the ELF, its sizes and make's output."""

    elf: Path
    target: str
    board: str
    sizes: ElfSizes
    log: str
    # the linker's "Memory region ... Used Size" table as make prints it (region -> bytes;
    # empty when the log has none): it counts alignment gaps and every loaded section,
    # so it is what the part's memories really hold, a few hundred bytes above the sums
    # of the size tool's columns
    regions: tuple[tuple[str, int], ...] = ()
    riscv: RiscvImage | None = None  # a dual-core project's RISC-V half

    def used(self, region: str) -> int | None:
        return dict(self.regions).get(region)


_UNITS = {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}
_REGION = re.compile(r"^\s*(\w+):\s+(\d+)\s*(B|KB|MB|GB)\s+\d+\s*(?:B|KB|MB|GB)\s+[\d.]+%",
                     re.MULTILINE)


def linker_regions(log: str, after: int = -1) -> tuple[tuple[str, int], ...]:
    """The linker's memory-region table (ld --print-memory-usage, which the SDK's
    makefiles ask for) from make's output: (region, used bytes), last link only, or with
    `after` the first table after that position."""
    start = log.rfind("Memory region") if after < 0 else log.find("Memory region", after)
    if start < 0:
        return ()
    end = log.find("Memory region", start + 1)
    table = log[start:end] if after >= 0 and end >= 0 else log[start:]
    return tuple((name, int(value) * _UNITS[unit])
                 for name, value, unit in _REGION.findall(table))


def has_picolibc() -> bool:
    """Debian's RISC-V GCC finds picolibc (picolibc-riscv64-unknown-elf installed)."""
    gcc = shutil.which(f"{RISCV_DEBIAN}-gcc")
    if gcc is None:
        return False
    proc = subprocess.run([gcc, "-print-file-name=picolibc.specs"], capture_output=True,
                          text=True, timeout=60)
    return proc.returncode == 0 and Path(proc.stdout.strip()).is_absolute()


def riscv_toolchain() -> str | None:
    """The RISC-V toolchain a generated project.mk selects here: the MSDK's when it is on
    PATH, else Debian's with picolibc, else None."""
    if shutil.which(f"{RISCV_VENDOR}-gcc"):
        return RISCV_VENDOR
    return RISCV_DEBIAN if has_picolibc() else None


def missing_tools(riscv: bool = False) -> tuple[str, ...]:
    """The build tools that are not on PATH (`riscv`: for a dual-core project, which
    needs one of the RISC-V toolchains; the MSDK's is named when neither is there)."""
    missing = tuple(tool for tool in TOOLS if shutil.which(tool) is None)
    if riscv and riscv_toolchain() is None:
        missing += RISCV_TOOLS
    return missing


def _is_sdk(path: Path) -> bool:
    return (path / SDK_MARKER).is_file()


def find_sdk(maxim_path: str | Path | None, project: Path) -> Path | None:
    """The MSDK to build against: `maxim_path`, else $MAXIM_PATH, else the SDK tree the
    project sits in (Examples/<TARGET>/CNN/<project>), as the project's Makefile looks.
    None: the project's Makefile finds it by itself (in-tree); raises when nothing fits.
    """
    given = maxim_path if maxim_path not in (None, "") else os.environ.get("MAXIM_PATH")
    if given:
        root = Path(given).expanduser()
        if not _is_sdk(root):
            raise Ai8xError("usage.maxim-path", str(root),
                            f"not an MSDK root directory (no {SDK_MARKER.as_posix()} there)",
                            "point --maxim-path or MAXIM_PATH at the SDK's top directory",
                            exit_code=EXIT_USAGE)
        return root.resolve()
    parents = Path(project).resolve().parents
    if len(parents) > 3 and _is_sdk(parents[3]):
        return None
    raise Ai8xError("usage.maxim-path", str(project), "--build needs the MSDK",
                    "set MAXIM_PATH or pass --maxim-path /path/to/msdk", exit_code=EXIT_USAGE)


def check_build_tools(riscv: bool = False) -> None:
    """Refuse before anything is written when `--build` cannot run here."""
    missing = missing_tools(riscv)
    if set(missing) - set(RISCV_TOOLS):
        raise Ai8xError("usage.toolchain", ", ".join(missing), "not found on PATH",
                        _FIX_TOOLS, exit_code=EXIT_USAGE)
    if missing:
        raise Ai8xError("usage.toolchain", ", ".join(missing),
                        "not found on PATH: a --riscv project compiles its RISC-V half too",
                        "install a RISC-V toolchain: Debian/Ubuntu: apt-get install "
                        "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf, or the MSDK's "
                        "(xPack riscv-none-elf-gcc); or drop --build and run `make "
                        "RISCV_LOAD=0` in the project for the Arm half alone",
                        exit_code=EXIT_USAGE)


_SIZE_LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+[0-9a-fA-F]+\s+\S", re.M)


def elf_sizes(elf: Path) -> ElfSizes:
    """text, data and bss of `elf` (arm-none-eabi-size, Berkeley format)."""
    proc = subprocess.run(["arm-none-eabi-size", "--format=berkeley", str(elf)],
                          capture_output=True, text=True, timeout=60)
    match = _SIZE_LINE.search(proc.stdout)
    if proc.returncode != 0 or match is None:
        raise Ai8xError("build.size", str(elf), "arm-none-eabi-size could not read the ELF: "
                        + (proc.stderr.strip() or proc.stdout.strip())[:300],
                        "rebuild the project")
    text, data, bss = (int(x) for x in match.groups())
    return ElfSizes(text=text, data=data, bss=bss)


def fit_problems(sizes: ElfSizes, device: Device) -> list[str]:
    """Where the firmware does not fit the part's flash or SRAM (empty when it fits)."""
    problems = []
    if sizes.flash > device.flash_bytes:
        problems.append(f"text+data {sizes.flash:,} B exceed the {device.flash_bytes:,} B "
                        "of flash")
    if sizes.sram > device.sram_bytes:
        problems.append(f"data+bss {sizes.sram:,} B exceed the {device.sram_bytes:,} B "
                        "of SRAM")
    return problems


def _error_excerpt(log: str, limit: int = 20) -> str:
    lines = [ln for ln in log.splitlines()
             if "error" in ln.lower() or "undefined reference" in ln or "***" in ln]
    return "\n".join((lines or log.splitlines())[-limit:])


def build_project(project: Path, device: Device, *, board: str,
                  maxim_path: Path | None, jobs: int | None = None,
                  env: dict[str, str] | None = None, make_args: tuple[str, ...] = ()
                  ) -> BuildResult:
    """Run the project's Makefile (the SDK's flow) and read the ELF's sizes.

    `maxim_path` None builds in-tree: MAXIM_PATH is removed from the environment so the
    Makefile finds the SDK the project sits in. `env` adds variables (tests set
    PROJ_CFLAGS=-Werror this way; the SDK's makefiles append to it).
    """
    project = Path(project).resolve()
    check_build_tools()
    run_env = dict(os.environ)
    run_env.pop("MAXIM_PATH", None)
    run_env.update(env or {})
    args = ["make", f"-j{jobs or os.cpu_count() or 1}", f"TARGET={device.name}",
            f"BOARD={board}"]
    if maxim_path is not None:
        args.append(f"MAXIM_PATH={maxim_path}")
    args += list(make_args)
    try:
        proc = subprocess.run(args, cwd=project, env=run_env, capture_output=True,
                              text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise Ai8xError("build.timeout", str(project),
                        f"the firmware build took longer than {BUILD_TIMEOUT_S} s",
                        "run make in the project directory to see where it stops") from None
    log = proc.stdout + proc.stderr
    elf = project / "build" / f"{device.name.lower()}.elf"
    if proc.returncode != 0 or not elf.is_file():
        raise Ai8xError("build.failed", str(project),
                        "the firmware build failed (the project itself was written):\n"
                        + _error_excerpt(log),
                        f"run `make` in {project} to see the whole output")
    sizes = elf_sizes(elf)
    problems = fit_problems(sizes, device)
    if problems:
        raise Ai8xError("build.size", str(elf), "; ".join(problems),
                        "reduce the network's weights or the sample data, or use the larger "
                        "part")
    return BuildResult(elf=elf, target=device.name, board=board, sizes=sizes, log=log,
                       regions=linker_regions(log), riscv=riscv_image(project, elf, log))


def riscv_image(project: Path, arm_elf: Path, log: str) -> RiscvImage | None:
    """The RISC-V half the Arm image holds (the SDK's loader, riscv-loader.S, linked
    when RISCV_LOAD=1, defines RISCV_IMAGE_SYMBOL), or None for a single-core build."""
    if RISCV_IMAGE_SYMBOL not in read_elf(arm_elf).symbols:
        return None
    elf = project / RISCV_ELF
    text, data, bss = berkeley_sizes(read_elf(elf))
    # the RISC-V link prints its table first (make builds the RISC-V image before it
    # links the Arm image that holds it)
    at = log.find(RISCV_ELF.as_posix())
    return RiscvImage(elf=elf, sizes=ElfSizes(text=text, data=data, bss=bss),
                      regions=linker_regions(log, after=at) if at >= 0 else ())


def describe(result: BuildResult, device: Device) -> str:
    """One paragraph for the command's output: the flash and SRAM the linker reports
    (make prints the same table), and the size tool's sections."""
    s = result.sizes
    flash = result.used("FLASH") or s.flash
    sram = result.used("SRAM") or s.sram
    text = (f"built {result.elf} ({result.target}, {result.board}): "
            f"{flash:,} B of {device.flash_bytes:,} B flash "
            f"({100 * flash / device.flash_bytes:.1f} %), {sram:,} B of "
            f"{device.sram_bytes:,} B SRAM ({100 * sram / device.sram_bytes:.1f} %)"
            + (" as the linker counts them" if result.regions else "")
            + f"; sections: text {s.text:,}, data {s.data:,}, bss {s.bss:,}")
    rv = result.riscv
    if rv is None:
        return text
    r = rv.sizes
    return (f"{text}\nRISC-V half {rv.elf}: {rv.flash:,} B flash (inside the Arm image's "
            f"flash above, at _riscv_boot), {rv.sram:,} B SRAM"
            + (" as the linker counts them" if rv.regions else "")
            + f"; sections: text {r.text:,}, data {r.data:,}, bss {r.bss:,}")
