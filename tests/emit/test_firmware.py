"""The firmware around the network: clocks, start-up, project files, --build's checks.

These run without the Arm toolchain; test_firmware_build.py builds the projects.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x.devices import MAX78000, MAX78002, get_device
from onnx2ai8x.emit.build import ElfSizes, find_sdk, fit_problems
from onnx2ai8x.emit.firmware import CnnClock, clock_plan
from onnx2ai8x.emit.project import write_project
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.options import EmitOptions
from tests.emit.synthetic import one_conv
from tests.emit.test_project import _data
from tests.lowering import lowered

REPO = Path(__file__).resolve().parents[2]
DIGITS = REPO / "examples" / "digits" / "digits.onnx"


def _project(tmp_path: Path, device: str = "MAX78000", **options) -> Path:
    pl = one_conv(device=device)
    out = tmp_path / "proj"
    opts = EmitOptions(**options)
    write_project(lowered(pl, opts), out, options=opts,
                  sample=np.zeros((4, 8, 8), dtype=np.int64), outputs=[], data=_data(pl))
    return out


def test_clock_plan_max78000_runs_from_the_apb_clock() -> None:
    plan = clock_plan(MAX78000, pipeline=False)
    assert plan.system_mhz == 100 and not plan.enable_ipll and plan.run is None
    assert plan.load == CnnClock("PCLK", 1, 50)
    assert plan.load.description == "APB (50 MHz) div 1"


def test_clock_plan_max78002_loads_slowly_and_runs_at_the_pll_rate() -> None:
    plan = clock_plan(MAX78002, pipeline=True)
    assert plan.system_mhz == 120 and plan.enable_ipll
    assert plan.load == CnnClock("IPLL", 4, 200) and plan.run == CnnClock("IPLL", 1, 200)
    # without the pipeline the accelerator must stay at or below 50 MHz: 200 / 4
    slow = clock_plan(MAX78002, pipeline=False)
    assert slow.run is None and slow.load.divider == 4
    assert 200 // slow.load.divider <= MAX78002.no_pipeline_mhz


def _main_body(text: str) -> str:
    return text[text.index("int main(void)"):]


def test_main_starts_as_the_vendor_examples_do(tmp_path: Path) -> None:
    main = _main_body((_project(tmp_path) / "main.c").read_text())
    order = ["MXC_ICC_Enable(MXC_ICC0)", "MXC_SYS_Clock_Select(MXC_SYS_CLOCK_IPO)",
             "SystemCoreClockUpdate()", "MXC_Delay(SEC(2))",
             "cnn_enable(MXC_S_GCR_PCLKDIV_CNNCLKSEL_PCLK, MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV1)",
             "cnn_init()", "cnn_load_weights()", "cnn_load_bias()", "cnn_configure()",
             "load_input()", "cnn_start()", "MXC_LP_EnterSleepMode()", "check_output()",
             "cnn_disable()"]
    positions = [main.index(call) for call in order]
    assert positions == sorted(positions)
    assert "ipll" not in main.lower()


def test_max78002_main_starts_the_pll_and_switches_the_cnn_clock(tmp_path: Path) -> None:
    main = _main_body((_project(tmp_path, "MAX78002") / "main.c").read_text())
    order = ["MXC_SYS_Clock_Select(MXC_SYS_CLOCK_IPO)",
             "MXC_GCR->ipll_ctrl |= MXC_F_GCR_IPLL_CTRL_EN",
             "cnn_enable(MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL, MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV4)",
             "load_input()",
             "cnn_clock(MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL, MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV1)",
             "cnn_start()", "MXC_LP_EnterSleepMode()",
             "cnn_clock(MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL, MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV4)",
             "cnn_disable()", "MXC_GCR->ipll_ctrl &= ~MXC_F_GCR_IPLL_CTRL_EN"]
    positions = [main.index(call) for call in order]
    assert positions == sorted(positions)


def test_pipeline_off_keeps_one_cnn_clock(tmp_path: Path) -> None:
    main = (_project(tmp_path, "MAX78002", pipeline=False) / "main.c").read_text()
    assert "cnn_clock(" not in main
    assert "MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL, MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV4" in main


@pytest.mark.parametrize("device,board", [("MAX78000", None), ("MAX78000", "FTHR_RevA"),
                                          ("MAX78002", None)])
def test_vscode_settings_name_target_and_board(tmp_path: Path, device: str,
                                               board: str | None) -> None:
    out = _project(tmp_path, device, board=board)
    settings = json.loads((out / ".vscode" / "settings.json").read_text())
    assert settings["target"] == device
    assert settings["board"] == (board or "EvKit_V1")
    assert settings["M4_OCD_target_file"] == f"{device.lower()}.cfg"
    for name in ("tasks.json", "launch.json"):
        json.loads((out / ".vscode" / name).read_text())  # valid JSON
    tasks = {t["label"] for t in json.loads((out / ".vscode" / "tasks.json").read_text())
             ["tasks"]}
    assert {"build", "clean", "flash", "flash & run"} <= tasks
    makefile = (out / "Makefile").read_text()
    assert f"TARGET ?= {device}\n" in makefile
    assert f"BOARD ?= {board or 'EvKit_V1'}\n" in makefile
    readme = (out / "README.md").read_text()
    assert f"build/{device.lower()}.elf" in readme and "*** PASS ***" in readme


def test_makefile_follows_the_sdk_conventions(tmp_path: Path) -> None:
    makefile = (_project(tmp_path) / "Makefile").read_text()
    for line in ("COMPILER ?= GCC", "include $(PROJECTMK)", "include $(LIBS_DIR)/libs.mk",
                 "include $(CMSIS_ROOT)/Device/Maxim/$(TARGET_UC)/Source/$(COMPILER)/"
                 "$(TARGET_LC).mk",
                 "MAXIM_PATH := $(abspath $(CURDIR)/../../../..)"):
        assert line in makefile
    assert makefile.index("include $(PROJECTMK)") < makefile.index("include $(LIBS_DIR)")


def test_unknown_board_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(Ai8xError, match="use one of: EvKit_V1") as info:
        _project(tmp_path, "MAX78002", board="FTHR_RevA")
    assert info.value.exit_code == 2
    assert not (tmp_path / "proj").exists()


def test_board_names_are_matched_without_case(tmp_path: Path) -> None:
    out = _project(tmp_path, board="fthr_reva")
    assert "BOARD ?= FTHR_RevA\n" in (out / "Makefile").read_text()


def test_fit_problems_name_the_memory() -> None:
    dev = get_device("MAX78000")
    assert fit_problems(ElfSizes(text=1000, data=10, bss=10), dev) == []
    over = fit_problems(ElfSizes(text=dev.flash_bytes, data=1, bss=dev.sram_bytes), dev)
    assert len(over) == 2 and "flash" in over[0] and "SRAM" in over[1]


def test_find_sdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAXIM_PATH", raising=False)
    sdk = tmp_path / "sdk"
    (sdk / "Libraries").mkdir(parents=True)
    (sdk / "Libraries" / "libs.mk").write_text("")
    assert find_sdk(sdk, tmp_path / "p") == sdk.resolve()
    monkeypatch.setenv("MAXIM_PATH", str(sdk))
    assert find_sdk(None, tmp_path / "p") == sdk.resolve()
    monkeypatch.delenv("MAXIM_PATH")
    # in-tree: the project's Makefile finds it by itself
    assert find_sdk(None, sdk / "Examples" / "MAX78000" / "CNN" / "p") is None
    with pytest.raises(Ai8xError, match="needs the MSDK"):
        find_sdk(None, tmp_path / "p")
    with pytest.raises(Ai8xError, match="not an MSDK root"):
        find_sdk(tmp_path, tmp_path / "p")


def _fake_tools(directory: Path, more: tuple[str, ...] = ()) -> dict[str, str]:
    """An environment whose PATH holds stand-ins for the build tools (they do nothing)."""
    directory.mkdir()
    for tool in ("arm-none-eabi-gcc", "arm-none-eabi-size", "make", *more):
        path = directory / tool
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if k != "MAXIM_PATH"}
    env["PATH"] = str(directory)
    return env


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_build_without_toolchain_writes_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MAXIM_PATH"}
    env["PATH"] = str(tmp_path)  # nothing there
    out = tmp_path / "proj"
    proc = _cli([str(DIGITS), "-o", str(out), "--build"], env)
    assert proc.returncode == 2, proc.stderr
    assert "arm-none-eabi-gcc" in proc.stderr and "apt-get install" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_riscv_build_without_the_riscv_compiler_writes_nothing(tmp_path: Path) -> None:
    env = _fake_tools(tmp_path / "bin")  # the Arm tools only
    out = tmp_path / "proj"
    proc = _cli([str(DIGITS), "-o", str(out), "--riscv", "--build"], env)
    assert proc.returncode == 2, proc.stderr
    assert "riscv-none-elf-gcc" in proc.stderr and "RISCV_LOAD=0" in proc.stderr
    assert "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_riscv_build_without_picolibc_writes_nothing(tmp_path: Path) -> None:
    """Debian's RISC-V GCC alone does not do: it needs picolibc (its GCC prints the
    specs file's full path only when picolibc is installed; this stub prints nothing)."""
    env = _fake_tools(tmp_path / "bin", ("riscv64-unknown-elf-gcc",))
    out = tmp_path / "proj"
    proc = _cli([str(DIGITS), "-o", str(out), "--riscv", "--build"], env)
    assert proc.returncode == 2, proc.stderr
    assert "picolibc-riscv64-unknown-elf" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_build_without_sdk_writes_nothing(tmp_path: Path) -> None:
    env = _fake_tools(tmp_path / "bin")
    out = tmp_path / "proj"
    proc = _cli([str(DIGITS), "-o", str(out), "--build"], env)
    assert proc.returncode == 2 and "set MAXIM_PATH or pass --maxim-path" in proc.stderr
    proc = _cli([str(DIGITS), "-o", str(out), "--build", "--maxim-path", str(tmp_path)], env)
    assert proc.returncode == 2 and "not an MSDK root" in proc.stderr
    assert not out.exists()


