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
                     report: Path | None = None, accept_loss: bool = False,
                     shift_quantile: float | None = None):
    """Quantize and write OUT.onnx and its report (both atomically); the result and the
    front end's warnings (a loss accepted with `accept_loss`)."""
    from ..frontend import front_end

    fe = front_end(model, device, quantize=QuantizeRequest(
        calibration=calibration, labels=labels, method=method, percentile=percentile,
        weight_bits=weight_bits, accept_loss=accept_loss,
        shift_quantile=shift_quantile))
    result = fe.quant
    report = report if report is not None else Path(output).parent / "report.json"
    data = result.model.SerializeToString()
    write_text_atomic(report, result.report_json())
    write_bytes_atomic(Path(output), data)
    return result, fe.warnings


def convert_float(model: Path, device: Device, out: Path, *, calibration: Path | None,
                  labels: Path | None, method: str | None, percentile: float | None,
                  weight_bits: Path | None, sidecar: Path | None, sample_input: Path | None,
                  overwrite: bool, options: dict, progress: bool,
                  accept_loss: bool = False, shift_quantile: float | None = None):
    """Quantize `model`, then convert the quantized model into the project `out`.

    The project's known-answer test uses --sample-input, else the first calibration
    sample, both in the float model's input units, quantized with the model's input
    mapping; report.json gains the
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
                                 accept_loss=accept_loss, shift_quantile=shift_quantile,
                                 sample=sample_input)))
    return converted, converted.quant.table()


def one_sample(x: np.ndarray, mapping, where: Path) -> np.ndarray:
    """The first sample of `x` (the model's input units) as the accelerator's int8."""
    size = int(np.prod(mapping.shape))
    rank = len(mapping.perm) - 1
    if x.size == size and tuple(mapping.perm) == tuple(range(rank + 1)):
        first = x.reshape(mapping.shape)  # one sample, any layout of the same numbers
    else:
        first = x[0] if x.ndim > rank else x
    try:
        return mapping.quantize(np.asarray(first, np.float64)[np.newaxis])[0]
    except ValueError:
        raise Ai8xError("usage.bad-input", str(where),
                        f"the sample has shape {tuple(int(d) for d in x.shape)}; the model "
                        f"takes {size} values per sample", "save one sample (or N) in the "
                        "model's input shape", exit_code=EXIT_USAGE) from None


__all__ = ["convert_float", "one_sample", "quantize_command"]
