"""The lowered network (map/lowered.HwNetwork): made once per conversion, the hardware
view derived once and the kernel memory allocated once, and the hardware choices
decided in one place (options.decide_hardware)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from onnx2ai8x.convert import ConvertRequest, convert, plan
from onnx2ai8x.devices import MAX78000, MAX78002
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.options import EmitOptions, decide_hardware

DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits" / "digits.onnx"


def _counting(monkeypatch, module, name: str, *more) -> list[int]:
    """Count the calls of `module.name` (also where `more` modules imported it)."""
    calls: list[int] = []
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    for mod in (module, *more):
        monkeypatch.setattr(mod, name, counted)
    return calls


def test_a_conversion_derives_the_hardware_view_once(monkeypatch, tmp_path) -> None:
    # (the kernel and bias memory: tests/map/test_hw.py counts those, also once)
    from onnx2ai8x.map import hw, lowered

    derived = _counting(monkeypatch, hw, "derive", lowered)
    convert(ConvertRequest(model=DIGITS, device=MAX78000, output=tmp_path / "p"))
    assert (tmp_path / "p" / "cnn.c").is_file()
    assert len(derived) == 1


def test_the_plan_carries_one_immutable_lowered_value() -> None:
    result = plan(DIGITS, MAX78000, None)
    hw = result.hw
    assert hw.network is result.network and hw.placement is result.placement
    assert hw.view.placement is hw.placement and hw.device is MAX78000
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.weights = None  # type: ignore[misc]
    assert len(hw.weights.kernels.offset) == len(hw.placement.layers)


def test_the_choices_follow_the_options_the_mapping_and_the_model() -> None:
    plain, notes = decide_hardware(EmitOptions(), MAX78000)
    assert not plain.fifo and not plain.zero_sram and not plain.pipeline and notes == ()
    assert decide_hardware(EmitOptions(), MAX78002)[0].pipeline
    assert not decide_hardware(EmitOptions(pipeline=False), MAX78002)[0].pipeline
    assert decide_hardware(EmitOptions(), MAX78000, first_streams=True)[0].fifo
    buffered, notes = decide_hardware(EmitOptions(), MAX78000, data_buffer=True)
    assert buffered.zero_sram and "--zero-sram implied" in notes[0]
    assert decide_hardware(EmitOptions(), MAX78000, pool_rounding="nearest")[0] \
        .avg_pool_rounding
    with pytest.raises(Ai8xError, match="truncates"):
        decide_hardware(EmitOptions(avg_pool_rounding=True), MAX78000,
                        pool_rounding="truncate")
    assert decide_hardware(EmitOptions(), MAX78002, snoop=(1, 2))[0].snoop == (1, 2)


def test_timer_and_boost_ranges_are_the_parts_own() -> None:
    small = dataclasses.replace(MAX78000, name="MAX78000", timers=2, gpio_ports=2)
    assert EmitOptions.from_cli(MAX78000, timer=3).timer == 3
    with pytest.raises(Ai8xError, match="0 to 1"):
        EmitOptions.from_cli(small, timer=3)
    with pytest.raises(Ai8xError, match="port 0 to 1"):
        EmitOptions.from_cli(small, boost="2.5")
    assert EmitOptions.from_cli(MAX78000, boost="2.5").boost == "2.5"
