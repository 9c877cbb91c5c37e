"""Every float pattern of tests/float_onnx, quantized here by onnxruntime's
`quantize_static` (QDQ and QOperator formats, default settings: uint8 asymmetric
activations, int8 weights), converts without calibration data and tracks the quantized
source on onnxruntime: 25 dB output SQNR against it (the requantization to power-of-two
shifts re-rounds each layer once more; a dropped node or wrong clamp costs far more).
"""
from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from ..float_onnx.helpers import quantized_float_output, sqnr_db
from ..float_onnx.models import PATTERNS, calibration, export_torch, tf_style
from .helpers import run_source

# onnxruntime's QOperator format leaves these float (nothing to convert without data)
UNQUANTIZED = {("convtranspose2d", "QOperator")}
SQNR_DB = 25.0


def _cases() -> list:
    cases = []
    for p in PATTERNS:
        for fmt in ("QDQ", "QOperator"):
            if (p.name, fmt) in UNQUANTIZED:
                continue
            cases.append(pytest.param(p, fmt, id=f"{p.name}-{fmt}"))
    return cases


def _quantized(p, fmt: str, tmp: Path, x) -> Path:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    path = tmp / f"{p.name}.onnx"
    path = export_torch(p, path, dynamo=False) if p.torch else tf_style(p, path)
    name = onnx.load(str(path)).graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter([{name: x[k:k + 1]} for k in range(x.shape[0])])

        def get_next(self):
            return next(self.items, None)

    out = tmp / f"{p.name}_{fmt}.onnx"
    quantize_static(str(path), str(out), Reader(), quant_format=getattr(QuantFormat, fmt))
    return out


@pytest.mark.parametrize(("pattern", "fmt"), _cases())
def test_onnxruntime_quantized_pattern(pattern, fmt: str, tmp_path: Path) -> None:
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.quantize import quantize_file

    x = calibration(pattern)
    path = _quantized(pattern, fmt, tmp_path, x)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert ops & {"QuantizeLinear", "QLinearConv", "QGemm", "QLinearMatMul"}, ops
    # the pattern's device, stated: it decides how a pooling-only layer of 80 channels
    # is grouped
    result = quantize_file(path, None, device=get_device(pattern.device))
    assert result.summary["qdq"] is True
    got = quantized_float_output(result.model, x)
    sqnr = sqnr_db(run_source(path, x), got)
    assert sqnr >= SQNR_DB, f"{pattern.name} {fmt}: {sqnr:.1f} dB"
