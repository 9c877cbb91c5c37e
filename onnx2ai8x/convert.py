"""The convert pipeline: ONNX -> Network -> (legalize) -> Placement -> C project.

Each stage takes the previous stage's value and returns a new one (architecture guide).
This module only sequences the stages and the side files; it must not import torch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import EXIT_USAGE, Ai8xError
from .network import Network
from .placement import Placement


@dataclass(frozen=True)
class ConvertRequest:
    model: Path
    device: str
    output: Path
    sidecar: Path | None = None
    sample_input: Path | None = None
    overwrite: bool = False
    options: dict = field(default_factory=dict)
    progress: bool = False


@dataclass(frozen=True, eq=False)
class Plan:
    """Everything decided before files are written."""

    model: object  # onnx.ModelProto
    network: Network
    device: object  # onnx2ai8x.devices.Device
    placement: Placement
    cycles: tuple[int, ...]
    report: object
    summary: str
    report_json: str
    sidecar_text: str


def load_onnx(path: Path):
    import onnx

    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - any decode failure is a bad model file
        raise Ai8xError("model.unreadable", str(path),
                        f"not a readable ONNX file ({str(exc).splitlines()[0][:200]})",
                        "export the model with ai8x_torch.export_onnx or onnx2ai8x "
                        "import-izer") from None
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001
        raise Ai8xError("model.invalid", str(path),
                        f"the ONNX checker rejects the model: "
                        f"{str(exc).splitlines()[0][:300]}",
                        "re-export the model; hand-edited files must stay valid ONNX"
                        ) from None
    return model


def plan(model_path: Path, device_name: str, sidecar_path: Path | None) -> Plan:
    """Import, legalize and map; no files are written."""
    from .devices import get_device
    from .emit.sidecar_writer import write_sidecar
    from .importer.onnx_reader import read_model
    from .legalize import legalize
    from .map.auto import auto_place
    from .map.latency import estimate_cycles
    from .report import render_table, summarize, to_json

    device = get_device(device_name)
    model = load_onnx(Path(model_path))
    network = read_model(model)
    network = legalize(network, device)
    if sidecar_path is not None:
        from .sidecar import load_sidecar, resolve_placement

        sidecar = load_sidecar(Path(sidecar_path))
        placement = resolve_placement(sidecar, network, device)
    else:
        placement = auto_place(network, device, None)
    cycles = tuple(estimate_cycles(network, placement, device))
    report = summarize(network, placement, device, cycles)
    return Plan(model=model, network=network, device=device, placement=placement,
                cycles=cycles, report=report, summary=render_table(report),
                report_json=to_json(report),
                sidecar_text=write_sidecar(network, placement, device, None))


def default_sample(network: Network) -> np.ndarray:
    """A deterministic sample for the known-answer test when the user gives none."""
    rng = np.random.default_rng(0x8A1)
    return rng.integers(-128, 128, size=network.input_shape, dtype=np.int64)


@dataclass(frozen=True)
class ConvertResult:
    summary: str
    report_json: str


def convert(request: ConvertRequest) -> ConvertResult:
    import custom_ops

    from .emit.annotate import annotate_model
    from .emit.options import EmitOptions
    from .emit.project import write_project
    from .runner import fit_to_input, load_sample

    result = plan(request.model, request.device, request.sidecar)
    if request.sample_input is not None:
        sample = load_sample(request.sample_input)
    else:
        sample = default_sample(result.network)
    session = custom_ops.session(result.model)
    inp = session.get_inputs()[0]
    x = fit_to_input(sample, len(inp.shape), str(request.sample_input or "sample"))
    if tuple(x.shape[1:]) != tuple(result.network.input_shape):
        raise Ai8xError("usage.bad-input", str(request.sample_input),
                        f"the sample has shape {tuple(x.shape[1:])}, the model takes "
                        f"{tuple(result.network.input_shape)}",
                        "pass a sample of the model's input shape", exit_code=EXIT_USAGE)
    outputs = [np.asarray(o) for o in session.run(None, {inp.name: x})]
    options = EmitOptions.from_cli(**request.options)
    annotated = annotate_model(result.model, result.network, result.placement,
                               result.cycles, result.device)
    stem = Path(request.model).stem
    extra_files = {
        f"{stem}.yaml": result.sidecar_text.encode(),
        f"{stem}.onnx": annotated.SerializeToString(deterministic=True),
        "report.json": result.report_json.encode(),
    }
    write_project(result.network, result.placement, request.output, options=options,
                  sample=x[0].astype(np.int64), outputs=[o[0] for o in outputs],
                  overwrite=request.overwrite, extra_files=extra_files)
    return ConvertResult(summary=result.summary, report_json=result.report_json)
