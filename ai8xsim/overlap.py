"""Output written over input the layer still needs: the hardware's order, checked.

The functional model computes a layer from its whole input and then writes the output,
so on its own it would run a layer whose output overwrites its own input as if the
input had been copied first. The accelerator does not: it produces the output pixels one
after the other in raster order, each from the input pixels its pooling and convolution
windows cover (seed 000, Streaming Mode: input is shifted in row by row and a pixel is
discarded once the last output pixel needing it has been produced; "Data Memory": the
accelerator supports overlapping data, and the vendor's generator cannot check "for
inadvertent overwriting of unprocessed input data by newly generated output data").

So an output pixel that reads a byte of its input after the layer has written its own
output there sees the output, not the input. `honour_order` runs the layer that way:
the pixels concerned are recomputed from the memories as they are when each is
produced, and the project's known answer then says whether it matters (FAIL, with a
note naming the layer; a pixel computed from overwritten input but never checked, like
the padding positions of a long-dilation Conv1d, changes nothing). Where too many
pixels are concerned to recompute them one by one, `Clobbered` stops the run (FAIL).

The windows come from the registers, by running the model's own pooling and
convolution slicing over pixel numbers, and the addresses from the layout the layer
really reads and writes: apart from the converter's checker (onnx2ai8x/map/overlap.py),
so that the two can be compared (tests/sidecar/test_hand_edits.py).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .machine import SimError


class Clobbered(SimError):
    """A layer wrote output over input it had not finished using."""


def _windows_2d(lr, rows: int, cols: int, out_rows: int, out_cols: int) -> np.ndarray:
    """(output pixels, taps) input pixel numbers each output pixel reads (-1: padding),
    following the model's pooling then convolution slicing."""
    x = np.arange(rows * cols).reshape(rows, cols)
    ph, pw = lr.pool
    s = lr.stride
    if (ph, pw) == (1, 1):
        wins = x[None, ::s, ::s] if s > 1 else x[None]
    else:
        dh, dw = lr.pool_dilation
        oh = (rows - (ph - 1) * dh - 1) // s + 1
        ow = (cols - (pw - 1) * dw - 1) // s + 1
        wins = np.stack([x[i * dh:i * dh + s * (oh - 1) + 1:s,
                           j * dw:j * dw + s * (ow - 1) + 1:s]
                         for i in range(ph) for j in range(pw)], axis=0)
    kh, kw = lr.kernel if lr.is_conv else (1, 1)
    pr, pc = lr.pad if lr.is_conv else (0, 0)
    if lr.one_d:
        seq = wins.reshape(wins.shape[0], -1)
        seq = np.pad(seq, ((0, 0), (pr, pr)), constant_values=-1)
        taps = [seq[:, t:t + out_rows * out_cols] for t in range(kw)]
        return np.concatenate(taps, axis=0).T
    padded = np.pad(wins, ((0, 0), (pr, pr), (pc, pc)), constant_values=-1)
    taps = [padded[:, i:i + out_rows, j:j + out_cols] for i in range(kh) for j in range(kw)]
    return np.concatenate(taps, axis=0).reshape(-1, out_rows * out_cols).T


