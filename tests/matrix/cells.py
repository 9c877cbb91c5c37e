"""One cell of the matrix, run as a user runs it: convert (float and requantized sources
with their calibration data), follow a refusal's hint when it proposes a flag, `verify`
the project, and compare the converted model with the source's own outputs on the
held-out inputs.

Outcomes (the words of expected.json and of the README table):

* `exact`: converts, verify passes, and every held-out output is within one code of the
  source's (a source with power-of-two scales, taken exactly: the hardware rounds half
  up where Brevitas and onnxruntime round half to even);
* `converts`: converts, verify passes, and the held-out outputs are within the
  tolerance (TOLERANCE_DB) of the source's;
* `cpu-fallback exact` / `cpu-fallback converts`: refused with a hint proposing
  `--cpu-fallback`; with it, the same as above;
* `refused CODE`: refused with a hint (that proposes no flag, or one that cannot be
  applied to a model: an export setting, a change to the model);
* `hint fails CODE -> CODE2`: the hint proposed a flag; with it the model is refused
  again (a hint that is not a promise);
* `no hint CODE`: refused without a hint;
* `verify fails`, `loss`, `shape differs`: converted, but the project fails verify, the
  outputs are further from the source's than the tolerance, or have another size;
* `crash TYPE`: an exception that is not the converter's error (a traceback);
* `n/a`: the framework cannot write the layer (catalogue.NOT_EXPRESSIBLE);
* `not made`: the exporter itself failed on the model (models/<column>/not_made.json).
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from . import catalogue as cat

# Float sources and sources requantized to power-of-two shifts (onnxruntime's and
# TFLite's float scales, zero points): the converted model's held-out outputs must have
# an SQNR against the source's of at least TOLERANCE_DB. Why 20 dB: the conversion
# quantizes every activation and weight to 8 bits with power-of-two scales, which keep
# between 6 and 7 of the 8 bits of a tensor's range (a power of two rounds the range up
# by at most 2x), i.e. an SQNR of about 35-40 dB for one layer's output; the models have
# up to four quantized layers and untrained (seeded) weights, whose outputs are not
# concentrated near their range, and a requantized source adds the difference between
# its grid and the accelerator's. 20 dB (an RMS error of 10 % of the output's RMS) is
# met by every cell that takes the model as it is with margin (the measured values are
# printed by `record.py --details`) and fails a dropped layer, a lost bias or activation, a
# transposed output or a wrong scale, which give a few dB at best. The converter's own
# silent-loss guard stops at 10 dB.
TOLERANCE_DB = 20.0
# flags a hint may propose that the harness applies as they are (Python names)
APPLICABLE_FLAGS = {"--cpu-fallback": "cpu_fallback", "--accept-loss": "accept_loss",
                    "--allow-oversize": "allow_oversize", "--overlap-data": "overlap_data"}
CONVERTS = ("exact", "converts", "cpu-fallback exact", "cpu-fallback converts")


@dataclass(frozen=True)
class Result:
    outcome: str
    detail: str = ""  # the error's first line, or the measured SQNR
    sqnr_db: float | None = None


def not_made(col: str) -> dict[str, str]:
    path = cat.MODELS / col / "not_made.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _layout(col: cat.Column, x: np.ndarray) -> np.ndarray:
    """NCHW / NCL inputs -> the model's own input layout (Keras and TFLite:
    channels-last, except an image model exported with --inputs-as-nchw: tf2onnx
    changes only 4-D inputs, a sequence stays (steps, features))."""
    if col.family in ("keras", "tflite") and not (col.name == "keras_nchw" and x.ndim == 4):
        return np.ascontiguousarray(np.moveaxis(x, 1, -1))
    return x


def inputs(col: cat.Column, r: cat.Row, part: str) -> np.ndarray:
    """The calibration or held-out inputs in the units and layout the model reads (a
    TFLite model with int8 input: the int8 codes of its input quantization)."""
    x = _layout(col, np.load(cat.DATA)[f"{part}_{r.kind}"])
    if col.name == "tflite_int8_io":
        scale, zero = np.load(col.outputs)[f"{r.name}.input_q"]
        x = np.clip(np.round(x / scale) + zero, -128, 127).astype(np.float32)
    return x


def source_outputs(col: cat.Column, r: cat.Row) -> np.ndarray:
    return np.load(col.outputs)[r.name].astype(np.float64)


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    noise = float(np.sum((ref - got) ** 2))
    power = float(np.sum(ref ** 2))
    if noise == 0:
        return math.inf
    return -math.inf if power == 0 else 10 * math.log10(power / noise)


def output_step(path: Path) -> float | None:
    """The scale of the quantizer that writes a QCDQ model's output (one code), through
    the data moves after it (Flatten, Reshape, MaxPool: they keep the grid), else
    None."""
    model = onnx.load(str(path))
    inits = {i.name: i for i in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    name = model.graph.output[0].name
    while name in producer:
        node = producer[name]
        if node.op_type == "DequantizeLinear":
            return float(onnx.numpy_helper.to_array(inits[node.input[1]]).reshape(-1)[0])
        if node.op_type not in ("Flatten", "Reshape", "MaxPool", "Transpose", "Squeeze",
                                "Unsqueeze", "Identity"):
            return None
        name = node.input[0]
    return None


def _converted_outputs(converted, model: Path, r: cat.Row, x: np.ndarray,
                       cal: Path, split: bool) -> np.ndarray:
    """The converted model's outputs on the held-out inputs, in float units: the
    project's ai8x-ONNX on the bit-exact reference (a split project: its CPU segments
    and accelerator parts in order, onnx2ai8x's own integer pipeline)."""
    if not split:
        from tests.float_onnx.helpers import quantized_float_output

        q = onnx.load(str(converted.model_file))
        return quantized_float_output(q, x).reshape(len(x), -1)
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.frontend import QuantizeRequest
    from onnx2ai8x.partition.build import partition
    from onnx2ai8x.partition.project import run_joined

    part = partition(model, get_device(r.device), QuantizeRequest(calibration=cal))
    if part.head is not None:
        scale = part.scales[part.head.outputs[0]]
    else:
        scale = part.quant.parts[-1].output_scales[0]
    rows = [np.asarray(run_joined(part, x[k:k + 1]).final, np.float64).reshape(-1) * scale
            for k in range(len(x))]
    return np.stack(rows)


