"""The convert pipeline: ONNX -> Network -> (legalize) -> Placement -> C project.

Each stage takes the previous stage's value and returns a new one (architecture guide).
This module only sequences the stages and the side files; it must not import torch.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .devices import Device
from .errors import EXIT_USAGE, Ai8xError, Diagnostic
from .frontend import QuantizeRequest, front_end, where_of
from .network import Network, rewire_along
from .options import EmitOptions, HwDecision
from .placement import Placement

if TYPE_CHECKING:
    from .map.lowered import HwNetwork, HwPlacement

STAGES = ("read", "legalize", "map", "reference", "emit")
# Graph names exporters give every model (torch.onnx, older torch, tf2onnx, none)
EXPORTER_GRAPH_NAMES = frozenset({"main_graph", "torch_jit", "torch-jit-export", "graph",
                                  "tf2onnx", ""})


@dataclass(frozen=True)
class ConvertRequest:
    """One conversion as the command line asks for it."""

    model: object  # a path, bytes, a ModelProto or a Network (frontend.front_end)
    device: Device  # resolved where the name was given (cli: devices.get_device)
    output: Path
    sidecar: Path | None = None
    sample_input: Path | None = None
    overwrite: bool = False
    options: dict = field(default_factory=dict)
    progress: bool = False
    report_extra: dict | None = None  # more top-level report.json sections
    quantize: QuantizeRequest | None = None  # `model` is a float model, quantized first


@dataclass(frozen=True, eq=False)
class Plan:
    """Everything decided before files are written."""

    model: object  # onnx2ai8x.onnxpb.ModelProto
    hw: HwNetwork  # the lowered network: placement, hardware choices and view, weights
    cycles: tuple[int, ...]
    report: object
    summary: str
    report_json: str
    sidecar_text: str
    # where a full sidecar contradicts the model (sidecar/agreement.py), rendered
    warnings: tuple[str, ...] = ()
    implied: tuple[str, ...] = ()  # what the hardware choices implied (decide_hardware)
    quant: object | None = None  # quantize.ptq.QuantResult of a float model

    @property
    def network(self) -> Network:
        return self.hw.network

    @property
    def placement(self) -> Placement:
        return self.hw.placement

    @property
    def device(self) -> Device:
        return self.hw.device


Step = Callable[[str], None]


def _no_step(_: str) -> None:
    return None


def _fifo_fed(hw: HwNetwork) -> HwNetwork:
    """`hw`, unless a later layer reads an input that arrives through the FIFOs
    (a streaming first layer reads through them whatever the options: convert)."""
    from .map.memory_check import fifo_input_read_once

    refused = fifo_input_read_once(hw.network, hw.choices.fifo)
    if refused:
        raise Ai8xError.many(refused)
    return hw


Decide = Callable[[tuple[int, ...] | None], HwDecision]  # the hardware choices, by snoop


def _place(network: Network, device: Device, sidecar_path: Path | None, decide: Decide,
           overlap_data: bool = False
           ) -> tuple[HwNetwork, HwDecision, tuple[str, ...], tuple[str, ...] | None]:
    """The mapping, lowered: the sidecar's when it is full, else inferred around its
    pins; the hardware choices it was examined under (`decide`, given the full
    sidecar's `snoop` values) and the full sidecar's contradictions of the model, as
    warnings. A sidecar's placement passes every check automatic mapping passes
    (map/memory_check.check_placement) and, without `overlap_data` (--overlap-data),
    writes no layer over its own input. Last, what of the sidecar was kept: None for all
    of its mapping (a full sidecar, or none given), else a partial one's pins."""
    if sidecar_path is None:
        from .map.auto import auto_map

        decision = decide(None)
        return (_fifo_fed(auto_map(network, device, None, decision=decision)), decision, (),
                None)
    from .sidecar.parse import parse_dict
    from .sidecar.partial import partial_hints, place_partial, read_sidecar_text, restated
    from .sidecar.resolve import resolve_placement

    text = read_sidecar_text(Path(sidecar_path))
    if not text.is_full(len(network.layers)):
        decision = decide(None)
        pins = tuple(f"`{key}` of {name}" for name, keys in
                     partial_hints(text, network).items() for key in keys)
        return (_fifo_fed(place_partial(text, network, device, decision=decision)),
                decision, restated(text, len(network.layers)), pins)
    positions = None
    try:
        sidecar = parse_dict(text.data, str(sidecar_path))
        positions = [lay.yaml_index for lay in sidecar.layers]
        from .sidecar.agreement import geometry_contradictions

        wrong = geometry_contradictions(sidecar, network)
        if wrong:
            raise Ai8xError.many(wrong)
        placement = resolve_placement(sidecar, network, device)
    except Ai8xError as err:  # name the line the user wrote
        named = Ai8xError.many([text.add_line(d, positions) for d in err.diagnostics])
        named.exit_code = err.exit_code
        raise named from None
    from .map.lowered import examine
    from .map.memory_check import checked, fifo_input_read_once, unpermitted_overlaps

    decision = decide(tuple(sidecar.snoop) if sidecar.snoop is not None else None)
    examined = examine(placement, decision)
    hw, problems = checked(examined)
    if not overlap_data:
        problems += unpermitted_overlaps(examined)
    problems += fifo_input_read_once(network, examined.choices.fifo)
    if problems:
        raise Ai8xError.many(_one_per_cause(
            [text.relocate(d, network, positions) for d in problems]))
    from .sidecar.agreement import model_contradictions

    warnings = tuple(
        dataclasses.replace(w, where=text.add_line(Diagnostic(w.code, w.where, ""),
                                                   positions).where).render()
        for w in model_contradictions(sidecar, network))
    assert hw is not None  # no problems: the check allocated the weights
    return hw, decision, warnings, None


_DERIVED = "(not written in this entry: derived)"  # sidecar/partial.SidecarText.relocate


def _one_per_cause(diags: list[Diagnostic]) -> list[Diagnostic]:
    """One diagnosis per cause (issue 35): a key the user did not write takes its value
    from a key written elsewhere (a reader's `in_offset` is its producer's `out_offset`),
    so the same fault found again at the derived key repeats the diagnosis of the
    written one, which names the line to edit; the repetition is dropped."""
    def fault(d: Diagnostic) -> tuple[str, str]:
        return d.code, d.message.replace(f"`{d.key}`", "`*`") if d.key else d.message

    written = {fault(d) for d in diags if _DERIVED not in d.where}
    kept = [d for d in diags if _DERIVED not in d.where or fault(d) not in written]
    return kept or diags


def _overlap_notes(hp: HwPlacement) -> tuple[str, ...]:
    """The automatic mapping writes layers over their own input only where the
    accelerator's order makes it safe (map/overlap.py) and to fit; it says so, and that
    the written sidecar needs --overlap-data."""
    from .map.memory_check import overlapping_layers

    network = hp.network
    over = [network.layers[ll].name for ll in overlapping_layers(hp)
            if not network.layers[ll].buffer_shift]
    if not over:
        return ()
    return (f"to fit, {', '.join(over)} write{'s' if len(over) == 1 else ''} over "
            f"{'its' if len(over) == 1 else 'their'} own input where the accelerator's "
            "order (output pixels row by row) has read it first; the written sidecar "
            "needs --overlap-data when passed back",)


def plan(model, device: Device, sidecar_path: Path | None = None,
         step: Step = _no_step, *, onnx_checker: bool = False, fifo: bool = False,
         quantize: QuantizeRequest | None = None, overlap_data: bool = False,
         options: EmitOptions | None = None) -> Plan:
    """Import (the one front end: read, rewrite, legalize), map, decide the hardware
    choices and lower; no files are written. `model`: a path, the bytes of an ONNX
    file, a ModelProto or a Network (frontend.front_end). (`onnx_checker`: see
    frontend.load_onnx; `quantize`: the model is a float model, quantized first;
    `options`: the converter's options, default the options `fifo` (the user asked for
    FIFO input, so an inferred mapping puts it there) and `overlap_data`
    (--overlap-data, a sidecar may write a layer over its own input) make; with
    --fast-fifo-quad the first layer is fanned out to the four quadrants after the
    mapping)."""
    if not isinstance(device, Device):
        # a caller's mistake, not a user's: the stages read device facts, never names
        raise TypeError(f"plan() takes a Device (onnx2ai8x.devices.get_device(name)), "
                        f"not {device!r}")
    from .map.advice import energy_hints, streaming_bias
    from .map.kernels import check_quad_fan_out, with_quad_fan_out
    from .map.latency import estimate_cycles
    from .map.lowered import lower
    from .map.memory_check import overlapping_layers
    from .options import decide_conversion
    from .report import render_table, summarize, to_json
    from .sidecar.write import implied_flags, write_sidecar

    if options is None:
        options = EmitOptions(fifo=fifo, overlap_data=overlap_data)
    fe = front_end(model, device, quantize=quantize, onnx_checker=onnx_checker,
                   step=step)
    network, notes = fe.network, fe.notes
    if network.name.strip().lower() in EXPORTER_GRAPH_NAMES:
        # an exporter's default graph name says nothing (torch.onnx: `main_graph`): the
        # project, its banner and the sidecar are named after the model file instead
        network = dataclasses.replace(network, name=model_stem(model))
    step("map")

    def decide(snoop: tuple[int, ...] | None) -> HwDecision:
        # the hardware choices: all known before mapping but a full sidecar's snoop values
        return decide_conversion(options, device, data_buffer=network.data_buffer is not None,
                                 pool_rounding=fe.avg_pool_rounding, snoop=snoop,
                                 model=where_of(model))

    # the mapping, lowered: its hardware view derived once (when the mapper examined it)
    # under the conversion's choices, its kernel and bias memory allocated once
    hw, decision, warnings, pins = _place(network, device, sidecar_path, decide,
                                          options.overlap_data)
    stated = hw  # the sidecar states the mapping, without the quad fan-out
    if options.fast_fifo_quad:
        check_quad_fan_out(stated.placement)
        hw = lower(with_quad_fan_out(stated.placement), decision)  # another placement
    placement = hw.placement
    warnings = fe.warnings + warnings + streaming_bias(placement) + _unmade_jumps(hw)
    warnings += energy_hints(placement)
    cycles = tuple(estimate_cycles(hw))
    if sidecar_path is None:
        notes = (*notes, *_overlap_notes(hw))
    report = summarize(hw, list(cycles), notes=notes)
    return Plan(model=fe.model, hw=hw, cycles=cycles, report=report,
                summary=render_table(report), report_json=to_json(report),
                sidecar_text=write_sidecar(
                    stated.placement,
                    flags=implied_flags(stated.placement, fe.avg_pool_rounding,
                                        overlapping_layers(stated)),
                    origin=Path(sidecar_path).name if sidecar_path is not None else None,
                    pins=pins),
                warnings=warnings, implied=decision.notes, quant=fe.quant)


def _unmade_jumps(hw: HwNetwork) -> tuple[str, ...]:
    """A stated `simulated_sequence` that no snoop unit makes (seed 004): the known
    answer assumes the layers it skips do not run, but without `snoop` values the
    sequencer runs them, so the project's check fails on the chip."""
    from .emit.unload import simulated_layers
    from .placement import sequence_walk

    placement = hw.placement
    stated = simulated_layers(placement)
    if hw.choices.snoop is not None or all(pl.simulated_sequence is None
                                           for pl in placement.layers):
        return ()
    run = sequence_walk(placement.layers, placement.first_layer_used, stated=False)
    if run == stated:
        return ()
    names = [placement.network.layers[ll].name for ll in run if ll not in stated]
    return (f"the sidecar's simulated_sequence states the layer order "
            f"{' -> '.join(map(str, stated))}, but it programs no snoop unit (`snoop`), so "
            f"the accelerator runs {' -> '.join(map(str, run))}"
            + (f" ({', '.join(names)} included)" if names else "")
            + ": the known-answer test assumes the stated order and fails on the chip; "
            "add the sidecar's `snoop` values or drop `simulated_sequence`",)


def model_stem(model, network: Network | None = None) -> str:
    """The name a model's files are written under: the file's stem, else (a model in
    memory) its network's name as a file name, else "model"."""
    from .frontend import is_path

    if is_path(model):
        return Path(model).stem
    import re

    name = "" if network is None else network.name.strip()
    if name.lower() in EXPORTER_GRAPH_NAMES:
        return "model"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "model"


def default_sample(network: Network) -> np.ndarray:
    """A deterministic sample for the known-answer test when the user gives none."""
    rng = np.random.default_rng(0x8A1)
    return rng.integers(-128, 128, size=network.input_shape, dtype=np.int64)


def simulated_network(placement: Placement) -> Network:
    """The network along the sidecar's `simulated_sequence` path (seed 004).

    On the MAX78002 the snoop unit may skip layers at run time; a sidecar states the path
    the known answer assumes with `simulated_sequence`, and the vendor computes the known
    answer along it. A layer reached by a jump reads the output of the layer it was
    reached from instead of its predecessor, so the reference is rebuilt that way.
    """
    from .emit.unload import simulated_layers

    if all(pl.simulated_sequence is None for pl in placement.layers):
        return placement.network
    return rewire_along(placement.network, simulated_layers(placement))


def reference_outputs(hw: HwNetwork, sample: np.ndarray) -> list[np.ndarray]:
    """The onnxruntime reference's values of the known-answer layers, in their order.

    The model is rebuilt from the Network the converter maps (one builder, one set of
    kernels, docs/design.md section 1) with the known-answer layers as its outputs, so
    the check values describe exactly the layers the generated C reads back.
    """
    import custom_ops
    from custom_ops.builder import build_proto

    from .emit.unload import known_answer_layers

    wanted = known_answer_layers(hw.placement)
    model = build_proto(simulated_network(hw.placement),
                        avg_pool_rounding=hw.choices.avg_pool_rounding, outputs=wanted)
    # one sample: onnxruntime's pool of intra-op threads would cost more to start (and
    # spin, on a shared machine) than it saves
    session = custom_ops.session(model, threads=1)
    inp = session.get_inputs()[0]
    outputs = session.run(None, {inp.name: sample[np.newaxis].astype(np.int8)})
    # a data buffer's state output follows the layer outputs (docs/design.md section 1);
    # the known answer is one inference from the zeroed buffer, its layers only
    return [np.asarray(o)[0] for o in outputs[:len(wanted)]]


@dataclass(frozen=True)
class ConvertResult:
    """What the command prints after a conversion."""

    summary: str
    report_json: str
    board: str  # the SDK board the project is set up for
    warnings: tuple[str, ...] = ()  # Plan.warnings
    # the hardware layers in the order the known answer assumes, when the project's snoop
    # units choose the order at run time (the sidecar's `simulated_sequence` path)
    layer_order: tuple[int, ...] | None = None
    quant: object | None = None  # quantize.ptq.QuantResult of a float model
    report: object | None = None  # report.Report (the Python API returns it)
    stem: str = "model"  # the project's side files' name: STEM.onnx, STEM.yaml
    phases: object | None = None  # phases.PhaseReport: where the time goes


@contextmanager
def progress_steps(enabled: bool) -> Iterator[Step]:
    """A progress bar over the pipeline stages on stderr (interactive terminals only)."""
    import sys

    if not enabled or not sys.stderr.isatty():
        yield _no_step
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description:<10}"), BarColumn(), TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True)
    with bar:
        task = bar.add_task("start", total=len(STAGES))
        seen: list[str] = []

        def step(name: str) -> None:
            if seen:
                bar.advance(task)
            seen.append(name)
            bar.update(task, description=name)

        yield step
        bar.update(task, completed=len(STAGES))


