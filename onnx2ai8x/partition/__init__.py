"""Heterogeneous execution (issue 28): the layers the accelerator refuses run on the Arm
core, in CPU segments before (a stem) and after (a head) the accelerator's part.

split.py decides the segments from the accelerator's own refusals; the CPU operators
themselves (records, reference, C) are onnx2ai8x.cpu's.
"""
