"""The firmware around the network: clocks, and the project files a user opens.

A generated project is an ordinary MSDK project. What its `main.c` does before and
around the inference follows the vendor's CNN examples (facts from the vendor tool's
`izer/toplevel.py`): the internal primary oscillator as system clock, a start-up delay
that leaves a debugger time to attach, the accelerator clock, and sleeping until the
accelerator's interrupt. The `.vscode/` files use the keys of the SDK's VS Code project
settings (VSCode-Maxim) so that the SDK's tooling finds the target, the board and the
ELF. Everything here is plain values; the templates and `json` lay them out.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..devices import Device

# The vendor's "balance power" default on parts with an IPLL: kernels, bias and input
# are loaded with the accelerator clock divided by 4, and only the inference itself runs
# at the full PLL rate (izer/toplevel.py: cdiv = 4 if pll and balance_power).
LOAD_DIVIDER_WITH_PLL = 4

# Seconds main() waits after reset before the accelerator code runs. The vendor's
# examples keep this delay (its --debugwait, default 2): once the core sleeps in the
# wait loop a debugger can no longer halt it, so a board whose firmware sleeps right
# after reset could not be re-flashed.
DEBUG_WAIT_SECONDS = 2


@dataclass(frozen=True)
class CnnClock:
    """One accelerator clock setting: `MXC_S_GCR_PCLKDIV_CNNCLKSEL_<source>` and
    `MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV<divider>`."""

    source: str  # "PCLK" (the APB clock) or "IPLL"
    divider: int
    base_mhz: int

    @property
    def description(self) -> str:
        name = "PLL" if self.source == "IPLL" else "APB"
        return f"{name} ({self.base_mhz} MHz) div {self.divider}"


@dataclass(frozen=True)
class ClockPlan:
    """The clocks main.c sets up."""

    system_mhz: int  # the IPO, selected as system clock
    enable_ipll: bool  # start the IPLL at boot (cnn_enable waits for it to lock)
    load: CnnClock  # while weights, bias and input are loaded
    run: CnnClock | None  # switched to just before cnn_start(), back to `load` after


def _power_of_two_at_least(n: int) -> int:
    value = 1
    while value < n:
        value *= 2
    return value


def default_divider(mhz: int, pipeline: bool, no_pipeline_mhz: int) -> int:
    """The vendor's default CNN clock divider: 1 with the pipeline, else the smallest
    power of two that keeps the accelerator at or below its no-pipeline limit."""
    if pipeline:
        return 1
    return _power_of_two_at_least(-(-mhz // no_pipeline_mhz))


def clock_plan(device: Device, pipeline: bool, pll: bool | None = None,
               balance: bool = True, divider: int | None = None) -> ClockPlan:
    """The clocks the options select (seed 000, "CNN clock"; the vendor's --pll,
    --balance-speed/--max-speed, --clock-divider).

    The accelerator runs from the IPLL where the part has one (`pll` None), else from the
    APB clock, at `divider` (default: 1 with the pipeline, else the lowest that keeps it
    within `no_pipeline_mhz`). Balanced ("balance power", the default) with the IPLL and
    the pipeline, weights, bias and input load at a quarter of the PLL rate and only the
    inference runs at the selected rate; with --max-speed everything runs at it.
    """
    use_pll = bool(device.pll_mhz) if pll is None else pll and bool(device.pll_mhz)
    source = "IPLL" if use_pll else "PCLK"
    base = device.pll_mhz if use_pll else device.apb_mhz
    if divider is None:
        divider = default_divider(base, pipeline, device.no_pipeline_mhz)
    selected = CnnClock(source, divider, base)
    if use_pll and balance:
        load = CnnClock(source, LOAD_DIVIDER_WITH_PLL, base)
        run = selected if pipeline else None
    else:
        load, run = selected, None
    return ClockPlan(system_mhz=device.ipo_mhz, enable_ipll=use_pll, load=load, run=run)


def options_clock_plan(device: Device, pipeline: bool, options) -> ClockPlan:
    """clock_plan for a project's EmitOptions."""
    return clock_plan(device, pipeline, options.pll, options.balance_speed,
                      options.clock_divider)


