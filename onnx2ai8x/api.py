"""The public Python API: `check`, `convert`, `quantize`, `verify`, `run` (issue 27).

Each takes a model as a path, the bytes of an ONNX file, a ModelProto (onnx's or
onnx2ai8x.onnxpb's) or a Network, and returns a frozen value. A model the converter
refuses raises `Ai8xError`: its `diagnostics` are the messages the command line prints
and its `exit_code` the code the command line exits with (1 invalid model or limits,
2 usage, 3 not modelled).

The functions keep no state between calls and write nothing but the output they are
given (`check` writes nothing at all), so they may run in several processes at once:
a search over architectures checks candidates in a loop, or fans them out over a
process pool (README, "Python API"). The command line is a layer over these functions.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .devices import Device, get_device
from .errors import EXIT_USAGE, Ai8xError
from .frontend import QuantizeRequest, is_path
from .report import LayerReport, Report


@dataclass(frozen=True)
class Checked:
    """What `check` found: the model fits the device, mapped as `report` says."""

    report: Report  # per layer: processors, passes, memories, cycles, weights
    warnings: tuple[str, ...]  # rendered diagnostics the model still converts with
    summary: str  # the table `onnx2ai8x check` prints
    report_json: str  # `onnx2ai8x check --json`
    sidecar: str  # the mapping as a sidecar (vendor YAML), `onnx2ai8x sidecar`

    @property
    def layers(self) -> tuple[LayerReport, ...]:
        return self.report.layers

    @property
    def cycles(self) -> int:
        return self.report.total_cycles


@dataclass(frozen=True)
class Converted:
    """A C project written to `output`."""

    output: Path
    report: Report
    warnings: tuple[str, ...]
    summary: str
    report_json: str  # the project's report.json
    board: str  # the SDK board the project is set up for
    # the hardware layers in the order the known answer assumes (snoop units), else None
    layer_order: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Quantized:
    """A float model quantized into ai8x-ONNX (`model`, in memory; written too when an
    output was given)."""

    model: object  # onnx2ai8x.onnxpb.ModelProto (onnx.ModelProto's wire format)
    report_json: str  # the quantization report
    table: str  # the table `onnx2ai8x quantize` prints
    warnings: tuple[str, ...]
    output: Path | None = None


def _device(device: str | Device) -> Device:
    """The device is always stated (no default): its name or a Device."""
    return device if isinstance(device, Device) else get_device(device)


def _quantize_request(calibration, method, percentile, weight_bits, labels, accept_loss,
                      shift_quantile, sample=None) -> QuantizeRequest:
    return QuantizeRequest(calibration=calibration, labels=labels, method=method,
                           percentile=percentile, weight_bits=weight_bits,
                           accept_loss=accept_loss, shift_quantile=shift_quantile,
                           sample=sample)


def plan_any(model, device: Device, sidecar: Path | None, quantize: QuantizeRequest,
             **kw):
    """convert.plan on an ai8x-ONNX model, or on a standard float model through the one
    front end (taken exactly when it holds the accelerator's integers, else quantized
    with `quantize.calibration`). Calibration data given for an ai8x-ONNX model is not
    needed and ignored."""
    from .convert import plan

    try:
        return plan(model, device, sidecar, quantize=quantize, **kw)
    except Ai8xError as exc:
        if exc.code != "float.already-ai8x":
            raise
    return plan(model, device, sidecar, **kw)


def check(model, device: str | Device, *, sidecar: Path | None = None,
          calibration=None, calibration_method: str | None = None,
          percentile: float | None = None, weight_bits: Path | None = None,
          accept_loss: bool = False, fifo: bool = False, overlap_data: bool = False,
          onnx_checker: bool = False) -> Checked:
    """Legalize and map `model` for `device`; nothing is written. A standard float
    model is quantized first with `calibration` (an .npy path or an array), as
    `convert` would. `onnx_checker` also runs the onnx package's checker (the command
    line does; it costs the onnx import). Raises Ai8xError when the model does not
    fit."""
    result = plan_any(model, _device(device), sidecar,
                      _quantize_request(calibration, calibration_method, percentile,
                                        weight_bits, None, accept_loss, None),
                      onnx_checker=onnx_checker, fifo=fifo, overlap_data=overlap_data)
    return Checked(report=result.report, warnings=result.warnings, summary=result.summary,
                   report_json=result.report_json, sidecar=result.sidecar_text)


def convert(model, device: str | Device, output: str | Path, *,
            sidecar: Path | None = None, sample=None, overwrite: bool = False,
            calibration=None, calibration_method: str | None = None,
            percentile: float | None = None, weight_bits: Path | None = None,
            labels: Path | None = None, accept_loss: bool = False,
            shift_quantile: float | None = None, **options) -> Converted:
    """Convert `model` into a C project in the directory `output` (written atomically;
    an existing one is replaced only with `overwrite`). `sample`: the known-answer
    input (an .npy path; default a fixed pseudo-random one). `options`: the command
    line's project options by their Python names (fifo=True, softmax=True,
    max_checklines=64, allow_oversize=True, ...). A project whose firmware is estimated
    not to fit the part is refused (Ai8xError `emit.firmware-size`) unless
    allow_oversize."""
    from .convert import ConvertRequest
    from .convert import convert as run_convert
    from .fsutil import check_output

    if sample is not None and not is_path(sample):
        raise Ai8xError("usage.bad-input", "sample", "the known-answer sample is given "
                        "as an .npy file", "numpy.save it and pass the path",
                        exit_code=EXIT_USAGE)
    output = Path(output)
    inputs = tuple(p for p in (model, sidecar, sample, calibration, labels, weight_bits)
                   if is_path(p))
    check_output(output, inputs, directory=True, overwrite=overwrite)
    result = run_convert(ConvertRequest(
        model=model, device=_device(device), output=output, sidecar=sidecar,
        sample_input=sample, overwrite=overwrite, options=_options(options, _device(device)),
        quantize=_quantize_request(calibration, calibration_method, percentile,
                                   weight_bits, labels, accept_loss, shift_quantile,
                                   sample)))
    return Converted(output=output, report=result.report, warnings=result.warnings,
                     summary=result.summary, report_json=result.report_json,
                     board=result.board, layer_order=result.layer_order)


def _options(given: dict, device: Device) -> dict:
    """The command line's option values by their Python names, checked (a name the
    command line does not have is refused, not ignored; values in the part's ranges)."""
    from .options import VENDOR_NEGATIONS, EmitOptions

    known = {*EmitOptions.__dataclass_fields__, *VENDOR_NEGATIONS, "overlap_data",
             "balance_speed", "allow_oversize"}
    unknown = sorted(set(given) - known)
    if unknown:
        raise Ai8xError("usage.option", unknown[0], "not an option of convert",
                        "see `onnx2ai8x convert --help`: its options by their Python "
                        "names (--max-checklines is max_checklines)", exit_code=EXIT_USAGE)
    EmitOptions.from_cli(device, **given)  # values in range before any work
    return dict(given)


