"""onnxruntime's QOperator format written as QDQ: each quantized operator becomes
`DequantizeLinear` of its integer inputs -> the float operator -> `QuantizeLinear` of its
output with the operator's output scale (part of the `qdq` dialect).

The operators' integer semantics (onnxruntime's operator documentation): a QLinear op
computes the float op on the dequantized inputs and quantizes the result with its output
scale and zero point; a quantized bias (int32) has zero point 0 and the scale
input scale x weight scale (QGemm: alpha x a_scale x b_scale / beta).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class _Spec:
    """Where a QOperator node keeps its (integer, scale, zero point) inputs."""

    float_op: str
    data: tuple[tuple[int, int, int], ...]  # the triples read as float inputs, in order
    out: tuple[int, int] | None  # output (scale, zero point) inputs; None: float output
    bias: int | None = None  # the int32 bias input
    drop: tuple[str, ...] = ()  # attributes the float op does not take


QOPS: dict[str, _Spec] = {
    "QLinearConv": _Spec("Conv", ((0, 1, 2), (3, 4, 5)), (6, 7), bias=8),
    "QLinearMatMul": _Spec("MatMul", ((0, 1, 2), (3, 4, 5)), (6, 7)),
    "QGemm": _Spec("Gemm", ((0, 1, 2), (3, 4, 5)), (7, 8), bias=6),
    "QLinearAdd": _Spec("Add", ((0, 1, 2), (3, 4, 5)), (6, 7)),
    "QLinearMul": _Spec("Mul", ((0, 1, 2), (3, 4, 5)), (6, 7)),
    "QLinearGlobalAveragePool": _Spec("GlobalAveragePool", ((0, 1, 2),), (3, 4),
                                      drop=("channels_last",)),
    "QLinearAveragePool": _Spec("AveragePool", ((0, 1, 2),), (3, 4),
                                drop=("channels_last",)),
    "QLinearSigmoid": _Spec("Sigmoid", ((0, 1, 2),), (3, 4)),
    "QLinearLeakyRelu": _Spec("LeakyRelu", ((0, 1, 2),), (3, 4)),
    "QLinearSoftmax": _Spec("Softmax", ((0, 1, 2),), (3, 4), drop=("opset",)),
}


def _concat_spec(node) -> _Spec:
    """QLinearConcat: (Y_scale, Y_zero_point, then X, X_scale, X_zero_point per part)."""
    parts = (len(node.input) - 2) // 3
    return _Spec("Concat", tuple((2 + 3 * k, 3 + 3 * k, 4 + 3 * k) for k in range(parts)),
                 (0, 1))


QOPS["QLinearConcat"] = _Spec("Concat", (), (0, 1))


def _get(node, k: int) -> str:
    return node.input[k] if len(node.input) > k else ""


def _const(model, name: str) -> np.ndarray | None:
    from onnx import numpy_helper

    for init in model.graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    return None


def _weight_axis(spec: _Spec, node, k: int) -> int:
    """The axis a per-channel weight scale runs along."""
    import onnx

    if spec.float_op == "Conv":
        return 0
    if spec.float_op == "Gemm" and k == 1:
        trans = next((onnx.helper.get_attribute_value(a) for a in node.attribute
                      if a.name == "transB"), 0)
        return 0 if trans else 1
    return 1


def _expand(model, node, spec: _Spec, tag: str) -> list:
    """The DQ -> op -> Q nodes for one QOperator node."""
    import onnx
    from onnx import helper, numpy_helper

    if node.op_type == "QLinearConcat":
        spec = _concat_spec(node)
    need = max([k for t in spec.data for k in t] + list(spec.out or ()) + [0]) + 1
    if len(node.input) < need or not spec.data:
        from ...errors import Ai8xError

        raise Ai8xError("float.qdq-params", f"node {node.name or node.output[0]} "
                        f"({node.op_type})", f"{node.op_type} with {len(node.input)} "
                        f"inputs (it takes {need})", "export the quantized model again")
    nodes, inputs = [], []
    for k, (q, s, z) in enumerate(spec.data):
        name = f"{tag}__in{k}"
        axis = _weight_axis(spec, node, k) if k == 1 else 1
        nodes.append(helper.make_node("DequantizeLinear",
                                      [node.input[q], node.input[s], _get(node, z)],
                                      [name], name=f"{node.name}__dq{k}", axis=axis))
        inputs.append(name)
    if spec.bias is not None and _get(node, spec.bias):
        a_s, b_s = (_const(model, node.input[spec.data[i][1]]) for i in (0, 1))
        if a_s is None or b_s is None:
            return []  # computed scales: the QDQ pass refuses with the node's name
        factor = 1.0
        if node.op_type == "QGemm":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            factor = float(attrs.get("alpha", 1.0)) / float(attrs.get("beta", 1.0))
        scale = (np.asarray(a_s, np.float64) * np.asarray(b_s, np.float64) * factor)
        sname = f"{tag}__bias_scale"
        model.graph.initializer.append(numpy_helper.from_array(
            np.asarray(scale, np.float32).reshape(-1) if scale.size > 1 else
            np.asarray(scale, np.float32).reshape(()), sname))
        bname = f"{tag}__bias"
        nodes.append(helper.make_node("DequantizeLinear", [node.input[spec.bias], sname],
                                      [bname], name=f"{node.name}__dqb", axis=0))
        inputs.append(bname)
    attrs = [a for a in node.attribute if a.name not in spec.drop]
    y = node.output[0]
    fout = f"{tag}__out" if spec.out is not None and _get(node, spec.out[0]) else y
    op = helper.make_node(spec.float_op, inputs, [fout], name=node.name or tag)
    op.attribute.extend(attrs)
    nodes.append(op)
    if fout != y:
        nodes.append(helper.make_node("QuantizeLinear", [fout, node.input[spec.out[0]],
                                                         _get(node, spec.out[1])],
                                      [y], name=f"{node.name}__q"))
    return nodes


def to_qdq(model) -> list[str]:
    """Rewrite `model`'s QOperator nodes in place; the op types rewritten, one per node."""
    done: list[str] = []
    new_nodes = []
    for i, node in enumerate(model.graph.node):
        spec = QOPS.get(node.op_type)
        if spec is None or node.domain not in ("", "ai.onnx", "com.microsoft"):
            new_nodes.append(node)
            continue
        try:
            expanded = _expand(model, node, spec, f"{node.name or node.op_type}__{i}")
        except (ValueError, IndexError, TypeError, KeyError) as exc:
            from ...errors import Ai8xError

            raise Ai8xError("float.qdq-params", f"node {node.name or node.output[0]} "
                            f"({node.op_type})", "cannot read the quantization parameters "
                            f"({type(exc).__name__}: {str(exc)[:160]})",
                            "check the model with onnx.checker and onnxruntime") from None
        if not expanded:
            new_nodes.append(node)
            continue
        new_nodes.extend(expanded)
        done.append(node.op_type)
    del model.graph.node[:]
    model.graph.node.extend(new_nodes)
    return done


__all__ = ["QOPS", "to_qdq"]
