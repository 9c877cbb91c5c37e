"""The `ai8x` ONNX op domain and the bit-exact onnxruntime reference.

`session(model)` gives an onnxruntime session that computes exactly the integers the
accelerator writes; `run(model, x)` runs one sample or a batch. See custom_ops/README.md
for the ops and the model's input/output types, and `custom_ops.builder.build_model`
for writing a Network as ai8x-ONNX (docs/design.md section 1).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from onnx2ai8x import onnxpb
from onnx2ai8x.errors import EXIT_USAGE, Ai8xError

from .fast import optimize
from .ops import DOMAIN, VERSION, functions, register_schemas

# IR version of opset 19; newer onnx helpers write versions onnxruntime may not read yet.
IR_VERSION = 9

__all__ = ["DOMAIN", "VERSION", "add_functions", "functions", "onnx_support",
           "register_schemas", "run", "session"]


def onnx_support() -> None:
    """Make the onnx package know the `ai8x` ops (its checker and shape inference).

    Nothing here imports onnx at module level: the convert path works on
    onnx2ai8x.onnxpb messages and never pays for the import. Code that hands ai8x
    models to onnx calls this first (idempotent).
    """
    register_schemas()


if "onnx" in sys.modules:
    # onnx is already loaded (a test, a notebook): register now, as before, so
    # `onnx.checker.check_model` works on ai8x models without a further call.
    onnx_support()


def add_functions(model):
    """`model` with the `ai8x` kernels stored as model-local functions (in place).

    Works on onnx.ModelProto and onnx2ai8x.onnxpb.ModelProto alike.
    """
    have = {(f.domain, f.name) for f in model.functions}
    for func in functions():
        if (func.domain, func.name) not in have:
            model.functions.append(func)
    if not any(o.domain == DOMAIN for o in model.opset_import):
        model.opset_import.add(domain=DOMAIN, version=VERSION)
    return model


def _load(path_or_model) -> onnxpb.ModelProto:
    """The model as an onnxpb message (a path, bytes, an onnx or onnxpb message; an
    onnxpb message is returned as it is, so callers must not modify the result)."""
    if isinstance(path_or_model, onnxpb.ModelProto):
        return path_or_model
    if isinstance(path_or_model, bytes):
        return onnxpb.ModelProto.FromString(path_or_model)
    if hasattr(path_or_model, "SerializeToString"):
        return onnxpb.ModelProto.FromString(path_or_model.SerializeToString())
    path = Path(path_or_model)
    if not path.is_file():
        raise Ai8xError("usage.missing-file", str(path), "the model file does not exist",
                        "pass the path of an .onnx file", exit_code=EXIT_USAGE)
    try:
        return onnxpb.load(path)
    except onnxpb.DecodeError as exc:
        raise Ai8xError("model.unreadable", str(path), f"not a readable ONNX file ({exc})",
                        "export the model with ai8x_torch.export_onnx or onnx2ai8x "
                        "import-izer") from None


def session(path_or_model, *, threads: int = 0):
    """An onnxruntime InferenceSession running the model with the `ai8x` kernels.

    `path_or_model`: a path, serialized bytes, an onnx.ModelProto or an
    onnx2ai8x.onnxpb.ModelProto (never modified). Function definitions are added when
    the model lacks them. `threads` is the intra-op thread count (0: onnxruntime's
    default).
    """
    import onnxruntime as ort

    model = add_functions(optimize(_load(path_or_model)))  # optimize copies
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
