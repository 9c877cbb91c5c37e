"""fifo_feed (the input words of a FIFO-fed first layer) against a per-word formula.

The reference below is the plain statement of seed 000 "FIFOs": CHW data sends four
consecutive pixels of one channel per little-endian word, one channel per FIFO in
processor order, cycling through the FIFOs the processor map enables; HWC data sends one
pixel per word to each FIFO, channel c in the byte lane of the c-th enabled processor
(FIFO q feeds processors 16q .. 16q + 3), further passes as further words.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from onnx2ai8x.emit.project import fifo_feed
from onnx2ai8x.errors import Ai8xError


def _reference(data: np.ndarray, pmap: int, big_data: bool) -> dict[int, list[int]]:
    chans, pixels = data.shape
    streams: dict[int, list[int]] = {}
    if big_data:
        for start in range(0, pixels, 4):
            fifo, rest = 0, 0
            for c in range(chans):
                if rest == 0:
                    rest, fifo = pmap, 0
                while rest & 1 == 0:
                    rest >>= 16
                    fifo += 1
                val = 0
                for b in range(4):
                    if start + b < pixels:
                        val |= (int(data[c, start + b]) & 0xFF) << b * 8
                streams.setdefault(fifo, []).append(val)
                rest >>= 16
                fifo += 1
    else:
        procs = [q for q in range(64) if pmap >> q & 1]
        for px in range(pixels):
            words: dict[tuple[int, int], int] = {}
            for c in range(chans):
                q = procs[c % len(procs)]  # channel c on the c-th processor, per pass
                key = (q // 16, c // len(procs))
                words[key] = words.get(key, 0) | (int(data[c, px]) & 0xFF) << (q % 16) * 8
            for (fifo, _), val in sorted(words.items()):
                streams.setdefault(fifo, []).append(val)
    return streams


def _hw(chans: int, pmap: int, big_data: bool):
    dev = SimpleNamespace(fifo_addr=lambda r: 0x1000 + r, fast_fifo_addr=lambda r: 0x2000 + r)
    layer = SimpleNamespace(input_channels=chans, operands=1, name="l0")
    place = SimpleNamespace(processor_map=pmap, big_data=big_data, extra=())
    return SimpleNamespace(placement=SimpleNamespace(layers=[place], first_layer_used=0),
                           network=SimpleNamespace(layers=[layer]), start_layer=0, dev=dev,
                           choices=SimpleNamespace(fast_fifo=False))


@pytest.mark.parametrize("chans,shape,pmap,big_data", [
    (3, (3, 9, 7), 0x0000_0001_0001_0001, True),     # CHW, 3 channels, 3 FIFOs, ragged
    (5, (5, 6, 6), 0x0001_0001_0001_0001, True),     # CHW, more channels than FIFOs
    (2, (2, 5, 5), 0x0000_0000_0001_0000, True),     # CHW, channels cycle on one FIFO
    (3, (3, 8, 8), 0x0000_0000_0000_0007, False),    # HWC, one group of three
    (12, (12, 4, 5), 0x000F_000F_000F_0000, False),  # HWC, three groups, FIFO 0 unused
    (10, (10, 3, 3), 0x0000_0003_000F_000F, False),  # HWC, ragged last group
    (8, (8, 3, 3), 0x0000_0000_0000_000F, False),    # HWC, groups cycle on one FIFO
    (7, (7, 11), 0x0000_000F_0000_0007, False),      # 1-D HWC with a gap
    (3, (3, 6, 5), 0x0000_0001_0001_0001, False),    # HWC, one channel per quadrant
])
def test_fifo_words_follow_the_per_word_formula(chans, shape, pmap, big_data):
    rng = np.random.default_rng(chans * 31 + len(shape))
    sample = rng.integers(-128, 128, size=shape)
    feed = fifo_feed(_hw(chans, pmap, big_data), sample)
    want = _reference(sample.reshape(chans, -1), pmap, big_data)
    order = sorted(want)
    assert feed.streams == len(order)
    assert feed.data == tuple(0x1000 + 2 + f for f in order)
    assert [list(w) for w in feed.words] == [want[f] for f in order]
    assert all(isinstance(v, int) for w in feed.words for v in w)


@pytest.mark.parametrize("pmap,big_data", [
    (0x0000_0000_0000_0F00, False),  # HWC processors 8-11: no FIFO writes them
    (0x0000_0000_0000_0002, True),   # CHW processor 1
    (0, True),
])
def test_input_off_the_fifo_processors_is_refused(pmap, big_data):
    sample = np.zeros((4, 4, 4), dtype=np.int64)
    with pytest.raises(Ai8xError, match="FIFO processors"):
        fifo_feed(_hw(4, pmap, big_data), sample)