def _read_bytes(lr, procs: list[int], need: np.ndarray, sram_words: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """(byte key, need) of every byte the layer reads: key = (memory * words + word) * 4
    + lane, the layout read_input reads (HWC: one byte lane per processor, all passes
    and operands of a pixel in a row; CHW: four pixels per word)."""
    pixels = lr.rows * lr.cols
    keys, needs = [], []
    pix = np.arange(pixels)
    for p in procs:
        if lr.parallel:
            word = lr.read_base + (pix // 4)[None, :] * lr.passes \
                + np.arange(lr.passes)[:, None]
            lane = np.broadcast_to(pix % 4, word.shape)
            n = np.broadcast_to(need, word.shape)
        else:
            word = (pix[None, :, None] * lr.passes * (lr.read_gap + 1)
                    + np.arange(lr.passes)[:, None, None]) * lr.operands \
                + np.arange(lr.operands)[None, None, :] + lr.read_base
            lane = np.full(word.shape, p % 4)
            n = np.broadcast_to(need[None, :, None], word.shape)
        keys.append(((p // 4) * sram_words + word.reshape(-1)) * 4 + lane.reshape(-1))
        needs.append(n.reshape(-1))
    return np.concatenate(keys), np.concatenate(needs)


# Output pixels recomputed one memory state at a time at most (a layer whose overlap
# damages more pixels than this is reported as a clobber without emulating it).
MAX_EMULATED = 256


def _written_bytes(res, words: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(byte key, write time, byte value) of every byte the layer wrote; the write time
    is the output pixel's number (all channels of a pixel are written with it), a
    full-word write covers its four lanes (little-endian)."""
    pixels_out = res.shape[1] * res.shape[2]
    time = np.arange(len(res.memory)) % pixels_out
    base = (res.memory.astype(np.int64) * words + res.word) * 4
    value = res.value.astype(np.int64)
    full = res.lane < 0
    keys = np.concatenate([base[~full] + res.lane[~full],
                           (base[full][:, None] + np.arange(4)).reshape(-1)])
    times = np.concatenate([time[~full], np.repeat(time[full], 4)])
    vals = np.concatenate([value[~full] & 0xFF,
                           ((value[full][:, None] >> (8 * np.arange(4))) & 0xFF).reshape(-1)])
    return keys, times, vals.astype(np.uint8)


def _needs(lr, res) -> tuple[np.ndarray, np.ndarray]:
    """(window input pixels per output pixel (-1: padding), last need per input pixel)."""
    out_rows, out_cols = res.shape[1], res.shape[2]
    pixels_out = out_rows * out_cols
    wins = _windows_2d(lr, lr.rows, lr.cols, out_rows, out_cols)
    need = np.full(lr.rows * lr.cols, -1, dtype=np.int64)
    t = np.broadcast_to(np.arange(pixels_out)[:, None], wins.shape)
    ok = wins >= 0
    np.maximum.at(need, wins[ok], t[ok])
    return wins, need


def _pixel_of_read(lr, procs: list[int]) -> np.ndarray:
    """The input pixel of every byte _read_bytes lists, in the same order."""
    pixels = lr.rows * lr.cols
    pix = np.arange(pixels)
    parts = []
    for _ in procs:
        if lr.parallel:
            parts.append(np.broadcast_to(pix[None, :], (lr.passes, pixels)).reshape(-1))
        else:
            parts.append(np.broadcast_to(pix[None, :, None],
                                         (lr.passes, pixels, lr.operands)).reshape(-1))
    return np.concatenate(parts)


def _writes_where_it_reads(lr, res, procs: list[int]) -> bool:
    """Does the layer write a word of a memory it reads, inside the words it reads? (A
    quick test before the byte-exact one: most layers write elsewhere.)"""
    if lr.parallel:
        span = (lr.rows * lr.cols + 3) // 4 * lr.passes
    else:
        span = lr.rows * lr.cols * lr.passes * lr.operands * (lr.read_gap + 1)
    memories = sorted({p // 4 for p in procs})
    inside = np.isin(res.memory, memories) & (res.word >= lr.read_base) \
        & (res.word < lr.read_base + span)
    return bool(inside.any())


def honour_order(m, lr, res, procs: list[int], before: np.ndarray, recompute
                 ) -> tuple[object, str | None]:
    """The layer as the accelerator runs it when its output lands on its own input.

    `res` was computed from the input as it was before the layer (`before`: the data
    memories then). Where the layer writes a byte of its input before an output pixel
    that reads it, that pixel sees the written value: each such pixel is recomputed
    (`recompute(memories) -> LayerResult`) from the memories as they are when it is
    produced, in pixel order, and the memories end with those values. Returns the
    corrected result and a note naming the layer (None: no output pixel read a byte
    after it was overwritten)."""
    if lr.flatten or lr.transposed or not len(res.memory) or len(res.shape) != 3 \
            or res.shape[1] * res.shape[2] <= 1:
        # one output pixel from the whole input (flatten): every read comes first
        return res, None
    words = m.sram.shape[1]
    if not _writes_where_it_reads(lr, res, procs):
        return res, None
    wins, need = _needs(lr, res)
    in_keys, in_need = _read_bytes(lr, procs, need, words)
    in_pixel = _pixel_of_read(lr, procs)
    out_keys, out_time, out_vals = _written_bytes(res, words)
    order = np.argsort(out_time, kind="stable")
    uniq, idx = np.unique(out_keys[order], return_index=True)
    first_time = out_time[order][idx]  # earliest write of each byte
    pos = np.clip(np.searchsorted(uniq, in_keys), 0, len(uniq) - 1)
    written = uniq[pos] == in_keys
    never = np.iinfo(np.int64).max
    # per input pixel, when one of its bytes is first overwritten
    hit_time = np.full(lr.rows * lr.cols, never, dtype=np.int64)
    np.minimum.at(hit_time, in_pixel[written], first_time[pos[written]])
    seen = np.where(wins >= 0, hit_time[np.maximum(wins, 0)], never)
    damaged = np.nonzero(seen.min(axis=1) < np.arange(len(wins)))[0]
    if not len(damaged):
        return res, None
    early = written & (first_time[pos] < in_need)
    k = int(np.nonzero(early)[0][0])
    mem, word = divmod(int(in_keys[k]) // 4, words)
    note = (f"layer {lr.index} writes its output over its own input before it has read "
            f"all of it (data memory {mem}, word {word}: overwritten by output pixel "
            f"{int(first_time[pos[k]])}, read afterwards for output pixel "
            f"{int(in_need[k])}); the accelerator produces output pixels in order, so "
            f"{len(damaged)} output pixel(s) are computed from overwritten input")
    if len(damaged) > MAX_EMULATED:
        raise Clobbered(note)
    vals = out_vals.copy()
    pix_of_value = np.arange(len(res.value)) % len(wins)
    value = res.value.copy()
    for t_out in damaged:
        state = before.copy()
        done = out_time < t_out
        state.reshape(-1)[out_keys[done]] = vals[done]
        again = recompute(state)
        mine = pix_of_value == t_out
        value[mine] = again.value[mine]
        _, _, fresh = _written_bytes(again, words)
        vals[out_time == t_out] = fresh[out_time == t_out]
    m.sram.reshape(-1)[out_keys] = vals
    return dataclasses.replace(res, value=value), note
