"""CPU operators for the layers the accelerator cannot run (issue 28).

See onnx2ai8x/cpu/README.md: `ops` (records), `reference` (numpy definition), `onnx`
(ONNX nodes), `cgen` (C99), `host` (host-compiled C), `cycles` (Cortex-M4 estimate).
"""
