"""Emission: register values, the C project, the sidecar writer and the annotated ONNX.

`onnx2ai8x.emit.registers` computes every register write; `onnx2ai8x.emit.project`
lays them out (with the memory contents) as a C project for the vendor SDK.
"""
