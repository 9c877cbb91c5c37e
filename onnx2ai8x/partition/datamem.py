"""Where the CPU segments meet the accelerator: which byte of which data-memory word
holds which value of a tensor (issue 28, items 1 and 3).

The layouts are not restated here. The emitter's own functions lay a tensor out — the
sample input as `memcpy32` loads or FIFO words (emit/memory.input_loads,
emit/project.fifo_feed: seed 000 "Data memory", "FIFOs"), the output as the words the
known-answer check compares (emit/unload: "Data memory") — and this module reads the
layout back by laying out probe tensors whose values are the digits of each value's
index. So the CPU writes the accelerator's input and reads its output exactly where the
converter's own known answer puts and finds them, for every placement the mapper makes.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

DIGITS = 3  # base-256 digits of a value's index: tensors up to 2**24 values


def _signed(b: np.ndarray) -> np.ndarray:
    return np.where(b > 127, b - 256, b).astype(np.int64)


def _word_bytes(words) -> np.ndarray:
    w = np.asarray(list(words), np.uint64).reshape(-1, 1)
    return ((w >> (8 * np.arange(4, dtype=np.uint64))) & 0xFF).astype(np.int64)


def probe_words(words_of: Callable[[np.ndarray], list], shape: tuple[int, ...]
                ) -> list[np.ndarray]:
    """Per word list `words_of(tensor)` returns: an (n_words, 4) array, the index (C
    order) of the tensor value in each byte of each word, -1 where a byte holds none."""
    n = int(np.prod(shape))
    idx = np.arange(n, dtype=np.int64)
    present = [_word_bytes(w) == 0xFF for w in words_of(np.full(shape, -1, np.int64))]
    maps = [np.zeros(p.shape, np.int64) for p in present]
    for d in range(DIGITS):
        digit = _signed((idx >> (8 * d)) & 0xFF).reshape(shape)
        for m, w in zip(maps, words_of(digit), strict=True):
            m |= _word_bytes(w) << (8 * d)
    return [np.where(p, m, -1) for m, p in zip(maps, present, strict=True)]


@dataclass(frozen=True)
class PackRun:
    """Words word..word+count-1 of one list: byte lane l holds value
    first[l] + i * step[l] of word+i (first -1: zero)."""

    word: int
    count: int
    first: tuple[int, int, int, int]
    step: tuple[int, int, int, int]


def pack_runs(index: np.ndarray) -> list[PackRun]:
    """The (n_words, 4) index map as runs of words whose lanes advance evenly."""
    runs: list[PackRun] = []
    w, n = 0, index.shape[0]
    while w < n:
        first = index[w]
        step = index[w + 1] - first if w + 1 < n else np.zeros(4, np.int64)
        step = np.where(first < 0, 0, step)
        count = 1
        while w + count < n and np.array_equal(
                index[w + count], np.where(first < 0, -1, first + count * step)):
            count += 1
        if count == 1:
            step = np.zeros(4, np.int64)
        runs.append(PackRun(w, count, tuple(int(v) for v in first),
                            tuple(int(v) for v in step)))
        w += count
    return runs


@dataclass(frozen=True)
class ReadRun:
    """Values value..value+count-1: byte `lane` of the word at addr + i * step."""

    value: int
    count: int
    addr: int
    step: int
    lane: int


def output_locations(entries_of: Callable[[np.ndarray], list], shape: tuple[int, ...]
                     ) -> list[ReadRun]:
    """Where each value of an 8-bit output tensor sits: `entries_of(tensor)` gives the
    (mask, address, text, word) entries of the known-answer check."""
    n = int(np.prod(shape))
    idx = np.arange(n, dtype=np.int64)
    full = entries_of(np.full(shape, -1, np.int64))
    addrs = [e[1] for e in full]
    lanes = [[lane for lane in range(4) if (e[0] >> (8 * lane)) & 0xFF]
             for e in full]
    values = {(a, lane): 0 for a, ls in zip(addrs, lanes, strict=True) for lane in ls}
    for d in range(DIGITS):
        digit = _signed((idx >> (8 * d)) & 0xFF).reshape(shape)
        for e in entries_of(digit):
            for lane in range(4):
                if (e[1], lane) in values:
                    values[(e[1], lane)] |= ((e[3] >> (8 * lane)) & 0xFF) << (8 * d)
    where = sorted((v, a, lane) for (a, lane), v in values.items())
    if [v for v, _, _ in where] != list(range(n)):
        raise ValueError("the output layout does not hold each value once")
    runs: list[ReadRun] = []
    k = 0
    while k < n:
        _, addr, lane = where[k]
        step = where[k + 1][1] - addr if k + 1 < n else 4
        count = 1
        while k + count < n and where[k + count][2] == lane and \
                where[k + count][1] == addr + count * step:
            count += 1
        runs.append(ReadRun(k, count, addr, step if count > 1 else 4, lane))
        k += count
    return runs


__all__ = ["PackRun", "ReadRun", "output_locations", "pack_runs", "probe_words"]