def _hint_flags(hint: str) -> dict[str, bool]:
    return {APPLICABLE_FLAGS[f]: True for f in re.findall(r"--[a-z][a-z-]*", hint)
            if f in APPLICABLE_FLAGS}


def _first(exc) -> tuple[str, str, str]:
    d = exc.diagnostics[0]
    return d.code, f"{d.where}: {d.message}", d.hint


def run(col_name: str, row_name: str, keep: Path | None = None) -> Result:
    """The outcome of one cell (see the module's docstring). `keep`: where to leave the
    project (a temporary directory otherwise)."""
    col, r = cat.column(col_name), cat.row(row_name)
    if cat.not_expressible(col, r):
        return Result("n/a", cat.not_expressible(col, r))
    if r.name in not_made(col.name):
        return Result("not made", not_made(col.name)[r.name])
    model = cat.model_path(col.name, r.name)
    if not model.exists():
        return Result("missing", str(model))
    with tempfile.TemporaryDirectory() as tmp:
        cal = Path(tmp) / "cal.npy"
        np.save(cal, inputs(col, r, "cal"))
        out = Path(tmp) / "project"
        return _convert_and_compare(col, r, model, cal, out, keep)


def _convert_and_compare(col, r, model, cal, out, keep) -> Result:
    from onnx2ai8x import api
    from onnx2ai8x.errors import Ai8xError

    calibration = None if col.exact else cal
    sink = io.StringIO()
    flags: dict[str, bool] = {}
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            try:
                done = api.convert(model, r.device, out, calibration=calibration)
            except Ai8xError as exc:
                code, where, hint = _first(exc)
                if not hint:
                    return Result(f"no hint {code}", where)
                flags = _hint_flags(hint)
                if not flags:
                    return Result(f"refused {code}", f"{where} | hint: {hint}")
                if flags.get("cpu_fallback") and calibration is None:
                    calibration = cal  # --cpu-fallback quantizes from calibration data
                try:
                    done = api.convert(model, r.device, out, calibration=calibration,
                                       **flags)
                except Ai8xError as again:
                    code2, where2, _ = _first(again)
                    return Result(f"hint fails {code} -> {code2}", f"{where} || {where2}")
            verdict = api.verify(out)
    except Exception as exc:  # noqa: BLE001 - a traceback is an outcome of its own
        return Result(f"crash {type(exc).__name__}", str(exc).splitlines()[0][:300]
                      if str(exc) else "")
    if keep is not None:
        shutil.copytree(out, keep, dirs_exist_ok=True)
    prefix = "cpu-fallback " if flags.get("cpu_fallback") else ""
    if not verdict.passed:
        return Result(f"{prefix}verify fails", verdict.text.splitlines()[0][:300])
    return _compare(col, r, model, cal, done, prefix, bool(flags.get("cpu_fallback")))


def _compare(col, r, model, cal, done, prefix, split) -> Result:
    x = inputs(col, r, "held")
    try:
        got = _converted_outputs(done, model, r, x, cal, split)
    except Exception as exc:  # noqa: BLE001
        return Result(f"crash {type(exc).__name__}", f"running the conversion: {exc}")
    want = source_outputs(col, r).reshape(len(x), -1)
    if got.shape != want.shape:
        return Result(f"{prefix}shape differs", f"{got.shape} vs source {want.shape}")
    db = sqnr_db(want, got)
    detail = f"SQNR {db:.1f} dB"
    if col.exact:
        step = output_step(cat.model_path("brevitas_qcdq", r.name)) or 0.0
        worst = float(np.max(np.abs(got - want)))
        if step > 0 and worst <= step * (1 + 1e-6):
            return Result(f"{prefix}exact", f"{detail}, at most {worst / step:g} code", db)
    if db >= TOLERANCE_DB:
        return Result(f"{prefix}converts", detail, db)
    return Result(f"{prefix}loss", detail, db)