def _sample_for(request: ConvertRequest, network: Network, quant=None) -> np.ndarray:
    from .runner import check_sample_shape, fit_to_input
    from .samples import load_sample

    if quant is not None:
        # a float source: the sample (else the first calibration sample) is in the
        # source model's own input units and reaches the accelerator through the
        # model's input mapping (the vendor export's x / 128 or -8 integers included)
        source = request.sample_input
        if source is None and request.quantize is not None:
            source = request.quantize.calibration
        if source is not None:
            from .quantize import load_array
            from .quantize.mapping import one_sample

            what = "sample input" if request.sample_input is not None else "calibration data"
            return one_sample(load_array(source, what), quant.mapping,
                              source).astype(np.int64)
    if request.sample_input is None:
        return default_sample(network)
    check_sample_shape(request.sample_input, (1, *network.input_shape), one=True)
    sample = load_sample(request.sample_input)
    rank = len(network.input_shape) + 1
    x = fit_to_input(sample, rank, str(request.sample_input))
    if x.shape[0] != 1:
        raise Ai8xError("usage.bad-input", str(request.sample_input),
                        f"the sample holds a batch of {x.shape[0]}; the known-answer test "
                        "takes one sample", "save a single sample", exit_code=EXIT_USAGE)
    if tuple(x.shape[1:]) != tuple(network.input_shape):
        raise Ai8xError("usage.bad-input", str(request.sample_input),
                        f"the sample has shape {tuple(x.shape[1:])}, the model takes "
                        f"{tuple(network.input_shape)}",
                        "pass a sample of the model's input shape", exit_code=EXIT_USAGE)
    return x[0].astype(np.int64)


