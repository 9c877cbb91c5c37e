"""Importers: ai8x-ONNX -> Network (`onnx_reader`), float ONNX (`float_onnx`), vendor
checkpoints (`checkpoint`; import-izer itself is `onnx2ai8x.sidecar.izer`).

`read_model` is loaded on first use so that importing a sibling module (e.g. the
checkpoint reader) does not pull in onnx, and nothing here imports torch.
"""
from __future__ import annotations


def __getattr__(name: str):
    if name in ("read_model", "read_model_full", "ReadModel"):
        from . import onnx_reader

        return getattr(onnx_reader, name)
    raise AttributeError(name)


__all__ = ["ReadModel", "read_model", "read_model_full"]
