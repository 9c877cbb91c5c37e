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
from onnx2ai8x.options import EmitOptions, decide_conversion, decide_hardware
from onnx2ai8x.placement import Placement
from tests.conftest import GOLDEN
from tests.map.test_auto_streaming import big_input

DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits" / "digits.onnx"
CATS_DOGS = "ai85-cats-dogs"


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


def _derived(monkeypatch) -> list:
    """The placements map/hw.derive is called with, in order (every derivation goes
    through map/lowered.examine)."""
    from onnx2ai8x.map import hw, lowered

    seen: list = []
    original = hw.derive

    def counted(placement, choices):
        seen.append(placement)
        return original(placement, choices)

    monkeypatch.setattr(hw, "derive", counted)
    monkeypatch.setattr(lowered, "derive", counted)
    return seen


def test_a_streaming_golden_sidecar_conversion_derives_once(monkeypatch, tmp_path) -> None:
    """ai85-cats-dogs streams its first two layers: its sidecar's placement is examined
    once, and that view is the lowered network's (the memory checks, the rollovers, the
    report and the emitter read it; main derived it ten times)."""
    if not (GOLDEN / CATS_DOGS / "case.json").is_file():
        pytest.skip("golden corpus ../shared/golden is absent")
    pytest.importorskip("torch")  # the case is imported from its checkpoint
    from tests.golden import pipeline

    model = pipeline.imported_model(CATS_DOGS, tmp_path)
    derived = _derived(monkeypatch)
    result = convert(ConvertRequest(model=model, device=MAX78000, output=tmp_path / "p",
                                    sidecar=GOLDEN / CATS_DOGS / "network.yaml",
                                    sample_input=GOLDEN / CATS_DOGS / "sample.npy"))
    assert "cycles" in result.summary and (tmp_path / "p" / "cnn.c").is_file()
    assert len(derived) == 1 and derived[0].layers[0].streaming


def test_a_streaming_sidecar_conversion_derives_once(monkeypatch, tmp_path) -> None:
    """The same without golden data: a network whose frames stream, converted with the
    sidecar its automatic mapping writes."""
    net = big_input()
    sidecar = tmp_path / "big.yaml"
    sidecar.write_text(plan(net, MAX78000, None).sidecar_text)
    derived = _derived(monkeypatch)
    result = plan(net, MAX78000, sidecar)
    assert len(derived) == 1 and derived[0] is result.placement
    assert result.placement.layers[0].streaming and result.hw.choices.fifo
    convert(ConvertRequest(model=net, device=MAX78000, output=tmp_path / "p",
                           sidecar=sidecar))
    assert len(derived) == 2  # one more conversion, one more derivation


def test_automatic_mapping_derives_each_candidate_once(monkeypatch, tmp_path) -> None:
    """The mapper examines, per streaming layer count it tries, the processor choice
    (its register limits and rollovers) and the allocated placement: each is derived
    once, nothing else is, and the last one is the lowered network's view (lowering
    derives nothing again)."""
    from onnx2ai8x.map import auto

    candidates: list = []
    skeleton, assemble = auto._Mapper.skeleton, auto._assemble

    def made(make):
        def counted(*args, **kwargs):
            candidates.append(make(*args, **kwargs))
            return candidates[-1]
        return counted

    monkeypatch.setattr(auto._Mapper, "skeleton", made(skeleton))
    monkeypatch.setattr(auto, "_assemble", made(assemble))
    derived = _derived(monkeypatch)
    result = plan(big_input(), MAX78000, None)
    assert result.placement.layers[0].streaming
    assert len(candidates) >= 2  # at least one skeleton and the allocated placement
    assert len(derived) == len(candidates)
    assert all(a is b for a, b in zip(derived, candidates, strict=True))
    assert derived[-1] is result.placement and result.hw.view.placement is derived[-1]
    once = len(candidates)
    convert(ConvertRequest(model=big_input(), device=MAX78000, output=tmp_path / "p"))
    # the same candidates again, nothing more (the report, the emitter: no derivation)
    assert len(derived) == len(candidates) == 2 * once


