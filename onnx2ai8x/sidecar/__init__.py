"""The sidecar language: the vendor's YAML network description (seed 004).

`parse_file`/`parse_text` read and validate it; `onnx2ai8x.sidecar.resolve` combines it
with layer shapes (from a checkpoint or an ONNX-derived Network) into the resolved
per-layer configuration, a Network and a Placement.
"""
from .model import DataBuffer, Sidecar, SidecarLayer, Unload
from .parse import parse_dict, parse_file, parse_text

__all__ = ["DataBuffer", "Sidecar", "SidecarLayer", "Unload", "parse_dict", "parse_file",
           "parse_text"]