@dataclass(frozen=True)
class PowerPlan:
    """What main.c does around the inference for the power and run-mode options."""

    energy: bool  # --energy: idle span, then 100x weights, 100x input, 100x inference
    # the power monitor's trigger pins ((port, pin) system, CNN), None: the EVKit's LEDs
    pmon: tuple[tuple[int, int], tuple[int, int]] | None
    forever: bool
    one_shot: int  # --one-shot: the number of cnn_continue() calls after the start, or 0
    wfi: bool
    deepsleep: bool
    riscv_debug: bool
    riscv_exclusive: bool


def power_plan(device: Device, options, final_layer: int) -> PowerPlan:
    """The power and run-mode options as main.c applies them. With --one-shot the
    accelerator stops after every layer: main continues it once per layer after the
    first, up to the final layer."""
    return PowerPlan(energy=options.energy,
                     pmon=device.pmon_pins if options.energy else None,
                     forever=options.forever,
                     one_shot=final_layer if options.one_shot else 0,
                     wfi=options.wfi, deepsleep=options.deepsleep,
                     riscv_debug=options.riscv_debug,
                     riscv_exclusive=options.riscv_exclusive)


def _json(value: object) -> str:
    return json.dumps(value, indent=4) + "\n"


# Paths below are VS Code variables resolved by the editor, not by us.
_SDK = "${config:MAXIM_PATH}"
_TOOLS_PATH = ("${config:OCD_path}", "${config:ARM_GCC_path}/bin", "${config:Make_path}")
_MAKE_ARGS = ("TARGET=${config:target} BOARD=${config:board} "
              "MAXIM_PATH=${config:MAXIM_PATH} PROJECT=${config:project_name}")
_GDB_FLASH = ("--cd=\"${workspaceFolder}\"", "--se=\"build/${config:program_file}\"",
              "--symbols=build/${config:symbol_file}",
              "-x=\"${workspaceFolder}/.vscode/flash.gdb\"")
_OCD_ARGS = ("${config:OCD_path} ${config:M4_OCD_interface_file} "
             "${config:M4_OCD_target_file}")


def _settings(device: Device, board: str) -> dict:
    """settings.json: the keys the SDK's VS Code tasks and debugger read."""
    include = ["${workspaceFolder}", "${workspaceFolder}/**",
               f"{_SDK}/Libraries/Boards/${{config:target}}/Include",
               f"{_SDK}/Libraries/Boards/${{config:target}}/${{config:board}}/Include",
               f"{_SDK}/Libraries/CMSIS/Device/Maxim/${{config:target}}/Include",
               f"{_SDK}/Libraries/CMSIS/5.9.0/Core/Include",
               f"{_SDK}/Libraries/PeriphDrivers/Include/${{config:target}}",
               f"{_SDK}/Libraries/MiscDrivers",
               f"{_SDK}/Libraries/MiscDrivers/LED",
               f"{_SDK}/Libraries/MiscDrivers/PushButton"]
    browse = ["${workspaceFolder}",
              f"{_SDK}/Libraries/Boards/${{config:target}}/Source",
              f"{_SDK}/Libraries/Boards/${{config:target}}/${{config:board}}/Source",
              f"{_SDK}/Libraries/PeriphDrivers/Source",
              f"{_SDK}/Libraries/MiscDrivers"]
    unix_path = ":".join((*_TOOLS_PATH, "${env:PATH}"))
    return {
        "target": device.name,
        "board": board,
        "project_name": "${workspaceFolderBasename}",
        "program_file": "${config:project_name}.elf",
        "symbol_file": "${config:program_file}",
        "M4_OCD_interface_file": "cmsis-dap.cfg",
        "M4_OCD_target_file": f"{device.name.lower()}.cfg",
        # The SDK installer's tool locations; MAXIM_PATH itself is a user setting.
        "v_Arm_GCC": "10.3",
        "OCD_path": f"{_SDK}/Tools/OpenOCD",
        "ARM_GCC_path": f"{_SDK}/Tools/GNUTools/${{config:v_Arm_GCC}}",
        "Make_path": f"{_SDK}/Tools/GNUTools/Make",
        "MSYS_path": f"{_SDK}/Tools/MSYS2",
        "terminal.integrated.env.linux": {"PATH": unix_path,
                                          "MAXIM_PATH": "${config:MAXIM_PATH}"},
        "terminal.integrated.env.osx": {"PATH": unix_path,
                                        "MAXIM_PATH": "${config:MAXIM_PATH}"},
        "terminal.integrated.env.windows": {
            "Path": ";".join((*_TOOLS_PATH, "${config:MSYS_path}/usr/bin", "${env:PATH}")),
            "MAXIM_PATH": "${config:MAXIM_PATH}"},
        "C_Cpp.default.includePath": include,
        "C_Cpp.default.browse.path": browse,
        "C_Cpp.default.defines": [],
        # The SDK's build writes the compiler's -D flags here for IntelliSense.
        "C_Cpp.default.forcedInclude": ["${workspaceFolder}/build/project_defines.h"],
    }


