"""`onnx2ai8x verify`: run a generated C project on the functional accelerator model.

The model (`ai8xsim`, its own package) reads only the C project. This module adds what
the converter knows: with `--model`, the reference runs the ONNX model layer by layer on
the project's own sample input, and the first layer whose output in memory differs is
named. `--stop-after N` writes layer N's output words and tensor for debugging.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .errors import EXIT_NOT_MODELLED, EXIT_USAGE, Ai8xError
from .fsutil import write_dir_atomic
from .verdict import VerifyResult


def _references(model: Path, outcome, failed: bool) -> list[np.ndarray] | tuple[int, ...]:
    """Every layer's reference output on the project's sample (`outcome`: the project
    run by ai8xsim; along its assumed layer order, when it has one). The sample is taken
    as layer 0 read it; when layer 0 reads fewer rows (or columns) than the model's
    input, from the data memory that holds it, over the model's frame. When neither fits
    the model's input: the model's input shape if the project failed (its layer 0 is
    then the first wrong layer), else an error."""
    from ai8xsim.verify import held_input, input_tensor
    from custom_ops.numpy_ref import run_network

    from .devices import get_device
    from .frontend import front_end
    from .network import rewire_along

    # the layers the project runs: the conversion's front end, rewrites included
    # (pass-through element-wise layers and copies), so layer k of the reference is
    # layer k there
    dev = get_device(outcome.device)
    try:
        network = front_end(model, dev).network
    except Ai8xError as exc:
        if exc.code != "usage.calibration":
            raise
        # a float model that needs calibration: the reference is the quantized model the
        # conversion wrote into the project (its annotated copy), not a new quantization
        raise Ai8xError("usage.calibration", str(model),
                        "a float model is quantized with calibration data; verify does "
                        "not quantize", f"pass the quantized model the conversion wrote: "
                        f"--model PROJECT/{Path(model).stem}.onnx",
                        exit_code=EXIT_USAGE) from None
    if outcome.assumed_order is not None:
        network = rewire_along(network, list(outcome.assumed_order))
    shape = tuple(network.input_shape)
    frame = (shape[1], shape[2] if len(shape) > 2 else 1)
    read = input_tensor(outcome)
    x = None
    for sample in (read, held_input(outcome, *frame)):
        x = _as_model_input(sample, shape)
        if x is not None:
            break
    if x is None:
        if failed:
            return shape
        size = 0 if read is None else read.size
        raise Ai8xError("verify.sample", str(model),
                        f"the project's input has {size} values, the model's input "
                        f"is {shape}",
                        "pass the model the project was generated from")
    return run_network(network, x, outputs=list(range(len(network.layers))))


def _as_model_input(sample: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """`sample` ((C, H, W) in the hardware's channel order) as the model's input, or
    None when its values do not fit that shape."""
    if sample is None:
        return None
    channels = shape[0]
    if sample.ndim == 3 and channels < sample.shape[0] \
            and sample.size // sample.shape[0] * channels == int(np.prod(shape)):
        # The last input pass may leave processors without a channel: layer 0 reads
        # them all, the model has only the leading channels.
        sample = sample[:channels]
    if sample.size != int(np.prod(shape)):
        return None
    return sample.reshape(shape)


def verify(project: Path, *, model: Path | None = None, stop_after: int | None = None,
           dump: Path | None = None,
           layer_order: tuple[int, ...] | None = None) -> VerifyResult:
    """Verify `project`; raise Ai8xError for unusable input (no project, bad model, a
    layer order the project's registers cannot give)."""
    from ai8xsim.engine import LayerOrderError
    from ai8xsim.verify import (
        execute,
        first_bad_layer,
        input_tensor,
        layer_tensor,
        memory_dump,
        render,
    )

    if not (project / "cnn.c").is_file() or not (project / "main.c").is_file():
        raise Ai8xError("usage.not-a-project", str(project),
                        "not a generated C project (no cnn.c and main.c)",
                        "pass the directory onnx2ai8x (or the vendor tool) wrote",
                        exit_code=EXIT_USAGE)
    from .verify_split import is_split, verify_split

    if is_split(project) and stop_after is None:
        # CPU segments around the accelerator (issue 28): the whole project in order
        # against its known answer (the layer-by-layer --model reference is the
        # accelerator's alone and is not run)
        return verify_split(project)
    try:
        outcome = execute(project, stop_after=stop_after, layer_order=layer_order)
    except LayerOrderError as exc:
        raise Ai8xError("usage.layer-order", str(project), f"--layer-order: {exc}",
                        "state the hardware layers in the order the known answer "
                        "assumes, e.g. --layer-order 0,3,4", exit_code=EXIT_USAGE) from exc
    data: dict = {"project": str(project), "device": outcome.device,
                  "layers": len(outcome.layers)}
    if outcome.assumed_order is not None:
        data["assumed_layer_order"] = list(outcome.assumed_order)
    if stop_after is not None:
        if outcome.unmodelled is not None:
            raise Ai8xError("verify.not-modelled", str(project),
                            f"not modelled: {outcome.unmodelled}",
                            "see `onnx2ai8x verify --help` for what the model covers",
                            exit_code=EXIT_NOT_MODELLED)
        if outcome.error:
            raise Ai8xError("verify.unsupported", str(project), outcome.error,
                            "see `onnx2ai8x verify --help` for what the model covers")
        res = next((r for r in outcome.layers if r.regs.index == stop_after), None)
        if res is None:
            raise Ai8xError("usage.stop-after", str(project),
                            f"the project runs {len(outcome.layers)} layers; there is no "
                            f"layer {stop_after}", "pick a layer the project runs",
                            exit_code=EXIT_USAGE)
        target = dump if dump is not None else project / f"verify-layer{stop_after}"
        words = memory_dump(outcome, stop_after)
        tensor = layer_tensor(res)

        def fill(tmp: Path) -> None:
            (tmp / f"layer{stop_after}.memory.txt").write_text(words)
            np.save(tmp / f"layer{stop_after}.npy", tensor)

        write_dir_atomic(target, fill, overwrite=True)
        text = (f"stopped after layer {stop_after}: {len(words.splitlines())} words "
                f"written to {target}/layer{stop_after}.memory.txt, tensor "
                f"{tuple(tensor.shape)} to {target}/layer{stop_after}.npy")
        data.update(stopped_after=stop_after, dump=str(target))
        return VerifyResult(True, text, data)
    bad = None
    misread = None  # (values layer 0 read, the model's input shape)
    if model is not None and not outcome.error and outcome.layers:
        sample = input_tensor(outcome)
        if sample is not None:
            refs = _references(model, outcome, bool(outcome.mismatches))
            if isinstance(refs, tuple):
                misread = (sample.shape, refs)
            else:
                bad = first_bad_layer(outcome, refs)
    text = render(outcome, bad)
    if misread is not None:
        # A changed row or column count of layer 0 reads another input than the model's:
        # no reference can run on it, and layer 0 is where the project went wrong.
        text += (f"\n  first bad layer: 0 (it reads its input as {misread[0]}, the model's "
                 f"input is {misread[1]}: check layer 0's row and column counts)")
        data["first_bad_layer"] = {"layer": 0, "address": None, "expected": None,
                                   "actual": None}
    if model is not None and outcome.mismatches and bad is None and misread is None:
        text += ("\n  every layer equals the reference run on the input as the accelerator "
                 "read it: the input loading (or the known answer itself) differs")
    data.update(passed=outcome.passed, error=outcome.error, verdict=outcome.verdict,
                not_modelled=outcome.unmodelled, checked_words=outcome.checked_words,
                mismatches=len(outcome.mismatches))
    if outcome.note:
        data["note"] = outcome.note
    if outcome.clobber is not None:
        data["clobber"] = outcome.clobber
    if outcome.mismatches:
        mm = outcome.mismatches[0]
        data["first_mismatch"] = {"address": mm.address, "expected": mm.expected,
                                  "actual": mm.actual, "layer": mm.layer}
    if bad is not None:
        data["first_bad_layer"] = {"layer": bad.layer, "address": bad.address,
                                   "expected": bad.expected, "actual": bad.actual}
    return VerifyResult(outcome.passed, text, data, outcome.verdict)


def to_json(result: VerifyResult) -> str:
    return json.dumps(result.data, indent=2, sort_keys=True)