def quantize(model, device: str | Device, *, calibration=None,
             output: str | Path | None = None, report: str | Path | None = None,
             overwrite: bool = False, labels: Path | None = None,
             calibration_method: str | None = None, percentile: float | None = None,
             weight_bits: Path | None = None, accept_loss: bool = False,
             shift_quantile: float | None = None) -> Quantized:
    """Quantize the float `model` into ai8x-ONNX for `device` with `calibration` (an
    .npy path or an array; not needed for an export of integer weights). With `output`,
    the model and its report (`report`, default report.json beside it) are written;
    without, nothing is."""
    from .frontend import front_end

    fe = front_end(model, _device(device), quantize=_quantize_request(
        calibration, calibration_method, percentile, weight_bits, labels, accept_loss,
        shift_quantile))
    result = fe.quant
    if result is None:
        raise Ai8xError("float.already-ai8x", "model", "the model is already ai8x-ONNX",
                        "convert it directly: onnx2ai8x.api.convert(model, device, out)")
    if output is not None:
        from .fsutil import check_output, write_bytes_atomic, write_text_atomic

        output = Path(output)
        report = Path(report) if report is not None else output.parent / "report.json"
        inputs = tuple(p for p in (model, calibration, labels, weight_bits) if is_path(p))
        check_output(output, inputs, directory=False, overwrite=overwrite)
        check_output(report, (*inputs, output), directory=False, overwrite=overwrite)
        write_text_atomic(report, result.report_json())
        write_bytes_atomic(output, result.model.SerializeToString())
    return Quantized(model=result.model, report_json=result.report_json(),
                     table=result.table(), warnings=fe.warnings, output=output)


def verify(project: str | Path, *, model=None, stop_after: int | None = None,
           dump: str | Path | None = None,
           layer_order: tuple[int, ...] | None = None):
    """Run the C project in `project` on the functional accelerator model
    (verification.VerifyResult: `passed`, `verdict`, `text`, `data`). With `model`
    (path or in memory), name the first layer whose output differs from the
    reference. Writes only with `stop_after` (into `dump`)."""
    from .verification import verify as run_verify

    return run_verify(Path(project), model=model, stop_after=stop_after,
                      dump=None if dump is None else Path(dump), layer_order=layer_order)


def run(model, sample) -> dict[str, object]:
    """Run the ai8x-ONNX `model` bit-exactly on onnxruntime with the ai8x kernels:
    output name -> array. `sample`: an .npy path or an array of integers in
    [-128, 127] ((C, H, W), (C, L) or with a batch dimension)."""
    if is_path(model) and is_path(sample):
        from .runner import run_file

        names, outputs = run_file(Path(model), Path(sample))
        return dict(zip(names, outputs, strict=True))
    import custom_ops

    from .frontend import load_onnx
    from .network import Network
    from .runner import fit_to_input
    from .samples import checked_values, load_sample

    if isinstance(model, Network):
        from custom_ops.builder import build_proto

        proto = build_proto(model)
    else:
        proto = load_onnx(model)
    x = load_sample(Path(sample)) if is_path(sample) else checked_values(sample, "sample")
    session = custom_ops.session(proto)
    inp = session.get_inputs()[0]
    outputs = session.run(None, {inp.name: fit_to_input(x, len(inp.shape), "sample")})
    return dict(zip([o.name for o in session.get_outputs()], outputs, strict=True))


__all__ = ["Ai8xError", "Checked", "Converted", "Quantized", "check", "convert",
           "quantize", "run", "verify"]