def _task(label: str, command: str, args: list[str] | None = None,
          depends: list[str] | None = None) -> dict:
    task: dict = {"label": label, "type": "shell", "command": command}
    if args is not None:
        task["args"] = args
    task.update({"group": "build", "problemMatcher": []})
    if depends:
        task["dependsOn"] = depends
    return task


def _tasks() -> dict:
    """tasks.json: build, clean, flash (the labels the SDK's projects use)."""
    make = "make -r -j 8 --output-sync=target --no-print-directory"
    return {"version": "2.0.0", "tasks": [
        _task("build", f"{make} {_MAKE_ARGS}"),
        _task("clean", f"{make} clean {_MAKE_ARGS}"),
        _task("clean-periph", f"{make} distclean {_MAKE_ARGS}"),
        _task("flash", "arm-none-eabi-gdb",
              [*_GDB_FLASH, f"--ex=\"flash_m4 {_OCD_ARGS}\"", "--batch"], ["build"]),
        _task("flash & run", "arm-none-eabi-gdb",
              [*_GDB_FLASH, f"--ex=\"flash_m4_run {_OCD_ARGS}\"", "--batch"], ["build"]),
        _task("erase flash", "openocd",
              ["-s", "${config:OCD_path}/scripts",
               "-f", "interface/${config:M4_OCD_interface_file}",
               "-f", "target/${config:M4_OCD_target_file}",
               "-c", "\"init; reset halt; max32xxx mass_erase 0;\"", "-c", "exit"]),
    ]}


def _launch() -> dict:
    """launch.json: debug the Arm core through OpenOCD (Cortex-Debug extension)."""
    elf = "${workspaceFolder}/build/${config:program_file}"
    return {"version": "0.2.0", "configurations": [{
        "name": "Debug Arm (Cortex-Debug)",
        "type": "cortex-debug",
        "request": "launch",
        "servertype": "openocd",
        "cwd": "${workspaceFolder}",
        "executable": elf,
        "loadFiles": [elf],
        "symbolFiles": [{"file": "${workspaceFolder}/build/${config:symbol_file}"}],
        "gdbPath": "${config:ARM_GCC_path}/bin/arm-none-eabi-gdb",
        "serverpath": "${config:OCD_path}/openocd",
        "searchDir": ["${config:OCD_path}/scripts"],
        "configFiles": ["interface/${config:M4_OCD_interface_file}",
                        "target/${config:M4_OCD_target_file}"],
        "interface": "swd",
        "runToEntryPoint": "main",
        "svdFile": f"{_SDK}/Libraries/CMSIS/Device/Maxim/${{config:target}}/Include/"
                   "${config:target}.svd",
    }]}


# gdb macros for the flash tasks: OpenOCD over a pipe, load, verify, then halt or run.
_OPENOCD_PIPE = ('openocd -c "gdb_port pipe; log_output flash.log" -s $arg0/scripts '
                 '-f interface/$arg1 -f target/$arg2 -c "init; reset halt"')
_FLASH_GDB = f"""\
# Used by the "flash" tasks: arguments are the OpenOCD folder, interface and target.
define flash_m4
    set architecture armv7e-m
    set remotetimeout 10
    target remote | {_OPENOCD_PIPE}
    load
    compare-sections
    monitor reset halt
end

define flash_m4_run
    flash_m4 $arg0 $arg1 $arg2
    monitor resume
end
"""


def vscode_files(device: Device, board: str) -> dict[str, str]:
    """Relative path -> text of the project's `.vscode/` folder."""
    return {
        ".vscode/settings.json": _json(_settings(device, board)),
        ".vscode/tasks.json": _json(_tasks()),
        ".vscode/launch.json": _json(_launch()),
        ".vscode/flash.gdb": _FLASH_GDB,
    }
