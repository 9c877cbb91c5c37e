"""Output written over input the layer still needs: the hardware's order, checked.

The functional model computes a layer from its whole input and then writes the output,
so on its own it would run a layer whose output overwrites its own input as if the
input had been copied first. The accelerator does not: it produces the output pixels one
after the other in raster order, each from the input pixels its pooling and convolution
windows cover (seed 000, Streaming Mode: input is shifted in row by row and a pixel is
discarded once the last output pixel needing it has been produced; "Data Memory": the
accelerator supports overlapping data, and the vendor's generator cannot check "for
inadvertent overwriting of unprocessed input data by newly generated output data").

So a byte of data memory that the layer reads as part of input pixel x and writes as
part of output pixel t is safe exactly when no output pixel after t needs x. Where the
layer writes such a byte earlier, the real accelerator would compute later pixels from
overwritten input: `Clobbered` stops the run (a FAIL verdict naming the layer).

This is worked out from the registers and the addresses the layer really reads and
writes (the windows by running the model's own slicing over pixel numbers), apart from
the converter's checker (onnx2ai8x/map/overlap.py), so that the two can be compared.
"""
from __future__ import annotations

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


def check_order(m, lr, res, procs: list[int]) -> None:
    """Raise Clobbered when layer `lr` (result `res`, input from data memory through
    the processors `procs`) wrote a byte of its input before its last use."""
    if lr.flatten or lr.transposed or not len(res.memory) or len(res.shape) != 3:
        # one output pixel from the whole input (flatten): every read comes first
        return
    out_rows, out_cols = res.shape[1], res.shape[2]
    pixels_out = out_rows * out_cols
    if pixels_out <= 1:
        return
    wins = _windows_2d(lr, lr.rows, lr.cols, out_rows, out_cols)
    need = np.full(lr.rows * lr.cols, -1, dtype=np.int64)
    t = np.broadcast_to(np.arange(pixels_out)[:, None], wins.shape)
    ok = wins >= 0
    np.maximum.at(need, wins[ok], t[ok])
    words = m.sram.shape[1]
    in_keys, in_need = _read_bytes(lr, procs, need, words)
    # write time of every byte written: output pixel number (all channels of a pixel
    # are written with it); a full-word write covers the four lanes
    time = np.arange(len(res.memory)) % pixels_out
    base = (res.memory.astype(np.int64) * words + res.word) * 4
    full = res.lane < 0
    out_keys = np.concatenate([base[~full] + res.lane[~full],
                               (base[full][:, None] + np.arange(4)).reshape(-1)])
    out_time = np.concatenate([time[~full], np.repeat(time[full], 4)])
    order = np.lexsort((in_need, in_keys))
    keys, needs = in_keys[order], in_need[order]
    last = np.r_[keys[1:] != keys[:-1], True]  # the largest need of each byte
    keys, needs = keys[last], needs[last]
    pos = np.searchsorted(keys, out_keys)
    pos = np.minimum(pos, len(keys) - 1)
    hit = (keys[pos] == out_keys) & (out_time < needs[pos])
    if not hit.any():
        return
    k = np.nonzero(hit)[0][np.argmin(out_time[hit])]
    key = int(out_keys[k])
    mem, word = divmod(key // 4, words)
    raise Clobbered(
        f"layer {lr.index} writes output pixel {int(out_time[k])} (data memory {mem}, "
        f"word {word}, byte {key % 4}) over its own input before output pixel "
        f"{int(needs[pos[k]])} has read it: the accelerator produces output pixels in "
        "order, so this overlap of output and input overwrites input still needed")
