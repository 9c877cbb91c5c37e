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
* `cpu-fallback exact` / `cpu-fallback converts` (`MAX78002 converts`, ...): refused
  with a hint proposing `--cpu-fallback` (another device, another flag of
  APPLICABLE_FLAGS); with it, the same as above;
* `refused CODE`: refused with a hint that proposes a change to the model;
  `refused CODE -> COLUMN` / `-> ROW`: the hint proposes an export setting or another
  source (SIBLING_COLUMNS: the cell of the same row in COLUMN), or a change to the
  model that another row is (SIBLING_ROWS: that row in the same column), and that cell
  converts (`refused CODE -> ... fails`: it does not, a broken promise);
* `cpu-fallback fails CODE -> CODE2` (`MAX78002 fails ...`): the hint proposed a flag
  (a device); with it the model is refused again (a hint that is not a promise). A hint
  that proposes several is followed one proposal at a time, the outcomes joined by
  ` / `;
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
# by at most 2x): about 35-40 dB for one layer's output. The models have up to four
# quantized layers and untrained (seeded) weights, whose outputs are not concentrated
# near their range; a requantized source adds the difference between its grid and the
# accelerator's. Every cell recorded as converting measured 26.7 dB or more (Keras'
# residual add; `record.py --details` prints each cell's figure), so 20 dB leaves 6 dB
# of margin for other versions of the tools, while a dropped layer, a lost bias or
# activation, a transposed output or a wrong scale gives a few dB at best (the 1-D
# models fed in the wrong layout measured -0.4 to 5 dB). The converter's own
# silent-loss guard stops at 10 dB.
TOLERANCE_DB = 20.0
# flags a hint may propose that the harness applies as they are (Python names)
APPLICABLE_FLAGS = {"--cpu-fallback": "cpu_fallback", "--accept-loss": "accept_loss",
                    "--allow-oversize": "allow_oversize", "--overlap-data": "overlap_data"}


def converts(outcome: str) -> bool:
    """The outcome is a conversion within its tolerance (with each thing the hint
    proposed, when it was refused)."""
    return all(part.split()[-1] in ("exact", "converts") for part in outcome.split(" / "))


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


def _converted_outputs(converted, model: Path, device: str, x: np.ndarray,
                       cal: Path, split: bool) -> np.ndarray:
    """The converted model's outputs on the held-out inputs, in float units: the
    project's ai8x-ONNX on the bit-exact reference (a split project: its CPU segments
    and accelerator parts in order, onnx2ai8x's own integer pipeline)."""
    if not split:
        from tests.float_onnx.helpers import quantized_float_output

        q = onnx.load(str(converted.model_file))
        return _source_layout(q, quantized_float_output(q, x)).reshape(len(x), -1)
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.frontend import QuantizeRequest
    from onnx2ai8x.partition.build import partition
    from onnx2ai8x.partition.project import run_joined

    part = partition(model, get_device(device), QuantizeRequest(calibration=cal))
    if part.head is not None:
        scale = part.scales[part.head.outputs[0]]
    else:
        scale = part.quant.parts[-1].output_scales[0]
    rows = [np.asarray(run_joined(part, x[k:k + 1]).final, np.float64) * scale
            for k in range(len(x))]
    y = np.stack(rows)
    if part.head is None:
        y = _source_layout(part.quant.parts[-1].model, y)
    return y.reshape(len(x), -1)


def _source_layout(model, y: np.ndarray) -> np.ndarray:
    """The accelerator's output (N, C, ...) in the source model's own layout, when the
    converted model records the change it left to the host: `ai8x.output_perm`, the
    axes (batch first) that take the one to the other, as `ai8x.input_perm` does for
    the input. Without it the output is compared as it comes."""
    perm = next((p.value for p in model.metadata_props if p.key == "ai8x.output_perm"),
                None)
    if perm is None:
        return y
    perm = json.loads(perm)
    shape = next((json.loads(p.value) for p in model.metadata_props
                  if p.key == "ai8x.output_shape"), None)
    if shape is not None and int(np.prod(shape)) == int(np.prod(y.shape[1:])):
        y = y.reshape(len(y), *shape)  # the accelerator may hold a size-1 axis more
    return np.transpose(y, perm) if len(perm) == y.ndim else y


def follow(hint: str, device: str) -> list[tuple[str, dict, str]]:
    """Each thing a hint proposes that the harness can apply as it is, on its own (a
    hint's proposals are alternatives, "... or pass --cpu-fallback"): the flags of
    APPLICABLE_FLAGS and another device ("target MAX78002"). [(label, convert's keyword
    arguments, device)]"""
    out = []
    for flag in dict.fromkeys(re.findall(r"--[a-z][a-z-]*", hint)):
        if flag in APPLICABLE_FLAGS:
            out.append((flag[2:], {APPLICABLE_FLAGS[flag]: True}, device))
    for other in dict.fromkeys(re.findall(r"\bMAX7800[02]\b", hint)):
        if other != device:
            out.append((other, {}, other))
    return out


