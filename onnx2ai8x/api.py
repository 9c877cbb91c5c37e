"""The public Python API: `check`, `convert`, `quantize`, `verify`, `run` and
`import_izer` (issue 27).

Each takes a model as a path, the bytes of an ONNX file, a ModelProto (onnx's or
onnx2ai8x.onnxpb's) or a Network, and returns a frozen value. A model the converter
refuses raises `Ai8xError`: its `diagnostics` are the messages the command line prints
and its `exit_code` the code the command line exits with (1 invalid model or limits,
2 usage, 3 not modelled).

The functions keep no state between calls and write nothing but the output they are
given (`check` writes nothing at all; `convert(..., cpu_fallback=True)` also cuts the
model into part files in a private temporary directory, removed when it returns), so
they may run in several processes at once: a search over architectures checks
candidates in a loop, or fans them out over a process pool (README, "Python API").

The command line is a layer over these functions: each command parses its arguments,
makes one call here and prints the value it gets back (`convert --build` and
`--verify` then build or verify the written project). Every decision about the model
(ai8x-ONNX or float, calibration, a vendor export recovered, the CPU fallback) and
every check of the inputs is taken here, so a Python caller gets what the command line
gives, and the same errors.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .devices import Device
from .errors import EXIT_USAGE, Ai8xError
from .frontend import QuantizeRequest, is_path, target_device
from .fsutil import check_output
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
    # the project's ai8x-ONNX (annotated; for a float model the quantized one)
    model_file: Path | None = None
    quant_table: str | None = None  # a float model's quantization, as a table
    # where the time of an inference goes (phases.PhaseReport: weights, bias, configure,
    # input, inference, unload, softmax), counted from the written C; the phases of
    # report.json. None for a project split with the Arm core (cpu_fallback).
    phases: object | None = None


@dataclass(frozen=True)
class Quantized:
    """A float model quantized into ai8x-ONNX (`model`, in memory; written too when an
    output was given)."""

    model: object  # onnx2ai8x.onnxpb.ModelProto (onnx.ModelProto's wire format)
    report_json: str  # the quantization report
    table: str  # the table `onnx2ai8x quantize` prints
    warnings: tuple[str, ...]
    output: Path | None = None
    report_file: Path | None = None  # where the quantization report was written


@dataclass(frozen=True)
class Imported:
    """A vendor project (sidecar YAML + quantized checkpoint) as ai8x-ONNX (`model`, in
    memory; written too when an output was given)."""

    model: object  # onnx.ModelProto
    output: Path | None = None


def device_for(model, device: str | Device | None = None) -> Device:
    """The device a conversion of `model` targets: `device` (a name or a Device), else
    the one the model names in its metadata (`ai8x.device`); a model that names none
    needs `device` (Ai8xError `usage.device`, exit 2). A model path must exist."""
    if device is None and is_path(model):
        _require_file(model, "model")
    return target_device(device, model)


def _require_file(path, what: str, *, directory: bool = False) -> None:
    """An input given as a path names an existing file (a project: a directory), else a
    usage error (exit 2) before any work."""
    try:
        found = Path(path).is_dir() if directory else Path(path).is_file()
    except (OSError, ValueError) as exc:  # a name too long, or not a path at all
        raise Ai8xError("usage.missing-file", str(path),
                        f"{what} cannot be opened ({getattr(exc, 'strerror', None) or exc})",
                        "check the path", exit_code=EXIT_USAGE) from None
    if what == "model" and not directory:
        from .modelfile import confused_model

        confused = confused_model(Path(path))
        if confused is not None:
            raise confused
    if not found:
        raise Ai8xError("usage.missing-file", str(path), f"{what} not found",
                        "pass the directory the converter wrote" if directory
                        else "check the path", exit_code=EXIT_USAGE)


def _inputs(*given: tuple[object, str]) -> tuple[Path, ...]:
    """The inputs given as paths (an array or a model in memory is not a file), each
    checked to exist: what an output must never overwrite."""
    paths = []
    for value, what in given:
        if is_path(value):
            _require_file(value, what)
            paths.append(Path(value))
    return tuple(paths)


# The final operators `cpu_tail=True` (--cpu-tail) states the application applies.
TAIL_OPERATORS = ("Softmax", "LogSoftmax", "Sigmoid")


def _quantize_request(calibration, method, percentile, weight_bits, labels, accept_loss,
                      shift_quantile, sample=None, cpu_tail: bool = False,
                      softmax: bool = False) -> QuantizeRequest:
    return QuantizeRequest(calibration=calibration, labels=labels, method=method,
                           percentile=percentile, weight_bits=weight_bits,
                           accept_loss=accept_loss, shift_quantile=shift_quantile,
                           sample=sample,
                           tail_applied=TAIL_OPERATORS if cpu_tail else
                           ("Softmax",) if softmax else ())


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


def check(model, device: str | Device | None = None, *, sidecar: Path | None = None,
          calibration=None, calibration_method: str | None = None,
          percentile: float | None = None, weight_bits: Path | None = None,
          accept_loss: bool = False, fifo: bool = False, overlap_data: bool = False,
          onnx_checker: bool = False, cpu_tail: bool = False) -> Checked:
    """Legalize and map `model` for `device`; nothing is written. A standard float
    model is quantized first with `calibration` (an .npy path or an array), as
    `convert` would. `sidecar`: a path, YAML text (the `sidecar` a Checked holds) or a
    dict. `onnx_checker` also runs the onnx package's checker (the command line does;
    it costs the onnx import). `cpu_tail`: the application applies the model's final
    Softmax, LogSoftmax or Sigmoid (else such a model is refused: the accelerator does
    not compute them). Raises Ai8xError when the model does not fit."""
    from .arguments import check_model, check_option, check_path

    check_model(model)
    check_path(weight_bits, "weight_bits")
    check_path(calibration, "calibration", array=True)
    for name, value in (("fifo", fifo), ("overlap_data", overlap_data),
                        ("accept_loss", accept_loss), ("cpu_tail", cpu_tail)):
        check_option(name, "bool", value)
    with sidecar_file(sidecar) as sidecar:
        _inputs((model, "model"), (sidecar, "sidecar"), (weight_bits, "weight-bits file"),
                (calibration, "calibration data"))
        dev = target_device(device, model)
        result = plan_any(model, dev, sidecar,
                          _quantize_request(calibration, calibration_method, percentile,
                                            weight_bits, None, accept_loss, None,
                                            cpu_tail=cpu_tail),
                          onnx_checker=onnx_checker, fifo=fifo, overlap_data=overlap_data)
    return Checked(report=result.report, warnings=result.warnings, summary=result.summary,
                   report_json=result.report_json, sidecar=result.sidecar_text)


def convert(model, device: str | Device | None, output: str | Path, *,
            sidecar: Path | None = None, sample=None, overwrite: bool = False,
            calibration=None, calibration_method: str | None = None,
            percentile: float | None = None, weight_bits: Path | None = None,
            labels: Path | None = None, accept_loss: bool = False,
            shift_quantile: float | None = None, cpu_fallback: bool = False,
            cpu_tail: bool = False, progress: bool = False, **options) -> Converted:
    """Convert `model` into a C project in the directory `output` (written atomically;
    an existing one is replaced only with `overwrite`). `sample`: the known-answer
    input (an .npy path; default a fixed pseudo-random one). `options`: the command
    line's project options by their Python names (fifo=True, softmax=True,
    max_checklines=64, allow_oversize=True, ...). A project whose firmware is estimated
    not to fit the part is refused (Ai8xError `emit.firmware-size`) unless
    allow_oversize.

    An ai8x-ONNX model converts as it is; a standard float model is quantized first
    with `calibration`, or recovered exactly without it when it holds the accelerator's
    integers (a vendor export). `cpu_fallback`: the layers the accelerator refuses run
    on the Arm core (a float model file with `calibration`, split where needed).
    `cpu_tail`: the application applies the model's final Softmax, LogSoftmax or
    Sigmoid, which the accelerator does not compute (the project's README and main.c
    say so); without it (or `softmax=True` for a Softmax, or `cpu_fallback`) such a
    model is refused.
    `progress`: a progress bar over the stages on stderr (interactive terminals only).
    `sidecar`: a path, YAML text (a Checked's `sidecar`) or a dict.
    """
    with sidecar_file(sidecar) as sidecar:
        return _convert(model, device, output, sidecar=sidecar, sample=sample,
                        overwrite=overwrite, calibration=calibration,
                        calibration_method=calibration_method, percentile=percentile,
                        weight_bits=weight_bits, labels=labels, accept_loss=accept_loss,
                        shift_quantile=shift_quantile, cpu_fallback=cpu_fallback,
                        cpu_tail=cpu_tail, progress=progress, **options)


def _convert(model, device, output, *, sidecar, sample, overwrite, calibration,
             calibration_method, percentile, weight_bits, labels, accept_loss,
             shift_quantile, cpu_fallback, cpu_tail, progress, **options) -> Converted:
    from .arguments import check_model, check_option, check_path
    from .convert import ConvertRequest

    check_model(model)
    check_path(output, "output", required=True)
    for name, value in (("sample", sample), ("weight_bits", weight_bits),
                        ("labels", labels)):
        check_path(value, name)
    check_path(calibration, "calibration", array=True)
    for name, value in (("overwrite", overwrite), ("accept_loss", accept_loss),
                        ("cpu_fallback", cpu_fallback), ("cpu_tail", cpu_tail),
                        ("progress", progress)):
        check_option(name, "bool", value)
    if sample is not None and not is_path(sample):
        raise Ai8xError("usage.bad-input", "sample", "the known-answer sample is given "
                        "as an .npy file", "numpy.save it and pass the path",
                        exit_code=EXIT_USAGE)
    output = Path(output)
    from .makepath import check_make_path

    check_make_path(output, "project directory", "an output directory")
    inputs = _inputs((model, "model"), (sidecar, "sidecar"), (sample, "sample input"),
                     (calibration, "calibration data"), (labels, "labels"),
                     (weight_bits, "weight-bits file"))
    check_output(output, inputs, directory=True, overwrite=overwrite)
    dev = target_device(device, model)
    request = ConvertRequest(
        model=model, device=dev, output=output, sidecar=sidecar, sample_input=sample,
        overwrite=overwrite, options=_options(options, dev), progress=progress,
        quantize=_quantize_request(calibration, calibration_method, percentile,
                                   weight_bits, labels, accept_loss, shift_quantile,
                                   sample, cpu_tail=cpu_tail,
                                   softmax=bool(options.get("softmax"))))
    result = _run_convert(request, cpu_fallback)
    quant = result.quant
    return Converted(output=output, report=result.report, warnings=result.warnings,
                     summary=result.summary, report_json=result.report_json,
                     board=result.board, layer_order=result.layer_order,
                     model_file=output / f"{result.stem}.onnx",
                     quant_table=None if quant is None else quant.table(),
                     phases=getattr(result, "phases", None))


@contextmanager
def sidecar_file(sidecar) -> Iterator[Path | str | None]:
    """A sidecar given as a path as it is; given as YAML text (a string with a line
    break: the `sidecar` a Checked holds) or a dict, written to a private temporary
    `sidecar.yaml` for the call, and its errors name it `sidecar` instead of that
    file."""
    if sidecar is None or isinstance(sidecar, Path) or (
            isinstance(sidecar, str) and "\n" not in sidecar):
        yield sidecar
        return
    import tempfile

    text = _sidecar_text(sidecar)
    with tempfile.TemporaryDirectory(prefix="onnx2ai8x-sidecar-") as tmp:
        path = Path(tmp) / "sidecar.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            yield path
        except Ai8xError as err:
            raise _renamed(err, str(path), "sidecar") from None


def _sidecar_text(sidecar) -> str:
    """YAML text of a sidecar given as text or a mapping."""
    if isinstance(sidecar, str):
        return sidecar
    if isinstance(sidecar, bytes):
        return sidecar.decode("utf-8", "replace")
    if isinstance(sidecar, dict):
        import yaml

        try:
            return yaml.safe_dump(sidecar, sort_keys=False)
        except yaml.YAMLError as exc:
            raise Ai8xError("usage.bad-input", "sidecar", f"the sidecar dict cannot be "
                            f"written as YAML ({str(exc).splitlines()[0][:200]})",
                            "use plain Python values: str, int, float, bool, list, dict",
                            exit_code=EXIT_USAGE) from None
    raise Ai8xError("usage.bad-input", "sidecar",
                    f"a sidecar is a path, YAML text or a dict, not {type(sidecar).__name__}",
                    "pass the sidecar file's path, its text, or yaml.safe_load of it",
                    exit_code=EXIT_USAGE)


def _renamed(err: Ai8xError, old: str, new: str) -> Ai8xError:
    """`err` with the file name `old` replaced by `new` everywhere it is quoted."""
    diags = [dataclasses.replace(d, where=d.where.replace(old, new),
                                 message=d.message.replace(old, new),
                                 hint=d.hint.replace(old, new)) for d in err.diagnostics]
    renamed = Ai8xError.many(diags)
    renamed.exit_code = err.exit_code
    return renamed


def _run_convert(request, cpu_fallback: bool):
    """The conversion `request` asks for: split between the Arm core and the accelerator
    (`cpu_fallback`), else the one pipeline (a float model quantized on the way); a
    float model's refused layer names --cpu-fallback (issue 28)."""
    if cpu_fallback:
        from .partition.project import convert_cpu_fallback

        return convert_cpu_fallback(request)
    from .convert import convert as run_convert

    try:
        return run_convert(request)
    except Ai8xError as exc:
        if request.quantize.calibration is None or not _fallback_splits(request, exc):
            raise
        from .partition.split import with_fallback_hint

        raise with_fallback_hint(exc) from None


def _fallback_splits(request, exc: Ai8xError) -> bool:
    """Whether --cpu-fallback would take the refused model (issue 34: a hint is a
    promise): the split and its quantization are tried, and the flag is named only when
    they succeed; options the split refuses (--riscv, a model given in memory, FIFO
    input with a CPU segment between runs) withhold it too."""
    from .partition.split import NOT_LAYER_CODES

    if any(d.code.startswith(NOT_LAYER_CODES) for d in exc.diagnostics) or \
            not is_path(request.model) or request.options.get("riscv"):
        return False
    from .partition.build import partition

    try:
        part = partition(Path(request.model), request.device, request.quantize)
    except Exception:  # noqa: BLE001 - whatever stops the split withholds the hint; the
        return False   # refusal at hand is what the user sees
    fifo = request.options.get("fifo") or request.options.get("fast_fifo")
    return not (part.split.between and fifo)


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
    from .arguments import check_option

    kinds = {name: f.type for name, f in EmitOptions.__dataclass_fields__.items()}
    for name, value in given.items():
        check_option(name, str(kinds.get(name, "bool")), value)
    EmitOptions.from_cli(device, **given)  # values in range before any work
    return dict(given)


def quantize(model, device: str | Device | None = None, *, calibration=None,
             output: str | Path | None = None, report: str | Path | None = None,
             overwrite: bool = False, labels: Path | None = None,
             calibration_method: str | None = None, percentile: float | None = None,
             weight_bits: Path | None = None, accept_loss: bool = False,
             shift_quantile: float | None = None, cpu_tail: bool = False) -> Quantized:
    """Quantize the float `model` into ai8x-ONNX for `device` with `calibration` (an
    .npy path or an array; not needed for an export of integer weights). `cpu_tail`:
    the model's final Softmax, LogSoftmax or Sigmoid is applied by the application (the
    quantized model ends before it; else such a model is refused). With `output`,
    the model and its report (`report`, default OUTPUT_STEM.report.json beside it) are
    written;
    without, nothing is."""
    from .arguments import check_model, check_path
    from .frontend import front_end

    check_model(model)
    check_path(calibration, "calibration", array=True)
    for name, value in (("output", output), ("report", report), ("labels", labels),
                        ("weight_bits", weight_bits)):
        check_path(value, name)
    inputs = _inputs((model, "model"), (calibration, "calibration data"),
                     (labels, "labels"), (weight_bits, "weight-bits file"))
    if output is not None:
        output = Path(output)
        # named after the output, so a second model quantized into the same folder
        # writes its own report (issue 35)
        report = Path(report) if report is not None else report_beside(output)
        check_output(output, inputs, directory=False, overwrite=overwrite, kind="onnx")
        # the report beside the output is an output too: never replaced without overwrite
        check_output(report, (*inputs, output), directory=False, overwrite=overwrite,
                     kind="report")
    dev = target_device(device, model)
    fe = front_end(model, dev, quantize=_quantize_request(
        calibration, calibration_method, percentile, weight_bits, labels, accept_loss,
        shift_quantile, cpu_tail=cpu_tail))
    result = fe.quant
    if result is None:
        raise Ai8xError("float.already-ai8x", "model", "the model is already ai8x-ONNX",
                        "convert it directly: onnx2ai8x.api.convert(model, device, out)")
    if output is not None:
        from .fsutil import write_bytes_atomic, write_text_atomic

        write_text_atomic(report, result.report_json())
        write_bytes_atomic(output, result.model.SerializeToString())
    return Quantized(model=result.model, report_json=result.report_json(),
                     table=result.table(), warnings=fe.warnings, output=output,
                     report_file=report if output is not None else None)


def report_beside(output: Path) -> Path:
    """Where `quantize` writes the report of `output` by default: `q.onnx` ->
    `q.report.json`."""
    return output.with_name(f"{output.stem if output.suffix else output.name}.report.json")


def verify(project: str | Path, *, model=None, stop_after: int | None = None,
           dump: str | Path | None = None,
           layer_order: tuple[int, ...] | None = None):
    """Run the C project in `project` on the functional accelerator model
    (verification.VerifyResult: `passed`, `verdict`, `text`, `data`, `exit_code`).
    With `model` (path or in memory), name the first layer whose output differs from
    the reference. Writes only with `stop_after` (into `dump`, default
    PROJECT/verify-layerN)."""
    from .arguments import check_count, check_layer_order, check_model, check_path
    from .verification import verify as run_verify

    check_path(project, "project", required=True)
    if model is not None:
        check_model(model)
    check_path(dump, "dump")
    check_count(stop_after, "stop_after")
    check_layer_order(layer_order)
    _inputs((model, "model"))
    _require_file(project, "project directory", directory=True)
    return run_verify(Path(project), model=model, stop_after=stop_after,
                      dump=None if dump is None else Path(dump), layer_order=layer_order)


def run(model, sample) -> dict[str, object]:
    """Run the ai8x-ONNX `model` bit-exactly on onnxruntime with the ai8x kernels:
    output name -> array. `sample`: an .npy path or an array of integers in
    [-128, 127] ((C, H, W), (C, L) or with a batch dimension)."""
    from .arguments import check_model, check_path

    check_model(model)
    check_path(sample, "sample", array=True, required=True)
    _inputs((model, "model"), (sample, "input"))
    if is_path(model) and is_path(sample):
        from .runner import run_file

        names, outputs = run_file(Path(model), Path(sample))
        return dict(zip(names, outputs, strict=True))
    import custom_ops

    from .frontend import load_onnx
    from .network import Network
    from .runner import run_session
    from .samples import checked_values, load_sample

    if isinstance(model, Network):
        from custom_ops.builder import build_proto

        proto = build_proto(model)
    else:
        proto = load_onnx(model)
    x = load_sample(Path(sample)) if is_path(sample) else checked_values(sample, "sample")
    names, outputs = run_session(custom_ops.session(proto), x, "sample", "model")
    return dict(zip(names, outputs, strict=True))


def import_izer(config_file: str | Path, checkpoint_file: str | Path,
                device: str | Device, *, sample: str | Path | None = None,
                output: str | Path | None = None, overwrite: bool = False) -> Imported:
    """A vendor project (its sidecar YAML `config_file` and quantized checkpoint
    `checkpoint_file`) as ai8x-ONNX. `sample`: an input .npy giving the input shape
    (else the first layer's `in_dim`). With `output`, the model is written there
    (atomically); without, nothing is. Needs PyTorch (the checkpoint's format)."""
    from .arguments import check_path

    check_path(config_file, "config_file", required=True)
    check_path(checkpoint_file, "checkpoint_file", required=True)
    check_path(sample, "sample")
    check_path(output, "output")
    dev = target_device(device, None)
    inputs = _inputs((config_file, "config file"), (checkpoint_file, "checkpoint file"),
                     (sample, "sample"))
    if output is not None:
        output = Path(output)
        check_output(output, inputs, directory=False, overwrite=overwrite, kind="onnx")
    try:
        from .sidecar.izer import import_project
    except ImportError as exc:  # torch is only needed here
        raise Ai8xError("usage.torch-missing", "import-izer",
                        f"the importer needs PyTorch ({exc})",
                        "pip install 'onnx2ai8x[torch]'", exit_code=EXIT_USAGE) from None
    model = import_project(Path(config_file), Path(checkpoint_file), dev,
                           None if sample is None else Path(sample))
    if output is not None:
        from .fsutil import write_bytes_atomic

        write_bytes_atomic(output, model.SerializeToString())
    return Imported(model=model, output=output)


@dataclass(frozen=True)
class Swept:
    """One candidate of a sweep (`sweep`, `check_many`): what the call returned, or the
    Ai8xError that refused the candidate. A refusal is a value, so one candidate that
    does not fit does not stop the others; any other exception is a fault of the
    converter, not an answer about the candidate, and propagates."""

    index: int  # the candidate's position in the sequence given
    result: object = None  # Checked for check_many; the function's value for sweep
    error: Ai8xError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _swept(function, index: int, candidate, common: dict) -> Swept:
    """One call of a sweep: a refusal becomes the candidate's value."""
    try:
        return Swept(index, function(candidate, **common))
    except Ai8xError as exc:
        return Swept(index, error=exc)


def _swept_chunk(function, first: int, chunk: list, common: dict) -> list[Swept]:
    """A run of consecutive candidates, as a worker process runs it: module level, so an
    executor pickles it by name."""
    return [_swept(function, first + k, c, common) for k, c in enumerate(chunk)]


def sweep(function, candidates, *, executor=None, chunksize: int = 1,
          **common) -> list[Swept]:
    """`function(candidate, **common)` for every candidate, as `Swept` values in the
    order of `candidates` (whatever order the calls finish in).

    `executor`: any `concurrent.futures.Executor` (a `ProcessPoolExecutor`, a Dask
    `distributed.Client.get_executor()`, ...); without one the calls run here, one
    after another. With a process executor `function` must be importable by name (a
    module-level function) and the candidates and results cross process boundaries by
    pickle: models as bytes or `Network` values, results as the frozen values the API
    returns (`Checked` pickles to a few kB). `chunksize`: candidates per task; a
    scheduler with a cost per task (Dask) keeps its workers busier with several."""
    items = list(candidates)
    if chunksize < 1:
        raise Ai8xError("usage.bad-input", "chunksize", f"chunksize is {chunksize}",
                        "give 1 or more candidates per task", exit_code=EXIT_USAGE)
    if executor is None:
        return _swept_chunk(function, 0, items, common)
    futures = [executor.submit(_swept_chunk, function, i, items[i:i + chunksize], common)
               for i in range(0, len(items), chunksize)]
    return [swept for f in futures for swept in f.result()]


def check_many(models, device: str | Device | None = None, *, executor=None,
               chunksize: int = 1, **options) -> list[Swept]:
    """`check` of every model in `models` (paths, ONNX bytes or Networks) for `device`
    with the same `options`, on `executor` (see `sweep`): one `Swept` per model, in
    order, its `result` the `Checked` value or its `error` the refusal."""
    return sweep(check, models, executor=executor, chunksize=chunksize, device=device,
                 **options)


__all__ = ["Ai8xError", "Checked", "Converted", "Imported", "Quantized", "Swept", "check",
           "check_many", "convert", "import_izer", "quantize", "run", "sweep", "verify"]