def test_failed_build_is_reported_and_keeps_the_project(tmp_path: Path) -> None:
    env = _fake_tools(tmp_path / "bin")
    (tmp_path / "bin" / "make").write_text("#!/bin/sh\necho 'main.c:1: error: boom'\nexit 2\n")
    sdk = tmp_path / "sdk"
    (sdk / "Libraries").mkdir(parents=True)
    (sdk / "Libraries" / "libs.mk").write_text("")
    out = tmp_path / "proj"
    proc = _cli([str(DIGITS), "-o", str(out), "--build", "--maxim-path", str(sdk)], env)
    assert proc.returncode == 1
    assert "error[build.failed]" in proc.stderr and "main.c:1: error: boom" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (out / "main.c").is_file()  # the written project stays for inspection


def test_elf_reader_refuses_what_is_not_a_32_bit_elf(tmp_path: Path) -> None:
    from onnx2ai8x.emit.elf import read_elf

    for name, blob in (("text.elf", b"not an ELF file at all, but long enough " * 2),
                       ("elf64.elf", b"\x7fELF\x02\x01" + bytes(58)),
                       ("short.elf", b"\x7fELF\x01\x01")):
        (tmp_path / name).write_bytes(blob)
        with pytest.raises(Ai8xError, match="not a 32-bit little-endian ELF") as err:
            read_elf(tmp_path / name)
        assert err.value.code == "build.elf"
    with pytest.raises(Ai8xError, match="cannot be read"):
        read_elf(tmp_path / "absent.elf")
