"""`python -m onnx2ai8x`: the `onnx2ai8x` command."""
from .entry import run

run()
