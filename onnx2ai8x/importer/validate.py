"""What an ai8x-ONNX file must be before the reader trusts any of it.

The protobuf runtime guarantees well-formed messages, nothing more: an attribute may
claim a type it does not hold (or type 0), a tensor's dims may disagree with its data,
the graph may have no nodes or hand its input straight out as an output, and the input
may be of a type or size no accelerator takes. Each check here is one small rule whose
message names the node, tensor or value and the fix (issue 15: these escaped as Python
exceptions from deep inside the reader, or converted "successfully").
"""
from __future__ import annotations

from .. import onnxpb
from ..errors import Ai8xError
from ..onnxpb import AttributeProto, ModelProto, TensorProto

# The attribute types of the ops ai8x-ONNX uses (the ONNX operator specifications for
# the standard ops, custom_ops/README.md for the `ai8x` domain). A known name with another
# type would be read as the wrong value.
_INTS = AttributeProto.INTS
_INT = AttributeProto.INT
_ATTRIBUTE_TYPES = {
    "pads": _INTS, "strides": _INTS, "dilations": _INTS, "kernel_shape": _INTS,
    "axes": _INTS, "perm": _INTS, "split": _INTS, "output_padding": _INTS,
    "output_shape": _INTS,
    "group": _INT, "axis": _INT, "ceil_mode": _INT, "count_include_pad": _INT,
    "to": _INT, "keepdims": _INT, "allowzero": _INT, "num_outputs": _INT,
    "storage_order": _INT,
    "auto_pad": AttributeProto.STRING, "mode": AttributeProto.STRING,
    "value": AttributeProto.TENSOR,
    # ai8x domain
    "shift": _INT, "weight_bits": _INT, "min": _INT, "max": _INT, "count": _INT,
    "rounding": AttributeProto.STRING,
}
# The field each attribute type keeps its value in.
_FIELD_OF = {
    AttributeProto.FLOAT: "f", AttributeProto.INT: "i", AttributeProto.STRING: "s",
    AttributeProto.TENSOR: "t", AttributeProto.GRAPH: "g",
}
_KNOWN_TYPES = frozenset(range(1, 15))

# A network for a MAX7800x has at most 1,024 input channels and rows/columns of at most
# 2,048 (MAX78002); 65,536 is far above both, so a larger dim is a damaged file, not a
# network that merely exceeds a device (the legalizer names those limits).
MAX_INPUT_DIM = 1 << 16


def _fail(code: str, where: str, message: str, hint: str) -> Ai8xError:
    return Ai8xError(code, where, message, hint)


def check_attributes(model: ModelProto) -> None:
    """Every attribute has a known type, holds a value of it, and the ops' attributes
    have the types their specification gives."""
    for node in model.graph.node:
        label = f"node {node.name or node.op_type!r} ({node.op_type})"
        for attr in node.attribute:
            kind = attr.type
            if kind not in _KNOWN_TYPES:
                raise _fail("model.attribute", label,
                            f"attribute `{attr.name}` has unknown type {kind}",
                            "re-export the model; attribute types are set by the exporter")
            want = _ATTRIBUTE_TYPES.get(attr.name)
            if want is not None and kind != want:
                raise _fail("model.attribute", label,
                            f"attribute `{attr.name}` is of type "
                            f"{AttributeProto.AttributeType.Name(kind)}, the operator "
                            f"takes {AttributeProto.AttributeType.Name(want)}",
                            "re-export the model with the operator's attribute types")
            field = _FIELD_OF.get(kind)
            if field in ("t", "g") and not attr.HasField(field):
                raise _fail("model.attribute", label,
                            f"attribute `{attr.name}` declares a "
                            f"{AttributeProto.AttributeType.Name(kind)} but holds none",
                            "re-export the model")


def check_tensors(model: ModelProto) -> None:
    """Every initializer's dims, data and data type agree (onnxpb.to_array's checks)."""
    for tensor in model.graph.initializer:
        try:
            onnxpb.to_array(tensor)
        except ValueError as exc:
            raise _fail("model.tensor", f"initializer {tensor.name!r}", str(exc),
                        "re-export the model; the file is damaged or hand-edited") from None


def check_interface(model: ModelProto) -> None:
    """One int8 input of (N, C, L) or (N, C, H, W) with sensible dims; outputs that are
    computed by the graph, under distinct names."""
    graph = model.graph
    consts = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in consts]
    where = graph.name or "model"
    if len(inputs) != 1:
        raise _fail("model.inputs", where,
                    f"the graph has {len(inputs)} inputs; an ai8x network takes one",
                    "export the model with one input tensor")
    inp = inputs[0]
    ttype = inp.type.tensor_type
    if ttype.elem_type != TensorProto.INT8:
        name = TensorProto.DataType.Name(ttype.elem_type) \
            if ttype.elem_type in TensorProto.DataType.values() else str(ttype.elem_type)
        # model.input-type: the converter reads a float input as a standard model for
        # the quantizer (onnx2ai8x.quantize), so this code must stay distinct.
        raise _fail("model.input-type", f"input {inp.name!r}",
                    f"the input is of type {name}; the accelerator takes int8 data",
                    "export with ai8x_torch.export_onnx, which writes an int8 input")
    for k, dim in enumerate(ttype.shape.dim[1:], start=1):
        if dim.HasField("dim_value") and not 1 <= dim.dim_value <= MAX_INPUT_DIM:
            raise _fail("model.input", f"input {inp.name!r}",
                        f"dimension {k} of the input is {dim.dim_value}; it must be "
                        f"between 1 and {MAX_INPUT_DIM}",
                        "re-export the model with the input shape of your data")
    if not graph.output:
        raise _fail("model.output", where, "the graph has no outputs",
                    "export the model with its output")
    seen: set[str] = set()
    produced = {o for node in graph.node for o in node.output}
    for out in graph.output:
        if out.name in seen:
            raise _fail("model.output", f"output {out.name!r}",
                        "the graph lists this output twice", "list each output once")
        seen.add(out.name)
        if out.name not in produced:
            raise _fail("model.output", f"output {out.name!r}",
                        "no node computes this graph output"
                        + (" (it is the graph's input)" if out.name == inp.name else ""),
                        "an output must be the result of a layer; re-export the model")


def validate(model: ModelProto) -> None:
    """All of the above, before the reader looks at a node."""
    check_interface(model)
    check_attributes(model)
    check_tensors(model)


__all__ = ["MAX_INPUT_DIM", "check_attributes", "check_interface", "check_tensors",
           "validate"]
