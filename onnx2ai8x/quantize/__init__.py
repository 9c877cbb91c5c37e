"""Float ONNX in: post-training quantization into ai8x-ONNX (issue 13).

`quantize_file` reads a standard float model (`onnx2ai8x.importer.float_onnx`), runs it
on the calibration data with onnxruntime and writes the layers' integers with the one
ai8x-ONNX builder (`custom_ops.builder`). No torch on this path.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..devices import Device
from ..errors import EXIT_USAGE, Ai8xError

if TYPE_CHECKING:
    import numpy as np


def load_array(path: Path | np.ndarray, what: str) -> np.ndarray:
    """The array of an .npy file. It is mapped first: a header that declares more values
    than the file holds is refused by the mapping, before anything is allocated (issue
    24: a 1 PiB allocation from a 128-byte calibration file)."""
    import numpy as np  # not at import: the command line reads this package's guard

    from ..samples import npy_errors

    if isinstance(path, np.ndarray):  # given in memory (the Python API)
        return path
    try:
        mapped = np.load(path, mmap_mode="r", allow_pickle=False)
        if not isinstance(mapped, np.ndarray):  # an .npz archive
            mapped.close()
            raise ValueError("it is an .npz archive, not one array")
        return np.array(mapped)
    except (*npy_errors(), MemoryError) as exc:
        raise Ai8xError("usage.bad-input", str(path), f"the {what} is not a readable .npy "
                        f"array ({str(exc)[:200] or type(exc).__name__})",
                        "save it with numpy.save", exit_code=EXIT_USAGE) from None


# The tails the accelerator does not compute (importer/float_onnx.py takes them off the
# model's end) and what computes them when the user does not: softmax.c for a Softmax.
TAIL_OPTIONS = {"Softmax": "--softmax (softmax.c computes it on the Arm core)"}
# The tails the CPU fallback computes in the project (partition/split.py, its CPU head).
CPU_FALLBACK_TAILS = frozenset({"Sigmoid", "Softmax"})


def check_tail(tail, applied: tuple[str, ...], source: str) -> None:
    """A final operator the accelerator does not compute (Softmax, LogSoftmax, Sigmoid)
    is refused unless the user states that something applies it (`applied`: --cpu-tail
    for all, --softmax for a Softmax): the project's output would silently be the
    values before it (issue 35)."""
    missing = [op for op in tail if op not in applied]
    if not missing:
        return
    ops = ", then ".join(missing)
    hints = [f"pass --cpu-tail if your application applies {ops} to the output (a "
             "generated project's README and main.c then say so)"]
    if all(op in CPU_FALLBACK_TAILS for op in missing):
        hints.append("--cpu-fallback (with --calibration) to compute it on the Arm core "
                     "in the generated project")
    hints += [TAIL_OPTIONS[op] for op in missing if op in TAIL_OPTIONS and len(missing) == 1]
    raise Ai8xError("float.cpu-tail", source,
                    f"the model ends in {ops}, which the accelerator does not compute; its "
                    "output would be the values before it",
                    "; or ".join(hints))


def quantize_file(model: Path, calibration: Path | np.ndarray | None, *, method: str | None = None,
                  percentile: float | None = None, weight_bits: Path | None = None,
                  labels: Path | None = None, device: Device | None = None,
                  wide_output: bool = True, check: bool = True,
                  shift_quantile: float | None = None, sample: np.ndarray | None = None,
                  tail_applied: tuple[str, ...] = ()):
    """Quantize the float model `model` (a path or a ModelProto) with the samples in
    `calibration` (an .npy file or an array).

    A model that already holds the accelerator's integers (the vendor's export of a
    quantized or QAT model, `exact.recover`) is taken exactly; calibration data, if
    given, then only feeds the report. The recovery is checked against the export on
    `sample` (the model's input units; else the first calibration sample, else a fixed
    pseudo-random one): it must be exact (verify_exact).
    """
    from ..importer.float_onnx import read_float_model
    from .calibrate import DEFAULT_METHOD, DEFAULT_PERCENTILE
    from .exact import recover_or_why
    from .ptq import QuantOptions, quantize, read_weight_bits, source_ranges

    source = str(model) if isinstance(model, str | Path) else "model"  # (in memory)

    bits, bits_at = (None, None) if weight_bits is None else read_weight_bits(weight_bits)
    options = QuantOptions(method=method or DEFAULT_METHOD,
                           percentile=DEFAULT_PERCENTILE if percentile is None
                           else float(percentile),
                           weight_bits=bits, weight_bits_at=bits_at,
                           wide_output=wide_output)
    # the float model records the device's name, as a Network does
    fm = read_float_model(model, None if device is None else device.name,
                          {"shift_quantile": shift_quantile})
    check_tail(fm.cpu_tail, tail_applied, source)
    exact = None
    if weight_bits is None and method is None:
        exact, why = recover_or_why(fm)
        if exact is None:
            _not_exact(fm, why)
    if exact is None and calibration is None and fm.canonical is not None and \
            fm.canonical.fact("vendor_form") == "float":
        raise Ai8xError("usage.calibration", source,
                        "the vendor training repository's export of a float (not "
                        "quantized) checkpoint: its weights are not the accelerator's "
                        "integers", "export the quantized checkpoint (quantize.py, then "
                        "train.py --summary onnx) to take it exactly, or pass --calibration "
                        "X.npy (samples in the export's units, x / 128)",
                        exit_code=EXIT_USAGE)
    if exact is None and calibration is None and source_ranges(fm) is None:
        what = ("a quantized model that does not state the scale of its input and of "
                "every layer's output needs calibration data to be requantized" if fm.qdq
                else
                "a float model needs calibration data to be quantized (it is not an "
                "export of integer weights and power-of-two shifts)")
        raise Ai8xError("usage.calibration", source, what,
                        "pass --calibration X.npy: float samples in the model's input "
                        "shape (N x input)", exit_code=EXIT_USAGE)
    x = None if calibration is None else load_array(calibration, "calibration data")
    y = None if labels is None else load_array(labels, "label file")
    where = str(calibration) if isinstance(calibration, str | Path) else "calibration data"
    result = quantize(fm, x, options, labels=y, where=where, exact=exact)
    if device is not None and check:  # (the front end checks after its rewrites)
        check_device(result.network, fm, device)
    warnings: tuple[str, ...] = ()
    if fm.canonical is not None:
        warnings = tuple(d.render().replace("error[", "warning[", 1)
                         for d in fm.canonical.warnings)
    if exact is not None:
        from .verify_exact import check_recovery

        # the recovered network is exactly the export (or the conversion stops)
        warnings += check_recovery(fm, result, exact[2], sample if sample is not None
                                   else (None if x is None else x[:1]))
    if warnings:
        from dataclasses import replace

        result = replace(result, warnings=warnings)
    return result


def _not_exact(fm, why: tuple[str, str]) -> None:
    """A model an exporter dialect read as integers that cannot be taken exactly: an
    error naming the first layer (never a silent fallback to calibration)."""
    form = None if fm.canonical is None else fm.canonical.fact("vendor_form")
    if form in (None, "float"):
        return
    layer, reason = why
    raise Ai8xError("float.vendor-not-exact", f"layer {layer}",
                    f"the model is the vendor training repository's {form} export, but "
                    f"this layer cannot be taken exactly: {reason}",
                    "export the quantized checkpoint (quantize.py, then train.py --summary "
                    "onnx) without editing the graph; a float model needs --calibration")


def check_device(network, fm, device: Device) -> None:
    """The device's limits after the rewrites, as every command checks them
    (legalize.legal.legal_network), each message naming the float model's nodes the
    offending layer was made from."""
    from ..legalize.legal import legal_network

    names = {lay.name: info.nodes for lay, info in zip(network.layers, fm.layers,
                                                           strict=True)}
    legal_network(network, device, names)


def is_float_model(path) -> bool:
    """True when `path` (or an onnxpb ModelProto) is an ONNX model with a float input and
    no ai8x domain."""
    from .. import onnxpb

    try:
        model = path if isinstance(path, onnxpb.ModelProto) else onnxpb.load(path)
    except Exception:  # noqa: BLE001 - the convert path reports unreadable files itself
        return False
    if any(o.domain == "ai8x" for o in model.opset_import):
        return False
    inits = {i.name for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name not in inits:
            # FLOAT, or a quantized model's INT8 / UINT8 codes (importer/dialects/
            # integer_io.py takes them or says why not)
            return inp.type.tensor_type.elem_type in (1, 2, 3)
    return False


__all__ = ["is_float_model", "load_array", "quantize_file"]
