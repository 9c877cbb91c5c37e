"""The input mapping float -> int8 of a quantized float model, kept in its metadata.

A model quantized from float ONNX takes int8 input, as the accelerator does. The mapping
from the original model's float input is stored in the model's `metadata_props` so that
`onnx2ai8x run` (and the user's firmware) quantize float samples exactly the same way:

    q = clip(floor(x.transpose(perm) / scale + 0.5), -128, 127), reshaped to `shape`

`perm` turns the original model's input layout (e.g. NHWC from tf2onnx) into the
accelerator's channels-first layout. No zero point: the first layer's zero padding must
stay zero, which an offset would break.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

KEY_SCALE = "ai8x.input_scale"
KEY_PERM = "ai8x.input_perm"
KEY_SHAPE = "ai8x.input_shape"
KEY_OUTPUT_SCALES = "ai8x.output_scales"


@dataclass(frozen=True)
class InputMapping:
    """float -> int8 for the model input: scale, layout permutation, accelerator shape."""

    scale: float
    perm: tuple[int, ...]  # with the batch axis first: (0, ...)
    shape: tuple[int, ...]  # the accelerator's input per sample, (C, H, W) or (C, L)

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """Float samples (N, *model input) -> int8 (N, *accelerator input)."""
        x = np.asarray(x, np.float64)
        if tuple(self.perm) != tuple(range(x.ndim)):
            x = np.transpose(x, self.perm)
        x = x.reshape(x.shape[0], *self.shape)
        return np.clip(np.floor(x / self.scale + 0.5), -128, 127).astype(np.int8)

    def metadata(self) -> dict[str, str]:
        return {KEY_SCALE: repr(float(self.scale)), KEY_PERM: json.dumps(list(self.perm)),
                KEY_SHAPE: json.dumps(list(self.shape))}

    @classmethod
    def from_metadata(cls, props: dict[str, str]) -> InputMapping | None:
        if KEY_SCALE not in props:
            return None
        perm = tuple(json.loads(props.get(KEY_PERM, "[]")))
        shape = tuple(json.loads(props.get(KEY_SHAPE, "[]")))
        return cls(float(props[KEY_SCALE]), perm, shape)


def model_mapping(path) -> InputMapping | None:
    """The input mapping recorded in an ai8x-ONNX file, if any (no onnx import)."""
    from .. import onnxpb

    model = onnxpb.load(path)
    props = {p.key: p.value for p in model.metadata_props}
    return InputMapping.from_metadata(props)


__all__ = ["InputMapping", "model_mapping"]