def convert(request: ConvertRequest) -> ConvertResult:
    from .emit.annotate import annotate_model
    from .emit.project import write_project
    from .options import option_warnings

    with progress_steps(request.progress) as step:
        options = EmitOptions.from_cli(request.device, **request.options)
        result = plan(request.model, request.device, request.sidecar, step,
                      quantize=request.quantize, options=options)
        result = dataclasses.replace(result, warnings=(
            *result.warnings, *option_warnings(options, request.options), *result.implied))
        sample = _sample_for(request, result.network, result.quant)
        step("reference")
        outputs = reference_outputs(result.hw, sample)
        step("emit")
        source = result.model
        if source is None:  # a Network given in memory: its ai8x-ONNX, built here
            from custom_ops.builder import build_proto

            source = build_proto(result.network,
                                 avg_pool_rounding=result.hw.choices.avg_pool_rounding)
        annotated = annotate_model(source, result.hw, result.cycles, report=result.report)
        stem = model_stem(request.model, result.network)
        extra = dict(request.report_extra or {})
        if result.quant is not None:  # the quantization report, under "quantization"
            import json

            extra["quantization"] = json.loads(result.quant.report_json())
        if extra:
            import json

            data = json.loads(result.report_json)
            data.update(extra)
            result = dataclasses.replace(
                result, report_json=json.dumps(data, indent=2, sort_keys=True) + "\n")
        extra_files = {
            f"{stem}.yaml": result.sidecar_text.encode(),
            f"{stem}.onnx": annotated.SerializeToString(deterministic=True),
        }
        timing = _PhaseTiming(result, options)

        def finish(directory: Path, rendered) -> dict[str, bytes]:
            if not request.options.get("allow_oversize"):
                _check_footprint(rendered.sources(), result.device, request.output)
            return timing.files(rendered.words)

        write_project(result.hw, request.output, options=options,
                      sample=sample, outputs=outputs, overwrite=request.overwrite,
                      extra_files=extra_files, stem=stem, finish=finish,
                      cpu_tail=_tail_left(result.quant, options),
                      source=_source_name(request.model, result.network))
        result = dataclasses.replace(result, report_json=timing.report_json,
                                     summary=result.summary + timing.text)
    from .emit.project import project_board

    return ConvertResult(summary=result.summary, report_json=result.report_json,
                         board=project_board(result.device, options.board),
                         warnings=result.warnings, layer_order=_snoop_order(result.hw),
                         quant=result.quant, report=result.report, stem=stem,
                         phases=timing.phases)


