"""Projects written with the power, clock and run-mode options build as firmware with
zero warnings (issue 29), with the same SDK flow as tests/emit/test_firmware_build.py.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import record_firmware_size
from tests.emit.test_firmware_build import Case, _build, _convert, sdk  # noqa: F401

CASES = (
    Case("ai85-mnist-energy", "MAX78000", golden="ai85-mnist", extra=("--energy",),
         expect=("SYS_START;", "for (i = 0; i < 100; i++)")),
    Case("ai87-kws20-energy", "MAX78002", golden="ai87-kws20_v3_1", extra=("--energy",),
         expect=("gpio_trig2", "MXC_SYS_ClockSourceEnable")),
    Case("ai85-cats-dogs-energy-no-fifo-wait", "MAX78000", golden="ai85-cats-dogs",
         extra=("--energy", "--no-fifo-wait"), expect=("MXC_TMR_Delay(MXC_TMR0, 10)",)),
    Case("ai85-mnist-forever-no-wfi", "MAX78000", golden="ai85-mnist",
         extra=("--forever", "--no-wfi", "--powerdown"),
         expect=("while (1) {", "while (cnn_time == 0) ;", "MXC_GPIO_PIN_4")),
    Case("ai87-kws20-no-pll-divider", "MAX78002", golden="ai87-kws20_v3_1",
         extra=("--no-pll", "--clock-divider", "2"),
         expect=("MXC_S_GCR_PCLKDIV_CNNCLKSEL_PCLK, MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV2",)),
    Case("ai87-kws20-max-speed-no-pipeline", "MAX78002", golden="ai87-kws20_v3_1",
         extra=("--max-speed", "--no-pipeline", "--clock-divider", "4")),
    Case("ai87-multipass5m8-one-shot", "MAX78002", golden="ai87-suite-multipass5m8",
         extra=("--one-shot",), expect=("cnn_continue();",)),
    Case("ai87-fifostream-fifo-go", "MAX78002", golden="ai87-suite-fifostream-hd8-chw",
         extra=("--fifo-go",)),
)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_option_project_builds(case: Case, sdk: Path, tmp_path: Path,  # noqa: F811
                               request: pytest.FixtureRequest) -> None:
    out = tmp_path / case.id
    _convert(case, out, tmp_path)
    result = _build(out, case.device, case.board, sdk)
    record_firmware_size(request.config, case.id, result)


RISCV_CASES = (
    Case("ai85-mnist-riscv-deepsleep-exclusive", "MAX78000", golden="ai85-mnist",
         extra=("--riscv", "--deepsleep", "--riscv-exclusive", "--riscv-debug"),
         expect=("MXC_LP_EnterLowPowerMode", "urvctrl", "Debug_Init")),
    Case("ai85-mnist-riscv-no-wfi", "MAX78000", golden="ai85-mnist",
         extra=("--riscv", "--no-wfi")),
    # quad fan-out: the CTRL quad bit (31) in the master quadrant's enable
    Case("ai85-cats-dogs-riscv-fast-fifo-quad", "MAX78000", golden="ai85-cats-dogs",
         extra=("--riscv", "--fast-fifo-quad"), expect=("= 0x80d8c809; // Master enable",)),
    Case("ai87-cats-dogs-riscv-fast-fifo-quad", "MAX78002", golden="ai87-cats-dogs",
         extra=("--riscv", "--fast-fifo-quad"), expect=("Fast FIFO control",)),
)


@pytest.mark.parametrize("case", RISCV_CASES, ids=[c.id for c in RISCV_CASES])
def test_option_dual_core_arm_half_builds(case: Case, sdk: Path,  # noqa: F811
                                          tmp_path: Path) -> None:
    out = tmp_path / case.id
    _convert(case, out, tmp_path)
    _build(out, case.device, case.board, sdk, make_args=("RISCV_LOAD=0",),
           sources=frozenset({"main.c"}))
