"""`convert --cpu-fallback`: the float model split where the accelerator refuses its
layers, the accelerator's part converted as any ai8x-ONNX model is, and the CPU segments
added to the same project (issue 28, items 1, 3 and 5).

A model the accelerator runs whole converts exactly as without the flag (the split is
then trivial and the ordinary conversion runs on the original file).
"""
from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import EXIT_USAGE, Ai8xError
from .build import Partitioned, partition


@dataclass(frozen=True, eq=False)
class Joined:
    """What the project's CPU files are made from."""

    part: Partitioned
    sample: np.ndarray  # the first segment's int8 input (the stem's, else the acc's)
    acc_input: np.ndarray  # the accelerator's int8 input
    acc_output: np.ndarray  # its output (the known-answer layer's values)
    final: np.ndarray  # the model's output (the head's, else acc_output)
    # per CPU segment between accelerator parts: the accelerator's values it reads
    between_inputs: tuple = ()


def float_sample(request) -> np.ndarray:
    """The known-answer sample in the float model's units: --sample-input, else the
    first calibration sample (as the ordinary float conversion takes it)."""
    from ..quantize import load_array

    source = request.sample_input or request.quantize.calibration
    what = "sample input" if request.sample_input is not None else "calibration data"
    x = load_array(source, what).astype(np.float32)
    return x[:1] if x.ndim and x.shape[0] >= 1 else x[np.newaxis]


def run_joined(part: Partitioned, x: np.ndarray) -> Joined:
    """The whole integer pipeline on one float sample: stem (reference), accelerator
    parts (their ai8x-ONNX through onnxruntime) with the CPU segments between them,
    head."""
    q = part.quantize_input(x)[0]
    acc_in = part.run_stem(q)
    acc_out, seen = part.run_accelerator(acc_in)
    return Joined(part=part, sample=q, acc_input=acc_in, acc_output=acc_out,
                  final=part.run_head(acc_out), between_inputs=tuple(seen))


def convert_cpu_fallback(request):
    """convert.convert (a ConvertRequest) with the layers the accelerator refuses run on
    the Arm core: the float model file `request.model`, quantized from
    `request.quantize.calibration`, split where needed (`--cpu-fallback`,
    `onnx2ai8x.api.convert(..., cpu_fallback=True)`)."""
    from ..convert import convert
    from ..frontend import is_path

    if request.quantize is None or request.quantize.calibration is None:
        raise Ai8xError("usage.cpu-fallback", str(request.model),
                        "--cpu-fallback splits a float model, quantized with calibration "
                        "data", "pass --calibration X.npy", exit_code=EXIT_USAGE)
    if request.options.get("riscv"):
        raise Ai8xError("usage.cpu-fallback", str(request.model),
                        "--cpu-fallback runs the CPU layers on the Arm core; --riscv moves "
                        "the network to the RISC-V core", "drop --riscv",
                        exit_code=EXIT_USAGE)
    if not is_path(request.model):
        # the split cuts the model file into parts and names the user's file in its
        # messages; the project's CPU files are named after it
        raise Ai8xError("usage.cpu-fallback", "model",
                        "the CPU fallback splits a float model given as a file",
                        "save the model (onnx.save) and pass its path",
                        exit_code=EXIT_USAGE)
    part = partition(Path(request.model), request.device, request.quantize)
    if part.split.trivial:
        return convert(request)
    joined = run_joined(part, float_sample(request))
    done: list = []

    def fill(directory: Path) -> None:
        """The accelerator's project, then the CPU files, in the directory that becomes
        the output only when all of it is written (fsutil.write_dir_atomic)."""
        import shutil

        from .emit import add_cpu_files

        with tempfile.TemporaryDirectory(prefix="onnx2ai8x-cpu-") as tmp:
            middle = Path(tmp) / f"{Path(request.model).stem}.onnx"
            middle.write_bytes(part.quant.model.SerializeToString())
            sample = Path(tmp) / "accelerator_input.npy"
            np.save(sample, joined.acc_input[np.newaxis].astype(np.int64))
            extra = dict(request.report_extra or {})
            extra["quantization"] = json.loads(part.quant.report_json())
            inner = dataclasses.replace(request, model=middle, sample_input=sample,
                                        quantize=None, report_extra=extra,
                                        output=Path(tmp) / "project", overwrite=False)
            result = convert(inner)
            summary, report_json = add_cpu_files(inner, joined, result)
            for entry in sorted((Path(tmp) / "project").iterdir()):
                shutil.move(str(entry), str(directory / entry.name))
        done.append(dataclasses.replace(result, summary=summary, report_json=report_json,
                                        quant=part.quant))

    from ..fsutil import write_dir_atomic

    write_dir_atomic(Path(request.output), fill, overwrite=request.overwrite)
    return done[0]


__all__ = ["Joined", "convert_cpu_fallback", "float_sample", "run_joined"]
