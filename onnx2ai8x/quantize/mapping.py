"""The input mapping float -> int8 of a quantized float model, kept in its metadata.

A model quantized from float ONNX takes int8 input, as the accelerator does. The mapping
from the original model's float input is stored in the model's `metadata_props` so that
`onnx2ai8x run` (and the user's firmware) quantize float samples exactly the same way:

    q = clip(floor((x.transpose(perm) + offset) / scale + 0.5), -128, 127),
    reshaped to `shape`, `offset` one value per channel (none: zero)

`perm` turns the original model's input layout (e.g. NHWC from tf2onnx) into the
accelerator's channels-first layout. `offset` is an offset the model itself adds to its
input first (Keras' Normalization subtracts the mean, Rescaling may add an offset): the
accelerator's zero padding then holds zeros of the offset input, as the model's padding
does. No zero point of the int8 codes: the first layer's zero padding must stay zero,
which a zero point would break.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..errors import EXIT_USAGE, Ai8xError

KEY_SCALE = "ai8x.input_scale"
KEY_PERM = "ai8x.input_perm"
KEY_SHAPE = "ai8x.input_shape"
KEY_OFFSET = "ai8x.input_offset"
KEY_OUTPUT_SCALES = "ai8x.output_scales"
# the layout change of the output the host applies (a channels-last model's output
# Transpose, left out of the accelerator's network): axes, batch first
KEY_OUTPUT_PERM = "ai8x.output_perm"
KEY_OUTPUT_SHAPE = "ai8x.output_shape"  # per sample, the shape the perm applies to


@dataclass(frozen=True)
class InputMapping:
    """float -> int8 for the model input: scale, layout permutation, accelerator shape."""

    scale: float
    perm: tuple[int, ...]  # with the batch axis first: (0, ...)
    shape: tuple[int, ...]  # the accelerator's input per sample, (C, H, W) or (C, L)
    offset: tuple[float, ...] = ()  # per channel of `shape`, added before the scale

    def values(self, x: np.ndarray) -> np.ndarray:
        """Float samples (N, *model input) -> the accelerator's layout, offset added."""
        x = np.asarray(x, np.float64)
        if tuple(self.perm) != tuple(range(x.ndim)):
            x = np.transpose(x, self.perm)
        x = x.reshape(x.shape[0], *self.shape)
        if self.offset:
            x = x + np.asarray(self.offset, np.float64).reshape(
                1, -1, *([1] * (len(self.shape) - 1)))
        return x

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """Float samples (N, *model input) -> int8 (N, *accelerator input)."""
        return np.clip(np.floor(self.values(x) / self.scale + 0.5), -128, 127) \
            .astype(np.int8)

    def metadata(self) -> dict[str, str]:
        meta = {KEY_SCALE: repr(float(self.scale)), KEY_PERM: json.dumps(list(self.perm)),
                KEY_SHAPE: json.dumps(list(self.shape))}
        if self.offset:
            meta[KEY_OFFSET] = json.dumps([float(v) for v in self.offset])
        return meta

    @classmethod
    def from_metadata(cls, props: dict[str, str]) -> InputMapping | None:
        """The mapping a model's metadata records (None: it records none). Damaged
        values are refused, not guessed: a wrong scale or layout would quantize every
        sample wrongly without a word."""
        if KEY_SCALE not in props:
            return None
        scale = _number(props, KEY_SCALE)
        if not 0 < scale < float("inf"):
            raise _damaged(KEY_SCALE, f"the input scale is {scale}; it must be positive")
        perm = _integers(props, KEY_PERM)
        shape = _integers(props, KEY_SHAPE)
        if sorted(perm) != list(range(len(perm))) or not perm or perm[0] != 0:
            raise _damaged(KEY_PERM, f"{list(perm)} is not a layout permutation with the "
                           "batch axis first")
        if len(shape) not in (2, 3) or min(shape) < 1:
            raise _damaged(KEY_SHAPE, f"{list(shape)} is not an input shape (C, H, W) or "
                           "(C, L) of positive sizes")
        offset: tuple[float, ...] = ()
        if KEY_OFFSET in props:
            values = _json(props, KEY_OFFSET)
            if not isinstance(values, list) or len(values) != shape[0] or not all(
                    isinstance(v, int | float) and not isinstance(v, bool)
                    and np.isfinite(v) for v in values):
                raise _damaged(KEY_OFFSET, f"the offset must be {shape[0]} finite numbers, "
                               "one per input channel")
            offset = tuple(float(v) for v in values)
        return cls(scale, perm, shape, offset)


def _damaged(key: str, why: str) -> Ai8xError:
    return Ai8xError("model.metadata", key, f"the model's input mapping is damaged: {why}",
                     "quantize the float model again (onnx2ai8x quantize), or remove the "
                     "ai8x.input_* metadata to feed int8 samples")


def _json(props: dict[str, str], key: str) -> object:
    try:
        return json.loads(props[key])
    except (json.JSONDecodeError, RecursionError, KeyError):
        raise _damaged(key, f"`{key}` is {'missing' if key not in props else 'not JSON'}") \
            from None


def _number(props: dict[str, str], key: str) -> float:
    try:
        return float(props[key])
    except ValueError:
        raise _damaged(key, f"`{key}` is {props[key][:40]!r}, not a number") from None


def _integers(props: dict[str, str], key: str) -> tuple[int, ...]:
    values = _json(props, key)
    if not isinstance(values, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise _damaged(key, f"`{key}` must be a list of integers")
    return tuple(values)


def model_mapping(path) -> InputMapping | None:
    """The input mapping recorded in an ai8x-ONNX file, if any (no onnx import)."""
    from .. import onnxpb

    model = onnxpb.load(path)
    props = {p.key: p.value for p in model.metadata_props}
    return InputMapping.from_metadata(props)


__all__ = ["InputMapping", "model_mapping"]


def one_sample(x: np.ndarray, mapping, where) -> np.ndarray:
    """The first sample of `x` (the model's input units) as the accelerator's int8."""
    size = int(np.prod(mapping.shape))
    rank = len(mapping.perm) - 1
    if x.size == size and tuple(mapping.perm) == tuple(range(rank + 1)):
        first = x.reshape(mapping.shape)  # one sample, any layout of the same numbers
    else:
        first = x[0] if x.ndim > rank else x
    try:
        return mapping.quantize(np.asarray(first, np.float64)[np.newaxis])[0]
    except ValueError:
        raise Ai8xError("usage.bad-input", str(where),
                        f"the sample has shape {tuple(int(d) for d in x.shape)}; the model "
                        f"takes {size} values per sample", "save one sample (or N) in the "
                        "model's input shape", exit_code=EXIT_USAGE) from None
