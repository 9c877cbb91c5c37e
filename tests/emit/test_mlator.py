"""--mlator: cnn_unload() reads 8-bit outputs through the mlator, a word per four pixels.

The statements are replayed here: each read of the mlator port must land in the output
word that holds those four pixels of that channel (channel-major), and come from the
quadrant and byte lane of the processor that holds the channel (seed 000, "Data
memory": four channels per word, processor p in byte p % 4 of quadrant p // 16). The
exact statements were compared with the vendor tool's on every golden case with an
8-bit output (see the issue 5 note); layers the mlator cannot read are unloaded as
without the option.
"""
from __future__ import annotations

import dataclasses
import re

import pytest

from onnx2ai8x.devices import MAX78000, MAX78002
from onnx2ai8x.emit.project import unload_text
from onnx2ai8x.emit.unload import plan_unload
from onnx2ai8x.options import EmitOptions
from tests.emit.synthetic import one_conv

DEVS = {"MAX78000": MAX78000, "MAX78002": MAX78002}
WRITE = re.compile(r"\*\(\(volatile uint32_t \*\) 0x([0-9a-f]+)\) = 0x([0-9a-f]+);")


DECLARATION = re.compile(r"(uint8_t|uint32_t|volatile uint32_t|int) [^=]*(=.*)?;")


def _unload(placement, mlator: bool) -> tuple[int, list[str], list[str]]:
    """cnn_unload() as the project writes it: the buffer words it fills, its
    declarations and its statements (one per line, indentation dropped)."""
    unload = plan_unload(placement, EmitOptions(mlator=mlator))
    lines = [line.strip() for line in unload_text(unload).splitlines()]
    body = lines[lines.index("{") + 1:lines.index("return CNN_OK;")]
    head = 0
    while head < len(body) and DECLARATION.fullmatch(body[head]):
        head += 1
    return unload.words, body[:head], body[head:]


def _replay(body: list[str], dev) -> dict[int, tuple[int, int, int]]:
    """Output word -> (quadrant, byte lane, first pixel) of the mlator read that fills it."""
    regs: dict[int, int] = {}
    state = {"offs": None, "quad": None, "byte": None, "pixel": None, "on": False}
    port = {"ctrl": None, "mlat": None}
    words: dict[int, tuple[int, int, int]] = {}

    def run(lines: list[str]) -> None:
        i = 0
        while i < len(lines):
            line = lines[i]
            if m := re.fullmatch(r"for \(i = 0; i < (\d+); i\+\+\) \{", line):
                end = lines.index("}", i)
                for _ in range(int(m.group(1))):
                    run([x.strip() for x in lines[i + 1:end]])
                i = end + 1
                continue
            step(line)
            i += 1

    def step(line: str) -> None:
        if m := re.fullmatch(r"(ctrl|mlat) = \(volatile uint32_t \*\) 0x([0-9a-f]+);", line):
            port[m.group(1)] = int(m.group(2), 16)
        elif m := re.fullmatch(r"offs = 0x([0-9a-f]+);", line):
            state["offs"] = int(m.group(1), 16)
        elif m := WRITE.match(line):
            regs[int(m.group(1), 16)] = int(m.group(2), 16)
        elif m := re.match(r"\*ctrl = 0x([0-9a-f]+);", line):
            val = int(m.group(1), 16)
            state["on"] = bool(val >> 16 & 1)
            if state["on"]:
                quad = (port["ctrl"] - dev.cnn_base) // dev.quadrant_stride
                assert port["mlat"] == dev.ctl_addr(quad, 1024 if dev is MAX78000 else 0x44000)
                assert regs[dev.lreg_addr(quad, dev.regs.lctl2, 0)] >= 0
                state.update(quad=quad, byte=val >> 17 & 3, pixel=regs[
                    dev.lreg_addr(quad, dev.regs.wptr_base, 0)], primed=False)
        elif line.startswith("asm volatile"):
            assert state["on"], "primed while the mlator is off"
        elif line == "out_buf32[offs++] = *mlat;":
            assert state["on"], "read while the mlator is off"
            assert state["offs"] not in words, "an output word is written twice"
            words[state["offs"]] = (state["quad"], state["byte"], state["pixel"])
            state["offs"] += 1
            state["pixel"] += 4
        elif not line.startswith("//"):
            raise AssertionError(f"unexpected statement {line!r}")

    run(body)
    return words


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
@pytest.mark.parametrize("channels,height,width", [(4, 8, 8), (20, 8, 8), (7, 4, 6),
                                                   (1, 5, 5), (16, 32, 32)])
def test_every_output_word_comes_from_its_channel(device, channels, height, width):
    pl = one_conv(device, channels=channels, height=height, width=width)
    buffer_words, declarations, body = _unload(pl, mlator=True)
    assert "volatile uint32_t *mlat, *ctrl;" in declarations
    assert not any("val" in d for d in declarations)  # no plain reads left
    words = _replay(body, DEVS[device])
    pixels = height * width
    want = {}
    for c in range(channels):  # processor c holds channel c (the map is 0 .. channels-1)
        for p in range(0, pixels, 4):
            want[(c * pixels + p) // 4] = (c // 16, c % 4, p)
    assert words == want
    assert buffer_words == -(-channels * pixels // 4)


@pytest.mark.parametrize("shape,width_bits", [((4, 5, 5), 8),   # 25 pixels, 4 channels
                                              ((4, 1, 2), 8),   # under four pixels
                                              ((4, 8, 8), 32)])  # 32-bit output
def test_outputs_the_mlator_cannot_read_unload_as_without_it(shape, width_bits):
    channels, height, width = shape
    pl = one_conv(channels=channels, height=height, width=width)
    if width_bits == 32:
        lay = dataclasses.replace(pl.network.layers[0], output_width=32)
        net = dataclasses.replace(pl.network, layers=(lay,))
        pl = dataclasses.replace(pl, network=net)
    assert _unload(pl, mlator=True) == _unload(pl, mlator=False)


def test_multi_pass_output_steps_the_pointer():
    # 80 channels on 40 processors in two passes (80 / 2 = 40 per pass, a multiple of
    # four): channel c sits on processor c % 40, in word c // 40 of the processor's pair
    # of words per pixel, so the mlator's pointer steps by the pass count (increment 1).
    pl = one_conv(channels=80, height=4, width=4)
    mask = (1 << 40) - 1
    pl = dataclasses.replace(pl, layers=(dataclasses.replace(
        pl.layers[0], processor_map=mask, output_processor_map=mask),))
    _, _, body = _unload(pl, mlator=True)
    dev = MAX78000
    incs = {int(m.group(2), 16) for line in body if (m := WRITE.match(line))
            and int(m.group(1), 16) in {dev.lreg_addr(q, dev.regs.lctl2, 0) for q in range(4)}}
    assert incs == {0, 1}  # first pass, second pass
    words = _replay(body, dev)
    want = {}
    for c in range(80):
        proc = c % 40
        for p in range(0, 16, 4):
            want[(c * 16 + p) // 4] = (proc // 16, proc % 4, p)
    assert words == want