def _wide_stream(width: int) -> Placement:
    """One streaming 3x3 convolution without padding on MAX78002, 2x2 max pooling of
    stride 2 first, over a frame `width` columns wide (8 rows, 4 channels)."""
    import numpy as np

    from onnx2ai8x.network import ACT_RELU, OP_CONV2D, Layer, Network
    from onnx2ai8x.placement import LayerPlacement

    pooled = (4, width // 2)
    layer = Layer(name="wide", operator=OP_CONV2D, input_channels=4, output_channels=4,
                  input_dim=(8, width), pooled_dim=pooled,
                  output_dim=(pooled[0] - 2, pooled[1] - 2), kernel_size=(3, 3),
                  padding=(0, 0), pool=(2, 2), pool_stride=(2, 2), activation=ACT_RELU,
                  weights=np.ones((4, 4, 3, 3), dtype=np.int64), bias=None)
    net = Network(layers=(layer,), input_shape=(4, 8, width), device="MAX78002",
                  name="wide")
    place = LayerPlacement(processor_map=0xF, output_processor_map=0xF, in_offset=0,
                           out_offset=0, streaming=True, output_layer=True)
    return Placement(network=net, device=MAX78002, layers=(place,), final_layer=0)


def test_the_streaming_check_judges_the_value_the_emitter_writes() -> None:
    """MAX78002, a FIFO-fed first layer pooling 2x2 with stride 2 over W columns (W odd,
    no padding): the second stream delta is (pool stride rows - 1) * W + the columns the
    pooling skips (1) + pool columns - 1, plus 1 with the pipeline (seed 000, "Streaming
    Mode"). For W = 16381 that is 16383, the largest the 14-bit field holds, and 16384
    with the pipeline. Under --no-pipeline the check must pass what the emitter writes;
    with the pipeline (the default) it must refuse. (Main judged every placement with
    the pipeline on.)"""
    from onnx2ai8x.map.memory_check import stream_register_diagnostics
    from onnx2ai8x.map.streaming import stream2, stream_values
    from tests.map.examined import examined

    placement = _wide_stream(16381)
    assert (1 << MAX78002.regs.max_dsval2_bits) - 1 == 16383
    piped = stream_register_diagnostics(examined(placement))
    assert [d.code for d in piped] == ["map.streaming"]
    assert "streaming delta 16384 exceeds the device limit of 16383" in piped[0].message
    unpiped = examined(placement, EmitOptions(pipeline=False))
    assert not unpiped.choices.pipeline and unpiped.choices.fifo
    assert stream_register_diagnostics(unpiped) == []
    register = stream2(unpiped.view, 0, stream_values(unpiped.view, 0))
    assert register >> 16 == 16383  # the delta field the project writes
    # the rollover, which sizes the circular buffer the mapper reserves, is the same
    assert unpiped.rollover == examined(placement).rollover
    assert unpiped.rollover == examined(placement, EmitOptions(fifo_go=True)).rollover


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
    # decided before mapping, for a placement that streams and one that does not: the
    # same choices but the FIFO input a streaming first layer implies
    decision = decide_conversion(EmitOptions(pipeline=False, fifo_go=True), MAX78002,
                                 data_buffer=True)
    assert not decision.plain.fifo and decision.streaming.fifo
    assert decision.of(True) is decision.streaming and decision.of(False) is decision.plain
    assert dataclasses.replace(decision.plain, fifo=True) == decision.streaming
    assert not decision.streaming.pipeline and decision.streaming.fifo_go
    assert "--zero-sram implied" in decision.notes[0]


def test_timer_and_boost_ranges_are_the_parts_own() -> None:
    small = dataclasses.replace(MAX78000, name="MAX78000", timers=2, gpio_ports=2)
    assert EmitOptions.from_cli(MAX78000, timer=3).timer == 3
    with pytest.raises(Ai8xError, match="0 to 1"):
        EmitOptions.from_cli(small, timer=3)
    with pytest.raises(Ai8xError, match="port 0 to 1"):
        EmitOptions.from_cli(small, boost="2.5")
    assert EmitOptions.from_cli(MAX78000, boost="2.5").boost == "2.5"
