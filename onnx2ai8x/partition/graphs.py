"""Graph helpers the split and the CPU layers' quantizer share: cutting a part out of a
float model, running it on the calibration data, a tensor's shape."""
from __future__ import annotations

import numpy as np

from ..errors import Ai8xError


def submodel(model, inputs: list[str], outputs: list[str]):
    """The part of `model` from tensors `inputs` to `outputs` (onnx's extractor)."""
    import onnx.utils

    try:
        return onnx.utils.Extractor(model).extract_model(inputs, outputs)
    except Exception as exc:  # noqa: BLE001 - a tensor without an inferred shape
        raise Ai8xError("partition.shapes", f"tensors {', '.join([*inputs, *outputs])[:200]}",
                        f"the part between these tensors cannot be cut out of the model "
                        f"({(str(exc).splitlines() or [''])[0][:200]})",
                        "export the model with fixed shapes (onnx shape inference must "
                        "know every tensor's shape)") from None


def graph_input(model) -> str:
    inits = {i.name for i in model.graph.initializer}
    return next(i.name for i in model.graph.input if i.name not in inits)


def run_float(model, x: np.ndarray, output: str) -> np.ndarray:
    """`model`'s tensor `output` on samples `x` (onnxruntime, one sample at a time so
    the batch-1 model takes them)."""
    return run_floats(model, x, [output])[output]


def run_floats(model, x: np.ndarray, outputs: list[str]) -> dict[str, np.ndarray]:
    """Several tensors of `model` on samples `x` (see run_float)."""
    import onnxruntime as ort

    sub = submodel(model, [graph_input(model)], outputs)
    try:
        sess = ort.InferenceSession(sub.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        runs = [sess.run(outputs, {name: x[i:i + 1].astype(np.float32)})
                for i in range(x.shape[0])]
    except Exception as exc:  # noqa: BLE001 - onnxruntime's own errors
        raise Ai8xError("partition.float-run", "model",
                        f"onnxruntime cannot run the float model on the calibration data "
                        f"({(str(exc).splitlines() or [''])[0][:200]})",
                        "check the model and the calibration data with onnxruntime"
                        ) from None
    return {o: np.concatenate([r[k] for r in runs]) for k, o in enumerate(outputs)}


def shape_of(model, name: str) -> tuple[int, ...]:
    for vi in [*model.graph.value_info, *model.graph.input, *model.graph.output]:
        if vi.name == name:
            dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            if dims and all(d > 0 for d in dims):
                return tuple(dims[1:]) if len(dims) > 1 else tuple(dims)
    raise Ai8xError("partition.cpu-op", name, "the CPU cannot run this layer: its shape is "
                     "unknown", "export the model with fixed shapes")
