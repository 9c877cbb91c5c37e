"""Helpers of the quantized-source tests: the held-out digits, the source model on
onnxruntime (as written, and with its quantizers rounding half up as the accelerator
does), and the converted model on the bit-exact reference."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import custom_ops

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SPLIT = json.loads((ROOT / "examples" / "digits_float" / "metrics.json").read_text())


def held_out() -> tuple[np.ndarray, np.ndarray]:
    """The held-out digits of examples/digits_float (the split recomputed here)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    _, x_test, _, y_test = train_test_split(
        x, digits.target, test_size=SPLIT["held_out_samples"], random_state=SPLIT["seed"],
        stratify=digits.target)
    return x_test, y_test


def run_source(model: onnx.ModelProto | Path, x: np.ndarray) -> np.ndarray:
    """The quantized source model's first output on onnxruntime."""
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    if inp.shape[0] == 1:  # exported with a batch of one (torch's dynamo exporter)
        return np.concatenate([sess.run(None, {inp.name: x[k:k + 1]})[0]
                               for k in range(x.shape[0])])
    return np.asarray(sess.run(None, {inp.name: x})[0])


def half_up(model: onnx.ModelProto) -> onnx.ModelProto:
    """The QDQ model with every activation quantizer rounding half up, the
    accelerator's rule (seed 000, "Output Shift": floor(0.5 + x)): x is first moved
    to the grid, floor(x / s + 0.5) * s, so QuantizeLinear's own rounding (half to
    even, ONNX) has nothing left to round. Exact for power-of-two scales."""
    from onnx import helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {i.name for i in out.graph.initializer}
    half = helper.make_tensor("__half", onnx.TensorProto.FLOAT, [], [0.5])
    out.graph.initializer.append(half)
    nodes = []
    for k, node in enumerate(out.graph.node):
        if node.op_type == "QuantizeLinear" and node.input[0] not in inits:
            x, s = node.input[0], node.input[1]
            t = [f"__hu{k}_{j}" for j in range(4)]
            nodes += [helper.make_node("Div", [x, s], [t[0]]),
                      helper.make_node("Add", [t[0], "__half"], [t[1]]),
                      helper.make_node("Floor", [t[1]], [t[2]]),
                      helper.make_node("Mul", [t[2], s], [t[3]])]
            node.input[0] = t[3]
        nodes.append(node)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def run_converted(result, x: np.ndarray) -> np.ndarray:
    """A QuantResult's first output on the bit-exact reference, in float units."""
    q = result.mapping.quantize(x)
    out = custom_ops.run(custom_ops.session(result.model), q)[0]
    return np.asarray(out, np.float64).reshape(x.shape[0], -1) * result.output_scales[0]
