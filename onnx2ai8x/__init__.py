"""onnx2ai8x: ONNX in, MAX78000/MAX78002 C project out.

The Python API is `onnx2ai8x.api` (check, convert, quantize, verify, run). `check`,
`verify`, `run` and the error type are also here, loaded on first use so that
`import onnx2ai8x` stays cheap (the command line's start-up). `convert` and `quantize`
are only in `onnx2ai8x.api`: here those names are the driver module and the quantizer
package, which Python binds to this package once they are imported.
"""

__version__ = "0.1.0"

_API = ("check", "verify", "run", "Checked", "Converted", "Quantized", "Ai8xError")


def __getattr__(name: str):
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'onnx2ai8x' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
