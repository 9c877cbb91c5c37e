"""Float ONNX in: post-training quantization into ai8x-ONNX (issue 13).

`quantize_file` reads a standard float model (`onnx2ai8x.importer.float_onnx`), runs it
on the calibration data with onnxruntime and writes the layers' integers with the one
ai8x-ONNX builder (`custom_ops.builder`). No torch on this path.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..devices import Device
from ..errors import EXIT_USAGE, Ai8xError


def load_array(path: Path, what: str) -> np.ndarray:
    """The array of an .npy file. It is mapped first: a header that declares more values
    than the file holds is refused by the mapping, before anything is allocated (issue
    24: a 1 PiB allocation from a 128-byte calibration file)."""
    try:
        mapped = np.load(path, mmap_mode="r", allow_pickle=False)
        if not isinstance(mapped, np.ndarray):  # an .npz archive
            mapped.close()
            raise ValueError("it is an .npz archive, not one array")
        return np.array(mapped)
    except (OSError, ValueError, MemoryError, EOFError) as exc:
        raise Ai8xError("usage.bad-input", str(path), f"the {what} is not a readable .npy "
                        f"array ({str(exc)[:200] or type(exc).__name__})",
                        "save it with numpy.save", exit_code=EXIT_USAGE) from None


def quantize_file(model: Path, calibration: Path | None, *, method: str | None = None,
                  percentile: float | None = None, weight_bits: Path | None = None,
                  labels: Path | None = None, device: Device | None = None,
                  wide_output: bool = True):
    """Quantize the float model at `model` with the samples in `calibration` (.npy).

    A model that already holds the accelerator's integers (the vendor's export of a
    quantized or QAT model, `exact.recover`) is taken exactly; calibration data, if
    given, then only feeds the report.
    """
    from ..importer.float_onnx import read_float_model
    from .calibrate import DEFAULT_METHOD, DEFAULT_PERCENTILE
    from .exact import recover
    from .ptq import QuantOptions, load_weight_bits, quantize

    options = QuantOptions(method=method or DEFAULT_METHOD,
                           percentile=DEFAULT_PERCENTILE if percentile is None
                           else float(percentile),
                           weight_bits=None if weight_bits is None
                           else load_weight_bits(weight_bits),
                           wide_output=wide_output)
    # the float model records the device's name, as a Network does
    fm = read_float_model(model, None if device is None else device.name)
    exact = recover(fm) if weight_bits is None and method is None else None
    if exact is None and calibration is None:
        raise Ai8xError("usage.calibration", str(model),
                        "a float model needs calibration data to be quantized (it is not "
                        "an export of integer weights and power-of-two shifts)",
                        "pass --calibration X.npy: float samples in the model's input "
                        "shape (N x input)", exit_code=EXIT_USAGE)
    x = None if calibration is None else load_array(calibration, "calibration data")
    y = None if labels is None else load_array(labels, "label file")
    result = quantize(fm, x, options, labels=y, where=str(calibration), exact=exact)
    if device is not None:
        check_device(result.network, fm, device)
    return result


def check_device(network, fm, device: Device) -> None:
    """The device's limits (the legalizer's rules), each message naming the float
    model's nodes the offending layer was made from."""
    from dataclasses import replace

    from ..errors import Diagnostic
    from ..legalize import diagnose

    problems = diagnose(network, device)
    if not problems:
        return
    nodes = {lay.name: info.nodes for lay, info in zip(network.layers, fm.layers,
                                                           strict=True)}
    named = []
    for d in problems:
        src = nodes.get(d.where)
        where = f"{d.where} (node {', '.join(src)})" if src else d.where
        named.append(replace(d, where=where))
    raise Ai8xError.many([Diagnostic(d.code, d.where, d.message, d.hint) for d in named])


def is_float_model(path: Path) -> bool:
    """True when `path` is an ONNX model with a float input and no ai8x domain."""
    from .. import onnxpb

    try:
        model = onnxpb.load(path)
    except Exception:  # noqa: BLE001 - the convert path reports unreadable files itself
        return False
    if any(o.domain == "ai8x" for o in model.opset_import):
        return False
    inits = {i.name for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name not in inits:
            return inp.type.tensor_type.elem_type == 1  # FLOAT
    return False


__all__ = ["is_float_model", "load_array", "quantize_file"]
