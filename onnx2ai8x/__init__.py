"""onnx2ai8x: ONNX in, MAX78000/MAX78002 C project out."""

__version__ = "0.1.0"
