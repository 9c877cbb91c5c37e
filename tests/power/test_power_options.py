"""The vendor's power, clock and run-mode options (issue 29): values, refusals, clocks.

The projects these options write are compared with the vendor tool's in
test_power_vendor.py (registers with c2trace, main()'s structure with cstructure).
"""
from __future__ import annotations

import dataclasses

import pytest

from onnx2ai8x.devices import MAX78000, MAX78002
from onnx2ai8x.emit.firmware import CnnClock, clock_plan, options_clock_plan, power_plan
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.options import EmitOptions, check_device_options, option_warnings
from tests.power.cstructure import changes, statements


def test_defaults_are_the_vendors() -> None:
    opts = EmitOptions.from_cli()
    assert (opts.pipeline, opts.pll, opts.balance_speed, opts.clock_divider) == \
        (None, None, True, None)
    assert (opts.wfi, opts.fifo_wait, opts.energy, opts.forever, opts.one_shot) == \
        (True, True, False, False, False)
    assert not opts.riscv and not opts.deepsleep and not opts.powerdown


def test_cli_flags_set_the_fields() -> None:
    opts = EmitOptions.from_cli(no_pipeline=None, pipeline=False, pll=False, no_wfi=True,
                                no_fifo_wait=True, clock_divider=2, balance_speed=False)
    assert opts.pipeline is False and opts.pll is False and opts.clock_divider == 2
    assert opts.wfi is False and opts.fifo_wait is False
    assert opts.balance_speed  # an unset --balance-speed flag keeps the default
    assert EmitOptions.from_cli(max_speed=True).balance_speed is False


def test_vendor_spelling_reads_the_same() -> None:
    opts = EmitOptions.from_vendor_args(["--no-pipeline", "--no-pll", "--clock-divider", "8",
                                         "--no-wfi", "--one-shot", "--riscv-debug"])
    assert opts.pipeline is False and opts.pll is False and opts.clock_divider == 8
    assert opts.wfi is False and opts.one_shot and opts.riscv_debug and opts.riscv


@pytest.mark.parametrize("flag", ["riscv_debug", "riscv_exclusive", "riscv_cache",
                                  "riscv_flash"])
def test_riscv_variants_imply_riscv(flag: str) -> None:
    assert EmitOptions.from_cli(**{flag: True}).riscv


def test_fast_fifo_quad_implies_the_fast_fifo_and_needs_riscv() -> None:
    opts = EmitOptions.from_cli(fast_fifo_quad=True, riscv=True)
    assert opts.fast_fifo and opts.uses_fifo
    with pytest.raises(Ai8xError) as exc:
        EmitOptions.from_cli(fast_fifo_quad=True)
    assert "--riscv" in exc.value.render()


@pytest.mark.parametrize(("name", "problem"), [
    ("ai85-kws20_v3", "not a 2-D convolution"),  # Conv1d first layer
])
def test_fast_fifo_quad_refuses_a_first_layer_it_cannot_spread(name: str, problem: str,
                                                                tmp_path) -> None:
    from tests.golden import pipeline

    if not (pipeline.GOLDEN / name).is_dir():
        pytest.skip("golden corpus absent")
    _, proc = pipeline.convert_case(name, tmp_path, sidecar=True,
                                    extra=("--riscv", "--fast-fifo-quad"),
                                    out=tmp_path / "p")
    assert proc.returncode != 0 and "map.fast-fifo-quad" in proc.stderr
    assert problem in proc.stderr and "use --fast-fifo" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_energy_replaces_the_timer_with_a_warning() -> None:
    asked = {"energy": True, "timer": 0}
    opts = EmitOptions.from_cli(**asked)
    assert opts.timer is None
    assert "--timer is ignored with --energy" in option_warnings(opts, asked)[0]
    assert option_warnings(EmitOptions.from_cli(timer=0), {"timer": 0}) == ()


@pytest.mark.parametrize(("kw", "needle"), [
    ({"clock_divider": 3}, "--clock-divider"),
    ({"deepsleep": True}, "--riscv"),
    ({"one_shot": True, "timer": 1}, "drop --timer"),
    ({"max_speed": True, "balance_speed": True}, "--balance-speed"),
])
def test_option_values_refused(kw: dict, needle: str) -> None:
    with pytest.raises(Ai8xError) as exc:
        EmitOptions.from_cli(**kw)
    assert needle in exc.value.render() and exc.value.exit_code == 2


