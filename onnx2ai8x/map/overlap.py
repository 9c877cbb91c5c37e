"""When may a layer write its output over its own input? The hardware's order decides.

The accelerator supports an output that overlaps its input, and the vendor's generator
"will not be able to check for inadvertent overwriting of unprocessed input data by newly
generated output data" (seed 000, "Data Memory"; its `--overlap-data` only switches the
check off). We can check it, by modelling the order in which a layer reads and writes:

* Output pixels are produced one after the other in raster order (row by row), each
  from the input pixels its window needs: the pooling window (pool size, pool stride,
  pool dilation), then the convolution window (kernel, padding); the pooling stage also
  carries the stride of a layer without pooling (it subsamples). In the Streaming Mode
  description (seed 000), input is shifted in row by row and an input pixel is discarded
  once the last output pixel needing it has been produced.
* All words of an output pixel (every output pass, four words for 32-bit output) are
  written once that pixel has been computed from all words of the input pixels it needs
  (every input pass and operand).

Whether the hardware keeps an input pixel it has shifted in or reads it again from data
memory, an output word is safe to write over an input word exactly when every output
pixel that needs that input word has been produced: output pixel t may overwrite input
pixel x iff `last_need(x) <= t` (the pixel's own reads come before its writes). That is
the rule here and in the virtual accelerator (ai8xsim/overlap.py, which judges the same
from the registers and the addresses the layer really reads and writes).

Layers whose order is not modelled here (transposed convolutions, dilated convolutions,
read or write gaps, streaming, data buffers, an input read by a later layer as well) get
None: any overlap of their own input is then refused.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..network import Layer, Op
from ..placement import LayerPlacement
from .hw import multipass


@dataclass(frozen=True)
class Clobber:
    """The first output word that lands on input still needed (byte offsets)."""

    offset: int  # byte offset in the memory instance of the clobbered word
    output_pixel: int  # raster index of the output pixel that writes it
    input_pixel: int  # raster index of the input pixel it held
    needed_until: int  # the last output pixel that needs that input pixel

    def describe(self) -> str:
        return (f"output pixel {self.output_pixel} is written at {self.offset:#06x} over "
                f"input pixel {self.input_pixel}, which output pixel {self.needed_until} "
                "still needs")


def _axis_need(size: int, pool: int, pool_stride: int, pool_dil: int, pooled: int,
               kernel: int, pad: int, dil: int, out: int) -> np.ndarray:
    """Per input position along one axis, the last output position that needs it
    (-1: none does)."""
    need = np.full(size, -1, dtype=np.int64)
    for o in range(out):
        for i in range(kernel):
            pr = o - pad + i * dil
            if not 0 <= pr < pooled:
                continue
            for a in range(pool):
                r = pr * pool_stride + a * pool_dil
                if r < size:
                    need[r] = max(need[r], o)
    return need


def last_need(layer: Layer) -> np.ndarray | None:
    """Per input pixel (raster order), the raster index of the last output pixel that
    needs it (-1: none), or None when the layer's order is not modelled."""
    if layer.operator == Op.CONVTRANSPOSE2D or layer.dilation != (1, 1) \
            or layer.buffer_shift or layer.buffer_insert:
        return None
    h, w = layer.input_dim
    if layer.flatten or layer.operator == Op.LINEAR:
        return np.zeros(h * w, dtype=np.int64)  # one output pixel from the whole input
    pooling = tuple(layer.pool) != (1, 1)
    if pooling and tuple(layer.stride) != (1, 1):
        return None
    ps = layer.pool_stride if pooling else layer.stride
    ph, pw = layer.pooled_dim
    oh, ow = layer.output_dim
    k, p = layer.kernel_size, layer.padding
    if layer.operator.one_d:
        # a 1-D frame is one line of h * w values (seed 004, Conv1d)
        rows = _axis_need(h * w, layer.pool[0], ps[0], layer.pool_dilation[0],
                          ph * pw, k[0], p[0], 1, oh * ow)
        return rows
    if layer.operator.passthrough:
        k, p = (1, 1), (0, 0)
    rows = _axis_need(h, layer.pool[0], ps[0], layer.pool_dilation[0], ph, k[0], p[0], 1,
                      oh)
    cols = _axis_need(w, layer.pool[1], ps[1], layer.pool_dilation[1], pw, k[1], p[1], 1,
                      ow)
    need = rows[:, None] * ow + cols[None, :]
    return np.where((rows[:, None] < 0) | (cols[None, :] < 0), -1, need).reshape(-1)


def first_clobber(layer: Layer, pl: LayerPlacement, big_data: bool) -> Clobber | None:
    """The first output word of `layer` that overwrites input it still needs, when its
    output (at `out_offset`) and its input (at `in_offset`) share byte lanes; None
    when nothing is clobbered. Raises ValueError when the order is not modelled."""
    need = last_need(layer) if not (pl.write_gap or pl.input_skip or pl.streaming) \
        else None
    if need is None:
        raise ValueError("order not modelled")
    passes = multipass(layer.input_channels)[0]
    # input: word of (pixel x, pass k, operand j); CHW holds four pixels per word
    if big_data:
        x = np.arange(len(need))
        in_words = (x // 4)[:, None] * passes + np.arange(passes)[None, :]
        in_pixel = np.repeat(x[:, None], passes, axis=1)
    else:
        per = passes * layer.operands
        in_words = np.arange(len(need))[:, None] * per + np.arange(per)[None, :]
        in_pixel = np.repeat(np.arange(len(need))[:, None], per, axis=1)
    in_words = pl.in_offset // 4 + in_words.reshape(-1)
    in_pixel = in_pixel.reshape(-1)
    # output: every word of output pixel t (all passes; four words per 32-bit pass)
    oh, ow = layer.output_dim
    per_out = multipass(layer.output_channels)[0] * (4 if layer.output_width != 8 else 1)
    t = np.arange(oh * ow)
    out_words = pl.out_offset // 4 + (t[:, None] * per_out
                                      + np.arange(per_out)[None, :]).reshape(-1)
    out_time = np.repeat(t, per_out)
    if not len(in_words) or not len(out_words):
        return None
    lo = int(min(in_words.min(), out_words.min()))
    size = int(max(in_words.max(), out_words.max())) - lo + 1
    needed = np.full(size, -1, dtype=np.int64)
    holder = np.full(size, -1, dtype=np.int64)
    order = np.argsort(need[in_pixel], kind="stable")
    needed[in_words[order] - lo] = need[in_pixel][order]  # the largest need wins
    holder[in_words[order] - lo] = in_pixel[order]
    written = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(written, out_words - lo, out_time)
    bad = np.nonzero(written < needed)[0]
    if not len(bad):
        return None
    w = int(bad[np.argmin(written[bad])])
    return Clobber(4 * (w + lo), int(written[w]), int(holder[w]), int(needed[w]))