# What a hint proposes that another cell already is, by the words the hint uses: an
# export setting or another source (the same row in another column), or a change to
# the model that another row is (the same column). Following the hint gives that
# cell's model, so the hint is a promise when that cell converts.
SIBLING_COLUMNS = (("without `inference_input_type`", {"tflite": "tflite_float_io"}),
                   ("export the float model", {"tflite": "keras"}),
                   ("--inputs-as-nchw", {"keras": "keras_nchw"}),
                   ("dynamo=False", {"torch": "torch_ts"}))
SIBLING_ROWS = (("use ConvTranspose2d", "convtranspose2d"),
                ("place BatchNormalization right after a Conv", "bn_fused"),
                ("use dilation 1", "conv2d_3x3"),
                ("use groups=1", "conv2d_3x3"))


def sibling(col: cat.Column, r: cat.Row, hint: str) -> tuple[str, str] | None:
    """The cell (column, row) following `hint` leads to, if another cell is it."""
    for words, where in SIBLING_COLUMNS:
        if words in hint and where.get(col.family, col.name) != col.name:
            return where[col.family], r.name
    for words, other in SIBLING_ROWS:
        if words in hint and other != r.name:
            return col.name, other
    return None


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
    try:
        with _quiet():
            done = api.convert(model, r.device, out, calibration=calibration)
    except Ai8xError as exc:
        code, where, hint = _first(exc)
        if not hint:
            return Result(f"no hint {code}", where)
        proposals = follow(hint, r.device)
        if not proposals:
            return _refused(col, code, f"{where} | hint: {hint}", sibling(col, r, hint))
        results = [_followed(col, r, model, cal, out, code, where, p) for p in proposals]
        return Result(" / ".join(x.outcome for x in results),
                      " / ".join(x.detail for x in results))
    except Exception as exc:  # noqa: BLE001 - a traceback is an outcome of its own
        return _crash(exc)
    return _verified(col, r, model, cal, done, out, keep, "", False, r.device)


def _refused(col, code: str, detail: str, target: tuple[str, str] | None) -> Result:
    """A refusal whose hint proposes a change to the model or the export; when another
    cell (`target`) is what following it gives, that cell is run too: the hint holds
    when it converts."""
    if target is None:
        return Result(f"refused {code}", detail)
    name = target[0] if target[0] != col.name else target[1]  # another column, or row
    other = run(*target)
    if converts(other.outcome):
        return Result(f"refused {code} -> {name}", detail)
    return Result(f"refused {code} -> {name} fails", f"{detail} || {name}: "
                  f"{other.outcome}")


@contextlib.contextmanager
def _quiet():
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


def _crash(exc: Exception) -> Result:
    text = str(exc).splitlines()[0][:300] if str(exc) else ""
    return Result(f"crash {type(exc).__name__}", text)


def _followed(col, r, model, cal, out, code, where, proposal) -> Result:
    """The cell converted again with one thing its refusal's hint proposed."""
    from onnx2ai8x import api
    from onnx2ai8x.errors import Ai8xError

    label, kwargs, device = proposal
    calibration = None if col.exact and not kwargs.get("cpu_fallback") else cal
    shutil.rmtree(out, ignore_errors=True)
    try:
        with _quiet():
            done = api.convert(model, device, out, calibration=calibration, **kwargs)
    except Ai8xError as again:
        code2, where2, _ = _first(again)
        return Result(f"{label} fails {code} -> {code2}", f"{where} || {where2}")
    except Exception as exc:  # noqa: BLE001
        return _crash(exc)
    return _verified(col, r, model, cal, done, out, None, f"{label} ",
                     bool(kwargs.get("cpu_fallback")), device)


def _verified(col, r, model, cal, done, out, keep, prefix, split, device) -> Result:
    from onnx2ai8x import api

    try:
        with _quiet():
            verdict = api.verify(out)
    except Exception as exc:  # noqa: BLE001
        return _crash(exc)
    if keep is not None:
        shutil.copytree(out, keep, dirs_exist_ok=True)
    if not verdict.passed:
        return Result(f"{prefix}verify fails", verdict.text.splitlines()[0][:300])
    return _compare(col, r, model, cal, done, prefix, split, device)


def _compare(col, r, model, cal, done, prefix, split, device) -> Result:
    x = inputs(col, r, "held")
    try:
        got = _converted_outputs(done, model, device, x, cal, split)
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
