"""The command-line entries of the float path: `quantize`, and convert with
`--calibration` (quantize, then the ordinary convert pipeline on the result)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from ..devices import Device
from ..errors import EXIT_USAGE, Ai8xError
from ..fsutil import write_bytes_atomic, write_text_atomic


def _require(path: Path | None, what: str) -> None:
    if path is not None and not Path(path).is_file():
        raise Ai8xError("usage.missing-file", str(path), f"{what} not found",
                        "check the path", exit_code=EXIT_USAGE)


def quantize_command(model: Path, calibration: Path | None, output: Path, *, device: Device,
                     labels: Path | None = None, method: str | None = None,
                     percentile: float | None = None, weight_bits: Path | None = None,
                     report: Path | None = None, shift_quantile: float | None = None):
    """Quantize and write OUT.onnx and its report (both atomically)."""
    from . import quantize_file

    result = quantize_file(model, calibration, method=method, percentile=percentile,
                           weight_bits=weight_bits, labels=labels, device=device,
                           shift_quantile=shift_quantile)
    report = report if report is not None else Path(output).parent / "report.json"
    data = result.model.SerializeToString()
    write_text_atomic(report, result.report_json())
    write_bytes_atomic(Path(output), data)
    return result


def convert_float(model: Path, device: Device, out: Path, *, calibration: Path | None,
                  labels: Path | None, method: str | None, percentile: float | None,
                  weight_bits: Path | None, sidecar: Path | None, sample_input: Path | None,
                  overwrite: bool, options: dict, progress: bool,
                  shift_quantile: float | None = None):
    """Quantize `model`, then convert the quantized model into the project `out`.

    The project's known-answer test uses --sample-input, else the first calibration
    sample, both in the float model's input units, quantized with the model's input
    mapping; report.json gains the
    quantization report under "quantization".
    """
    from ..convert import ConvertRequest, convert
    from . import quantize_file

    _require(calibration, "calibration data")
    _require(labels, "labels")
    _require(weight_bits, "weight-bits file")
    from . import load_array

    # The sample is in the source model's own input units (the vendor export's x / 128,
    # or its -8 mode's integers; a float model's floats) and goes to the accelerator
    # through the model's input mapping.
    source = sample_input if sample_input is not None else calibration
    x = None if source is None else load_array(
        source, "sample input" if sample_input is not None else "calibration data")
    result = quantize_file(model, calibration, method=method, percentile=percentile,
                           weight_bits=weight_bits, labels=labels, device=device,
                           shift_quantile=shift_quantile,
                           sample=x if sample_input is not None else None)
    with tempfile.TemporaryDirectory(prefix="onnx2ai8x-q-") as tmp:
        qpath = Path(tmp) / f"{Path(model).stem}.onnx"
        qpath.write_bytes(result.model.SerializeToString())
        sample = None
        if x is not None:
            q = _one_sample(x, result.mapping, source)
            sample = Path(tmp) / "sample.npy"
            np.save(sample, q.astype(np.int64), allow_pickle=False)
        converted = convert(ConvertRequest(
            model=qpath, device=device, output=out, sidecar=sidecar, sample_input=sample,
            overwrite=overwrite, options=options, progress=progress,
            report_extra={"quantization": json.loads(result.report_json())}))
    if result.warnings:
        from dataclasses import replace

        converted = replace(converted, warnings=(*result.warnings, *converted.warnings))
    return converted, result.table()


def _one_sample(x: np.ndarray, mapping, where: Path) -> np.ndarray:
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


__all__ = ["convert_float", "quantize_command"]
