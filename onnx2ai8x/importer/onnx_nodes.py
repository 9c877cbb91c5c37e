"""Node attributes, the data input and the constant folding that both the float walker
(`float_onnx`) and the exporter dialects (`dialects/`) use: the dialects run before the
walker and must not import it (issue 27, no import cycles).
"""
from __future__ import annotations

import numpy as np

from .. import onnxpb


def _reduce(fn):
    def run(node, x, axes=None):
        ax = node_attr(node, "axes")
        ax = tuple(int(a) for a in (ax if ax is not None else
                                    (axes if axes is not None else range(x.ndim))))
        return fn(x, axis=ax, keepdims=bool(node_attr(node, "keepdims", 1)))
    return run


def _clip(node, x, lo=None, hi=None):
    lo = node_attr(node, "min") if lo is None else lo
    hi = node_attr(node, "max") if hi is None else hi
    return np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi)


def _cast(node, x):
    return x.astype(onnxpb.tensor_dtype_to_np_dtype(node_attr(node, "to")))


# Constant-only nodes the walk evaluates itself (numpy keeps the inputs' float32 where
# ONNX does, so a folded weight equals what onnxruntime computes).
CONST_OPS = {
    "Add": lambda n, a, b: a + b, "Sub": lambda n, a, b: a - b,
    "Mul": lambda n, a, b: a * b, "Div": lambda n, a, b: a / b,
    "Pow": lambda n, a, b: np.power(a, b).astype(a.dtype),
    "Neg": lambda n, a: -a, "Abs": lambda n, a: np.abs(a),
    "Reciprocal": lambda n, a: (1 / a).astype(a.dtype),
    "Floor": lambda n, a: np.floor(a), "Ceil": lambda n, a: np.ceil(a),
    "Round": lambda n, a: np.round(a), "Log": lambda n, a: np.log(a),
    "Exp": lambda n, a: np.exp(a), "Sqrt": lambda n, a: np.sqrt(a),
    "Clip": _clip, "Cast": _cast,
    "Max": lambda n, *a: np.maximum.reduce(a), "Min": lambda n, *a: np.minimum.reduce(a),
    "ReduceMax": _reduce(np.max), "ReduceMin": _reduce(np.min),
    "Reshape": lambda n, a, s: a.reshape([d if d else a.shape[k] for k, d in enumerate(s)]),
    "Squeeze": lambda n, a, *ax: np.squeeze(a), "Unsqueeze": lambda n, a, ax=None:
        np.expand_dims(a, tuple(int(v) for v in (ax if ax is not None else
                                                 node_attr(n, "axes")))),
    "Concat": lambda n, *a: np.concatenate(a, axis=int(node_attr(n, "axis", 0))),
}


def node_attr(node, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnxpb.get_attribute_value(a)
    return default


def data_input(model):
    """The data input (old exporters also list initializers as inputs)."""
    inits = {i.name for i in model.graph.initializer}
    return next(i for i in model.graph.input if i.name not in inits)