def _tail_left(quant, options: EmitOptions) -> tuple[str, ...]:
    """The model's final operators the application applies (--cpu-tail; the quantizer
    refused them otherwise), but a Softmax that softmax.c computes (--softmax)."""
    tail = tuple(quant.summary.get("cpu_tail", ())) if quant is not None else ()
    return tail[:-1] if options.softmax and tail[-1:] == ("Softmax",) else tail


def _source_name(model, network: Network) -> str:
    """How the project's README names what it was generated from: the model file (not
    the network's class, issue 35), or the network for a model given in memory."""
    if isinstance(model, str | Path):
        return f"`{Path(model).name}`"
    return f"the network `{network.name}` (given in memory)"


def _check_footprint(sources: dict[str, str], device: Device, output: Path) -> None:
    """Before the project is in place: its firmware, estimated from its sources, fits
    the part's flash and SRAM (emit/footprint.py), or the conversion stops (exit 1)."""
    from .emit.footprint import check_fit, estimate

    check_fit(estimate(sources, device), device, str(output))


class _PhaseTiming:
    """Adds where the time goes (onnx2ai8x.phases) to the report, from the words the
    project's phase functions move as rendered (emit/project.PhaseWords):
    `files(words)` is called by write_project's `finish`."""

    def __init__(self, result, options) -> None:
        self.result, self.options = result, options
        self.report_json, self.text = result.report_json, ""
        self.phases = None  # the PhaseReport, once counted

    def files(self, words) -> dict[str, bytes]:
        import json

        from .emit.firmware import options_clock_plan
        from .phases import phase_report, phases_json, render_phases

        hw, options = self.result.hw, self.options
        placement = hw.placement
        clock = options_clock_plan(placement.device, hw.choices.pipeline, options)
        run = clock.run or clock.load
        final = placement.network.layers[placement.final_layer]
        counts = {"weights": words.weights, "bias": words.bias,
                  "configure": words.configure, "input": words.input,
                  "unload": words.unload}
        report = phase_report(counts, fifo=words.fifo, system_mhz=clock.system_mhz,
                              run_mhz=run.base_mhz // run.divider,
                              inference_cycles=self.result.report.total_cycles,
                              fast_fifo=hw.choices.fast_fifo, mlator=words.mlator,
                              softmax=options.softmax, outputs=final.output_channels)
        data = json.loads(self.report_json)
        data["phases"] = phases_json(report)
        self.report_json = json.dumps(data, indent=2, sort_keys=True) + "\n"
        self.text = render_phases(report)
        self.phases = report
        return {"report.json": self.report_json.encode()}


def _snoop_order(hw: HwNetwork) -> tuple[int, ...] | None:
    """With snoop units programmed, the hardware layer order the known answer assumes:
    the units decide the order on the chip, the sidecar states the one it expects."""
    if hw.choices.snoop is None:
        return None
    from .emit.unload import simulated_layers

    return hw.view.hardware_order(simulated_layers(hw.placement))
