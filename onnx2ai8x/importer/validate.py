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
# The names above that only the `ai8x` domain's ops use with these types.
_AI8X_NAMES = frozenset({"shift", "weight_bits", "min", "max", "count", "rounding"})
# The field each attribute type keeps its value in.
_FIELD_OF = {
    AttributeProto.FLOAT: "f", AttributeProto.INT: "i", AttributeProto.STRING: "s",
    AttributeProto.TENSOR: "t", AttributeProto.GRAPH: "g",
}
# The attribute types a reader can read (onnxpb.get_attribute_value): FLOAT to GRAPHS.
# The sparse-tensor and type-proto kinds (11 to 14) are valid ONNX but no op of ai8x-ONNX
# has one, so an attribute of such a type is a damaged or foreign node.
_KNOWN_TYPES = frozenset(range(1, 11))

# (fewest, most) inputs and outputs of each op of ai8x-ONNX (docs/design.md section 1),
# from the ONNX operator specifications (opset 11 and later: Pad, Slice and Split take
# their sizes as inputs) and custom_ops/README.md for the `ai8x` domain. Optional inputs
# count, empty names included; None is "any number". The reader indexes inputs and
# outputs by position, so a node outside its op's counts is refused here.
_MANY = None
_ARITY = {
    "ConvInteger": (2, 4, 1, 1), "MatMulInteger": (2, 4, 1, 1),
    "MaxPool": (1, 1, 1, 2), "AveragePool": (1, 1, 1, 1),
    "Add": (2, 2, 1, 1), "Sub": (2, 2, 1, 1), "Mul": (2, 2, 1, 1),
    "BitwiseOr": (2, 2, 1, 1), "BitwiseXor": (2, 2, 1, 1),
    "Concat": (1, _MANY, 1, 1), "Split": (1, 2, 1, _MANY), "Reshape": (2, 2, 1, 1),
    "Flatten": (1, 1, 1, 1), "Identity": (1, 1, 1, 1), "Cast": (1, 1, 1, 1),
    "Abs": (1, 1, 1, 1), "Slice": (3, 5, 1, 1), "Pad": (1, 4, 1, 1),
    "Constant": (0, 0, 1, 1),
    "OutputShift": (1, 1, 1, 1), "Clamp": (1, 1, 1, 1), "PoolRound": (1, 1, 1, 1),
}
# Attributes the reader needs and the specifications give no default for.
_REQUIRED = {"OutputShift": ("shift",), "Cast": ("to",), "Constant": ("value",)}
# Window attributes: one value per spatial axis (pads: two), each at least this much.
_WINDOW = {"kernel_shape": (1, 1), "strides": (1, 1), "dilations": (1, 1), "pads": (2, 0)}
_WINDOW_OPS = frozenset({"ConvInteger", "MaxPool", "AveragePool"})
# Far above any accelerator window, stride or pad (the legalizer names the real limits):
# a larger value is a damaged file.
MAX_WINDOW_VALUE = 1 << 16

# A network for a MAX7800x has at most 1,024 input channels and rows/columns of at most
# 2,048 (MAX78002); 65,536 is far above both, so a larger dim is a damaged file, not a
# network that merely exceeds a device (the legalizer names those limits).
MAX_INPUT_DIM = 1 << 16


def _fail(code: str, where: str, message: str, hint: str) -> Ai8xError:
    return Ai8xError(code, where, message, hint)


def check_attributes(model: ModelProto, known: frozenset[int] = _KNOWN_TYPES,
                     standard_only: bool = False) -> None:
    """Every attribute has a `known` type, holds a value of it, and the ops' attributes
    have the types their specification gives (`standard_only`: the ONNX domain's ops
    only, the names of the `ai8x` domain's excepted: a float model's other domains name
    their attributes as they like)."""
    for node in model.graph.node:
        label = f"node {node.name or node.op_type!r} ({node.op_type})"
        standard = node.domain in ("", "ai.onnx")
        for attr in node.attribute:
            kind = attr.type
            if kind not in known:
                raise _fail("model.attribute", label,
                            f"attribute `{attr.name}` has unknown type {kind}",
                            "re-export the model; attribute types are set by the exporter")
            want = None if standard_only and (not standard or attr.name in _AI8X_NAMES) \
                else _ATTRIBUTE_TYPES.get(attr.name)
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


def check_nodes(model: ModelProto) -> None:
    """Every node of a known op has its op's number of inputs and outputs and the
    attributes the reader needs; window attributes have one value per spatial axis."""
    for node in model.graph.node:
        label = f"node {node.name or node.op_type!r} ({node.op_type})"
        counts = _ARITY.get(node.op_type)
        if counts is not None:
            _check_count(node, label, "inputs", len(node.input), counts[0], counts[1])
            _check_count(node, label, "outputs", len(node.output), counts[2], counts[3])
        names = {a.name for a in node.attribute}
        for name in _REQUIRED.get(node.op_type, ()):
            if name not in names:
                raise _fail("model.attribute", label,
                            f"the node has no `{name}` attribute; {node.op_type} needs one",
                            "re-export the model")
        if node.op_type in _WINDOW_OPS:
            _check_window(node, label)


def _check_count(node, label: str, what: str, have: int, least: int,
                 most: int | None) -> None:
    if have < least or (most is not None and have > most):
        bound = f"needs {least} {what}" if have < least else f"takes at most {most} {what}"
        raise _fail("model.node", label, f"{node.op_type} {bound}, the node has {have}",
                    "re-export the model; the file is damaged or hand-edited")


