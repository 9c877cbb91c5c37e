"""The `ai8x` ONNX op domain and the bit-exact onnxruntime reference.

`session(model)` gives an onnxruntime session that computes exactly the integers the
accelerator writes; `run(model, x)` runs one sample or a batch. See custom_ops/README.md
for the ops and the model's input/output types, and `custom_ops.builder.build_model`
for writing a Network as ai8x-ONNX (docs/design.md section 1).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx

from onnx2ai8x.errors import EXIT_USAGE, Ai8xError

from .fast import optimize
from .ops import DOMAIN, VERSION, functions, register_schemas

# The schemas make `onnx.checker` and shape inference know the ai8x ops by name; the
# functions stored in each model make them runnable without this package.
register_schemas()

# IR version of opset 19; newer onnx helpers write versions onnxruntime may not read yet.
IR_VERSION = 9

__all__ = ["DOMAIN", "VERSION", "add_functions", "functions", "register_schemas", "run",
           "session"]


def add_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with the `ai8x` kernels stored as model-local functions (in place)."""
    have = {(f.domain, f.name) for f in model.functions}
    for func in functions():
        if (func.domain, func.name) not in have:
            model.functions.append(func)
    if not any(o.domain == DOMAIN for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(DOMAIN, VERSION))
    return model


def _load(path_or_model: str | os.PathLike | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(path_or_model, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(path_or_model)
        return model
    path = Path(path_or_model)
    if not path.is_file():
        raise Ai8xError("usage.missing-file", str(path), "the model file does not exist",
                        "pass the path of an .onnx file", exit_code=EXIT_USAGE)
    return onnx.load(str(path))


def session(path_or_model: str | os.PathLike | onnx.ModelProto, *, threads: int = 0):
    """An onnxruntime InferenceSession running the model with the `ai8x` kernels.

    Function definitions are added when the model lacks them. `threads` is the intra-op
    thread count (0: onnxruntime's default).
    """
    import onnxruntime as ort

    model = optimize(add_functions(_load(path_or_model)))
    # onnx's helpers stamp their newest IR version; the ops used need only IR 9 (opset 19).
    model.ir_version = min(model.ir_version, IR_VERSION)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def run(path_or_model, x: np.ndarray) -> list[np.ndarray]:
    """Run one sample (C, H, W) / (C, L) or a batch (N, ...) through the model.

    Values must be integers in [-128, 127]; they are passed to the model as int8.
    """
    sess = path_or_model if hasattr(path_or_model, "get_inputs") else session(path_or_model)
    inp = sess.get_inputs()[0]
    rank = len(inp.shape)
    arr = np.asarray(x)
    if arr.ndim == rank - 1:
        arr = arr[np.newaxis]
    if arr.ndim != rank:
        raise Ai8xError("usage.bad-input", "input",
                        f"the input has shape {tuple(np.shape(x))}, the model takes "
                        f"{rank - 1}-D samples {tuple(inp.shape[1:])} (plus a batch dimension)",
                        "pass (C, H, W) / (C, L) or a batch of them", exit_code=EXIT_USAGE)
    want = tuple(inp.shape[1:])
    if all(isinstance(d, int) for d in want) and tuple(arr.shape[1:]) != want:
        raise Ai8xError("usage.bad-input", "input",
                        f"the input has sample shape {tuple(arr.shape[1:])}, the model takes "
                        f"{want}", "pass a sample of the model's input shape",
                        exit_code=EXIT_USAGE)
    if arr.size and (not np.issubdtype(arr.dtype, np.integer)
                     and not np.array_equal(arr, np.round(arr))):
        raise Ai8xError("usage.bad-input", "input", "the input holds non-integer values",
                        "quantize the sample to integers in [-128, 127]", exit_code=EXIT_USAGE)
    if arr.size and (arr.min() < -128 or arr.max() > 127):
        raise Ai8xError("usage.bad-input", "input",
                        f"values range over [{arr.min()}, {arr.max()}], outside [-128, 127]",
                        "clip or rescale the sample to [-128, 127]", exit_code=EXIT_USAGE)
    return list(sess.run(None, {inp.name: np.ascontiguousarray(arr.astype(np.int8))}))