@pytest.mark.parametrize(("kw", "needle"), [
    ({"pipeline": True}, "no accelerator pipeline"),
    ({"pll": True}, "no IPLL"),
    ({"fifo_go": True}, "first FIFO word"),
    ({"one_shot": True}, "no one-shot mode"),
    ({"max_speed": True}, "needs --pll"),
])
def test_max78000_refuses_what_it_does_not_have(kw: dict, needle: str) -> None:
    opts = EmitOptions.from_cli(**kw)
    check_device_options(opts, MAX78002)  # MAX78002 has each of them
    with pytest.raises(Ai8xError) as exc:
        check_device_options(opts, MAX78000)
    assert needle in exc.value.render()


def test_max78002_refusals() -> None:
    with pytest.raises(Ai8xError) as err:
        check_device_options(EmitOptions.from_cli(max_speed=True, pll=False), MAX78002)
    assert "needs --pll" in err.value.render()  # (str(): needs pll=True, the API's form)
    with pytest.raises(Ai8xError, match="exceeds 50 MHz"):
        check_device_options(EmitOptions.from_cli(pipeline=False, clock_divider=2), MAX78002)
    # 200 MHz / 4 = 50 MHz is within the no-pipeline limit
    check_device_options(EmitOptions.from_cli(pipeline=False, clock_divider=4), MAX78002)


def test_default_clocks_unchanged() -> None:
    """The defaults reproduce what projects were generated with before the options."""
    arm = clock_plan(MAX78000, pipeline=False)
    assert arm.load == CnnClock("PCLK", 1, 50) and arm.run is None and not arm.enable_ipll
    fast = clock_plan(MAX78002, pipeline=True)
    assert fast.load == CnnClock("IPLL", 4, 200) and fast.run == CnnClock("IPLL", 1, 200)
    slow = clock_plan(MAX78002, pipeline=False)
    assert slow.load == CnnClock("IPLL", 4, 200) and slow.run is None


def test_clock_options() -> None:
    # --no-pll: the APB clock (60 MHz), no switch, no IPLL
    apb = clock_plan(MAX78002, pipeline=True, pll=False)
    assert apb.load == CnnClock("PCLK", 1, 60) and apb.run is None and not apb.enable_ipll
    # without the pipeline the APB clock is divided to stay at or below 50 MHz
    assert clock_plan(MAX78002, pipeline=False, pll=False).load == CnnClock("PCLK", 2, 60)
    # --max-speed: load and run at the selected clock
    fast = clock_plan(MAX78002, pipeline=True, balance=False)
    assert fast.load == CnnClock("IPLL", 1, 200) and fast.run is None
    # --clock-divider: the inference clock; loading stays at a quarter of the PLL rate
    div = clock_plan(MAX78002, pipeline=True, divider=2)
    assert div.load == CnnClock("IPLL", 4, 200) and div.run == CnnClock("IPLL", 2, 200)
    assert clock_plan(MAX78000, pipeline=False, divider=8).load == CnnClock("PCLK", 8, 50)
    opts = EmitOptions.from_cli(pll=False, clock_divider=4)
    assert options_clock_plan(MAX78002, True, opts).load == CnnClock("PCLK", 4, 60)


def test_power_plan() -> None:
    plan = power_plan(MAX78002, EmitOptions(energy=True, one_shot=True), final_layer=9)
    assert plan.pmon == ((1, 6), (1, 7)) and plan.one_shot == 9
    assert power_plan(MAX78000, EmitOptions(energy=True), 3).pmon is None  # the LEDs
    assert power_plan(MAX78002, EmitOptions(), 3).pmon is None


def test_structure_normalizes_both_clock_spellings() -> None:
    ours = statements("cnn_clock(MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL, "
                      "MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV1);")
    inline = statements("MXC_GCR->pclkdiv = (MXC_GCR->pclkdiv & ~(MXC_F_GCR_PCLKDIV_CNNCLKDIV"
                        " | MXC_F_GCR_PCLKDIV_CNNCLKSEL))\n | MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV1"
                        " | MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL;")
    assert ours == inline == ["clock(IPLL,DIV1)"]


def test_structure_sees_a_statement_move_into_a_loop() -> None:
    before = {"main": statements("load(); start(); while (t == 0) sleep();")}
    after = {"main": statements("for (i = 0; i < 100; i++) { load(); start(); "
                                "while (t == 0) sleep(); }")}
    removed, added = changes(before, after)["main"]
    assert "start()" in removed and "1:start()" in added
    assert "for(i=0;i<100;i++)" in added
    assert changes(before, before) == {}


def test_options_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        EmitOptions().energy = True  # type: ignore[misc]


def test_structure_ignores_plain_declarations() -> None:
    assert statements("int i; int digs, tens; i = 3;") == ["i=3"]
    assert statements("int8_t *p = (int8_t *) q;") == ["int8_t*p=(int8_t*)q"]