def _check_window(node, label: str) -> None:
    values = {a.name: list(a.ints) for a in node.attribute if a.name in _WINDOW}
    axes = len(values.get("kernel_shape", ())) or None
    for name, got in values.items():
        per_axis, least = _WINDOW[name]
        if axes is not None and len(got) != per_axis * axes:
            raise _fail("model.attribute", label,
                        f"attribute `{name}` has {len(got)} values; a window of {axes} "
                        f"axes needs {per_axis * axes}",
                        "re-export the model; the file is damaged or hand-edited")
        if any(not least <= v <= MAX_WINDOW_VALUE for v in got):
            raise _fail("model.attribute", label,
                        f"attribute `{name}` holds {', '.join(map(str, got[:8]))}; each value "
                        f"must be between {least} and {MAX_WINDOW_VALUE}",
                        "re-export the model; the file is damaged or hand-edited")


def check_tensors(model: ModelProto, own_types_only: bool = False) -> None:
    """Every initializer's dims, data and data type agree (onnxpb.to_array's checks).
    `own_types_only`: tensors of other data types (bfloat16, 4-bit, strings: a float
    model's exporter may write them; its reader decides) are left out."""
    for tensor in model.graph.initializer:
        if own_types_only and onnxpb.np_dtype_of(tensor.data_type) is None:
            _check_foreign_tensor(tensor)
            continue
        try:
            onnxpb.to_array(tensor)
        except ValueError as exc:
            raise _fail("model.tensor", f"initializer {tensor.name!r}", str(exc),
                        "re-export the model; the file is damaged or hand-edited") from None


def _check_foreign_tensor(tensor) -> None:
    """A tensor of a data type onnxpb does not read (4-bit, bfloat16, strings, ...): its
    dims bounded, and decodable by onnx's own reader, which the float walker uses."""
    where = f"initializer {tensor.name!r}"
    if tensor.data_type not in TensorProto.DataType.values():
        raise _fail("model.tensor", where, f"unknown tensor data type {tensor.data_type}",
                    "re-export the model; the file is damaged or hand-edited")
    count = 1
    for d in tensor.dims:
        count *= d if d >= 0 else -1
        if count < 0 or count > onnxpb.MAX_TENSOR_ELEMENTS:
            raise _fail("model.tensor", where, f"dims {', '.join(map(str, tensor.dims))} "
                        "are negative or absurd", "re-export the model; the file is "
                        "damaged or hand-edited")
    from onnx import numpy_helper

    try:
        numpy_helper.to_array(tensor)
    except Exception as exc:  # noqa: BLE001 - onnx raises many kinds for a bad tensor
        why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise _fail("model.tensor", where, f"the tensor of data type {tensor.data_type} "
                    f"cannot be read ({why})",
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


def check_float_graph(model: ModelProto, opset: int) -> None:
    """What the float reader (importer/float_onnx.py) trusts, checked once before it
    reads a node: attribute types (check_attributes), initializers whose dims match their
    data (check_tensors), window attributes of one value per axis, and every standard
    node with the number of inputs and outputs its operator schema allows at `opset`
    (issue 24: IndexErrors deep in the walker on a node missing an input or output)."""
    from onnx import defs

    check_attributes(model, known=frozenset(range(1, 15)), standard_only=True)
    check_tensors(model, own_types_only=True)
    consts = {t.name for t in model.graph.initializer}
    for inp in model.graph.input:
        kind = inp.type.tensor_type.elem_type
        if inp.name not in consts and kind not in TensorProto.DataType.values():
            raise _fail("model.input-type", f"input {inp.name!r}",
                        f"the input is of unknown element type {kind}",
                        "re-export the model; the file is damaged or hand-edited")
        dims = inp.type.tensor_type.shape.dim
        for k, dim in enumerate(dims[1:], start=1):
            if inp.name not in consts and dim.HasField("dim_value") and \
                    not 1 <= dim.dim_value <= MAX_INPUT_DIM:
                raise _fail("model.input", f"input {inp.name!r}",
                            f"dimension {k} of the input is {dim.dim_value}; it must be "
                            f"between 1 and {MAX_INPUT_DIM}",
                            "re-export the model with the input shape of your data")
    for node in model.graph.node:
        label = f"node {node.name or node.op_type!r} ({node.op_type})"
        if node.op_type in _WINDOW_OPS | {"Conv", "ConvTranspose"} and \
                node.domain in ("", "ai.onnx"):
            _check_window(node, label)
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = defs.get_schema(node.op_type, opset, "")
        except defs.SchemaError:
            continue  # an op the walker does not know names itself
        _check_count(node, label, "inputs", len(node.input), schema.min_input,
                     None if schema.max_input >= 1 << 30 else schema.max_input)
        _check_count(node, label, "outputs", len(node.output), schema.min_output,
                     None if schema.max_output >= 1 << 30 else schema.max_output)
        for attr in node.attribute:  # the attribute types the operator's schema gives
            spec = schema.attributes.get(attr.name)
            want = None if spec is None else int(getattr(spec.type, "value", spec.type))
            if want is not None and attr.type != want:
                raise _fail("model.attribute", label,
                            f"attribute `{attr.name}` is of type "
                            f"{AttributeProto.AttributeType.Name(attr.type)}, the operator "
                            f"takes {AttributeProto.AttributeType.Name(want)}",
                            "re-export the model with the operator's attribute types")


def validate(model: ModelProto) -> None:
    """All of the above, before the reader looks at a node."""
    check_interface(model)
    check_attributes(model)
    check_nodes(model)
    check_tensors(model)


__all__ = ["MAX_INPUT_DIM", "MAX_WINDOW_VALUE", "check_attributes", "check_interface",
           "check_float_graph", "check_nodes", "check_tensors", "validate"]
