"""The command-line entries of the float path: `quantize`, and convert with
`--calibration` (quantize, then the ordinary convert pipeline on the result). Both run
the one front end (onnx2ai8x.frontend): read and quantize, rewrite, legalize, then the
silent-loss guard."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..devices import Device
from ..errors import EXIT_USAGE, Ai8xError
from ..frontend import QuantizeRequest
from ..fsutil import write_bytes_atomic, write_text_atomic


def _require(path: Path | None, what: str) -> None:
    if path is not None and not Path(path).is_file():
        raise Ai8xError("usage.missing-file", str(path), f"{what} not found",
                        "check the path", exit_code=EXIT_USAGE)


def quantize_command(model: Path, calibration: Path | None, output: Path, *, device: Device,
                     labels: Path | None = None, method: str | None = None,
                     percentile: float | None = None, weight_bits: Path | None = None,
                     report: Path | None = None, accept_loss: bool = False):
    """Quantize and write OUT.onnx and its report (both atomically); the result and the
    front end's warnings (a loss accepted with `accept_loss`)."""
    from ..frontend import front_end

    fe = front_end(model, device, quantize=QuantizeRequest(
        calibration=calibration, labels=labels, method=method, percentile=percentile,
        weight_bits=weight_bits, accept_loss=accept_loss))
    result = fe.quant
    report = report if report is not None else Path(output).parent / "report.json"
    data = result.model.SerializeToString()
    write_text_atomic(report, result.report_json())
    write_bytes_atomic(Path(output), data)
    return result, fe.warnings


def first_calibration_sample(calibration: Path, result) -> np.ndarray:
    """The first calibration sample as the accelerator reads it (the model's input
    mapping): the project's known-answer input when no --sample-input is given."""
    from . import load_array

    x = load_array(calibration, "calibration data")
    # one sample in the model's own shape (its rank is the mapping's, less the batch; a
    # vector model's (N, F) samples are (F, 1, 1) to the accelerator)
    first = x[0] if x.ndim == len(result.mapping.perm) else x
    return result.mapping.quantize(np.asarray(first)[np.newaxis])[0].astype(np.int64)


def convert_float(model: Path, device: Device, out: Path, *, calibration: Path | None,
                  labels: Path | None, method: str | None, percentile: float | None,
                  weight_bits: Path | None, sidecar: Path | None, sample_input: Path | None,
                  overwrite: bool, options: dict, progress: bool,
                  accept_loss: bool = False):
    """Quantize `model`, then convert the quantized model into the project `out`.

    The project's known-answer test uses the first calibration sample (quantized with
    the model's input mapping) unless --sample-input is given; report.json gains the
    quantization report under "quantization".
    """
    from ..convert import ConvertRequest, convert

    _require(calibration, "calibration data")
    _require(labels, "labels")
    _require(weight_bits, "weight-bits file")
    converted = convert(ConvertRequest(
        model=Path(model), device=device, output=out, sidecar=sidecar,
        sample_input=sample_input, overwrite=overwrite, options=options, progress=progress,
        quantize=QuantizeRequest(calibration=calibration, labels=labels, method=method,
                                 percentile=percentile, weight_bits=weight_bits,
                                 accept_loss=accept_loss)))
    return converted, converted.quant.table()


__all__ = ["convert_float", "first_calibration_sample", "quantize_command"]
