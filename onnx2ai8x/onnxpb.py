"""ONNX messages for the convert path: the protobuf library's decoder, onnx's classes.

The classes are those protoc generated from onnx.proto, shipped in the onnx package as
`onnx.onnx_ml_pb2`. Decoding goes through the protobuf runtime (upb), which its
maintainers fuzz, which bounds the nesting of messages (a DecodeError past 100 levels)
and merges repeated singular fields in linear time; a hand-written codec did neither
(issue 15: RecursionError on deep nesting, 62 s on a graph field repeated 4,000 times).

Importing the `onnx` package costs about 0.22 s (it pulls in its C++ extension, the
reference evaluator's helpers, ml_dtypes, ...), while the generated module alone costs
about 0.04 s. So unless onnx is already imported, `onnx_ml_pb2.py` is loaded by itself,
under its own module name: a later `import onnx` finds it in `sys.modules` and uses the
same classes, so messages pass between this module and onnx without conversion.

The `make_*` helpers mirror `onnx.helper` for the subset of it the toolchain uses, so code
reads the same with or without the onnx package.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError, Message

_PB_NAME = "onnx.onnx_ml_pb2"


def _generated_module():
    """onnx's generated message module, without importing the onnx package if that is
    not loaded yet (the convert path's start-up, issue 5)."""
    loaded = sys.modules.get(_PB_NAME)
    if loaded is not None:
        return loaded
    if "onnx" in sys.modules:
        import onnx.onnx_ml_pb2 as pb

        return pb
    spec = importlib.util.find_spec("onnx")
    if spec is None or spec.origin is None:
        raise ImportError("the onnx package is not installed (pip install onnx)")
    path = Path(spec.origin).parent / "onnx_ml_pb2.py"
    mod_spec = importlib.util.spec_from_file_location(_PB_NAME, path)
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[_PB_NAME] = module
    try:
        mod_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_PB_NAME]
        raise
    return module


_pb = _generated_module()
ModelProto = _pb.ModelProto
GraphProto = _pb.GraphProto
NodeProto = _pb.NodeProto
AttributeProto = _pb.AttributeProto
TensorProto = _pb.TensorProto
TensorShapeProto = _pb.TensorShapeProto
Dimension = _pb.TensorShapeProto.Dimension
TypeProto = _pb.TypeProto
TypeProtoTensor = _pb.TypeProto.Tensor
ValueInfoProto = _pb.ValueInfoProto
FunctionProto = _pb.FunctionProto
OperatorSetIdProto = _pb.OperatorSetIdProto
StringStringEntryProto = _pb.StringStringEntryProto

# --------------------------------------------------------------------------- tensors

# TensorProto data type <-> numpy dtype, for the types the toolchain meets.
_NP_OF = {
    TensorProto.FLOAT: np.dtype(np.float32), TensorProto.UINT8: np.dtype(np.uint8),
    TensorProto.INT8: np.dtype(np.int8), TensorProto.UINT16: np.dtype(np.uint16),
    TensorProto.INT16: np.dtype(np.int16), TensorProto.INT32: np.dtype(np.int32),
    TensorProto.INT64: np.dtype(np.int64), TensorProto.BOOL: np.dtype(np.bool_),
    TensorProto.FLOAT16: np.dtype(np.float16), TensorProto.DOUBLE: np.dtype(np.float64),
    TensorProto.UINT32: np.dtype(np.uint32), TensorProto.UINT64: np.dtype(np.uint64),
}
_TYPE_OF = {dt: code for code, dt in _NP_OF.items()}


def tensor_dtype_to_np_dtype(data_type: int) -> np.dtype:
    try:
        return _NP_OF[data_type]
    except KeyError:
        raise ValueError(f"unsupported tensor data type {data_type}") from None


def np_dtype_of(data_type: int) -> np.dtype | None:
    """The numpy dtype of a TensorProto data type, None for a type the toolchain does
    not read."""
    return _NP_OF.get(data_type)


def np_dtype_to_tensor_dtype(dtype: np.dtype) -> int | None:
    """The TensorProto data type of a numpy dtype (None if not one of ours)."""
    return _TYPE_OF.get(np.dtype(dtype).newbyteorder("="))


# A tensor the toolchain reads holds weights or a constant of a network that fits a
# MAX7800x (at most a few MB); 2**28 elements (a GiB or more) is no network of ours and
# would only exhaust memory.
MAX_TENSOR_ELEMENTS = 1 << 28


def _typed_data(tensor: TensorProto) -> Sequence[Any]:
    code = tensor.data_type
    if code == TensorProto.FLOAT:
        return tensor.float_data
    if code == TensorProto.DOUBLE:
        return tensor.double_data
    if code == TensorProto.INT64:
        return tensor.int64_data
    if code in (TensorProto.UINT32, TensorProto.UINT64):
        return tensor.uint64_data
    return tensor.int32_data  # int8/16/32, uint8/16, bool and float16 bit patterns


def to_array(tensor: TensorProto) -> np.ndarray:
    """The tensor's values (like onnx.numpy_helper.to_array, for numeric types).

    Raises ValueError, naming the tensor, when its dims and data disagree, a dim is
    negative or absurd, or the data type is not a numeric one.
    """
    if tensor.data_location == TensorProto.EXTERNAL:
        raise ValueError(f"tensor {tensor.name!r} keeps its data in an external file")
    dtype = tensor_dtype_to_np_dtype(tensor.data_type)
    dims = tuple(int(d) for d in tensor.dims)
    if any(d < 0 for d in dims):
        raise ValueError(f"tensor {tensor.name!r} has a negative dimension in {dims}")
    count = 1
    for d in dims:
        count *= d
    if count > MAX_TENSOR_ELEMENTS:
        raise ValueError(f"tensor {tensor.name!r} declares {count} elements (dims {dims}), "
                         f"more than {MAX_TENSOR_ELEMENTS}")
    if tensor.HasField("raw_data"):
        raw = tensor.raw_data
        if len(raw) != count * dtype.itemsize:
            raise ValueError(f"tensor {tensor.name!r}: dims {dims} need "
                             f"{count * dtype.itemsize} bytes of {dtype}, raw_data holds "
                             f"{len(raw)}")
        flat = np.frombuffer(raw, dtype=dtype.newbyteorder("<"))
        return flat.astype(dtype).reshape(dims)
    data = _typed_data(tensor)
    if len(data) != count:
        raise ValueError(f"tensor {tensor.name!r}: dims {dims} need {count} values, the "
                         f"tensor holds {len(data)}")
    if tensor.data_type == TensorProto.FLOAT16:
        # float16 values travel as their bit patterns in int32_data
        return np.asarray(data, dtype=np.int64).astype(np.uint16).view(np.float16) \
            .reshape(dims)
    values = np.asarray(data)
    if dtype.kind in "iub" and values.size:
        info = np.iinfo(np.int64 if dtype.kind == "b" else dtype)
        if values.min() < min(info.min, 0) or values.max() > info.max:
            raise ValueError(f"tensor {tensor.name!r}: values outside the range of "
                             f"{dtype}")
    return values.astype(dtype).reshape(dims)


def from_array(array: np.ndarray, name: str | None = None) -> TensorProto:
    """A TensorProto holding `array` as little-endian raw data."""
    arr = np.asarray(array)
    try:
        code = _TYPE_OF[arr.dtype.newbyteorder("=")]
    except KeyError:
        raise ValueError(f"unsupported numpy dtype {arr.dtype}") from None
    tensor = TensorProto(dims=[int(d) for d in arr.shape], data_type=code)
    if name is not None:
        tensor.name = name
    tensor.raw_data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
    return tensor


def make_tensor(name: str, data_type: int, dims: Sequence[int], vals: Sequence[Any],
                raw: bool = False) -> TensorProto:
    """Like onnx.helper.make_tensor (values in the typed field, or raw bytes)."""
    tensor = TensorProto(name=name, data_type=data_type, dims=[int(d) for d in dims])
    if raw:
        tensor.raw_data = bytes(vals)
    elif data_type == TensorProto.STRING:
        tensor.string_data.extend(v if isinstance(v, bytes) else str(v).encode()
                                  for v in vals)
    elif data_type == TensorProto.FLOAT:
        tensor.float_data.extend(float(v) for v in vals)
    elif data_type == TensorProto.DOUBLE:
        tensor.double_data.extend(float(v) for v in vals)
    elif data_type == TensorProto.INT64:
        tensor.int64_data.extend(int(v) for v in vals)
    elif data_type in (TensorProto.UINT32, TensorProto.UINT64):
        tensor.uint64_data.extend(int(v) for v in vals)
    elif data_type in _NP_OF and data_type != TensorProto.FLOAT16:
        tensor.int32_data.extend(int(v) for v in vals)
    else:
        raise ValueError(f"make_tensor: unsupported data type {data_type}")
    return tensor


# --------------------------------------------------------------------------- helpers

def make_attribute(key: str, value: Any) -> AttributeProto:
    """An attribute with the type inferred from the Python value (as onnx.helper does)."""
    attr = AttributeProto(name=key)
    if isinstance(value, bool | int | np.integer):
        attr.i, attr.type = int(value), AttributeProto.INT
    elif isinstance(value, float | np.floating):
        attr.f, attr.type = float(value), AttributeProto.FLOAT
    elif isinstance(value, str | bytes):
        attr.s = value.encode() if isinstance(value, str) else value
        attr.type = AttributeProto.STRING
    elif isinstance(value, TensorProto):
        attr.t.CopyFrom(value)
        attr.type = AttributeProto.TENSOR
    elif isinstance(value, GraphProto):
        attr.g.CopyFrom(value)
        attr.type = AttributeProto.GRAPH
    else:
        items = list(value)
        if all(isinstance(v, bool | int | np.integer) for v in items):
            attr.ints.extend(int(v) for v in items)
            attr.type = AttributeProto.INTS
        elif all(isinstance(v, int | float | np.number) for v in items):
            attr.floats.extend(float(v) for v in items)
            attr.type = AttributeProto.FLOATS
        elif all(isinstance(v, str | bytes) for v in items):
            attr.strings.extend(v.encode() if isinstance(v, str) else v for v in items)
            attr.type = AttributeProto.STRINGS
        elif all(isinstance(v, TensorProto) for v in items):
            attr.tensors.extend(items)
            attr.type = AttributeProto.TENSORS
        else:
            raise ValueError(f"attribute {key!r}: unsupported value {value!r}")
    return attr


def get_attribute_value(attr: AttributeProto) -> Any:
    """The attribute's value by its type (as onnx.helper.get_attribute_value); a
    ValueError naming the attribute for a type it does not know (0 or a new one)."""
    kind = attr.type
    if kind == AttributeProto.FLOAT:
        return attr.f
    if kind == AttributeProto.INT:
        return attr.i
    if kind == AttributeProto.STRING:
        return attr.s
    if kind == AttributeProto.TENSOR:
        return attr.t
    if kind == AttributeProto.GRAPH:
        return attr.g
    if kind == AttributeProto.FLOATS:
        return list(attr.floats)
    if kind == AttributeProto.INTS:
        return list(attr.ints)
    if kind == AttributeProto.STRINGS:
        return list(attr.strings)
    if kind == AttributeProto.TENSORS:
        return list(attr.tensors)
    if kind == AttributeProto.GRAPHS:
        return list(attr.graphs)
    raise ValueError(f"attribute {attr.name!r} has unsupported type {kind}")


def make_node(op_type: str, inputs: Sequence[str], outputs: Sequence[str],
              name: str | None = None, doc_string: str | None = None,
              domain: str | None = None, **attrs: Any) -> NodeProto:
    """A node; attributes sorted by name (as onnx.helper.make_node), None ones skipped."""
    node = NodeProto(op_type=op_type, input=list(inputs), output=list(outputs))
    if name:
        node.name = name
    if doc_string:
        node.doc_string = doc_string
    if domain is not None:
        node.domain = domain
    node.attribute.extend(make_attribute(k, v) for k, v in sorted(attrs.items())
                          if v is not None)
    return node


def make_opsetid(domain: str, version: int) -> OperatorSetIdProto:
    return OperatorSetIdProto(domain=domain, version=version)


def make_tensor_value_info(name: str, elem_type: int,
                           shape: Sequence[int | str | None] | None) -> ValueInfoProto:
    info = ValueInfoProto(name=name)
    tensor_type = info.type.tensor_type
    tensor_type.elem_type = elem_type
    if shape is not None:
        tensor_type.shape.SetInParent()  # a rank-0 shape is still a shape
        dims = tensor_type.shape.dim
        for d in shape:
            if isinstance(d, int | np.integer):
                dims.add(dim_value=int(d))
            elif isinstance(d, str):
                dims.add(dim_param=d)
            else:
                dims.add()
    return info


def make_graph(nodes: Sequence[NodeProto], name: str, inputs: Sequence[ValueInfoProto],
               outputs: Sequence[ValueInfoProto],
               initializer: Sequence[TensorProto] | None = None,
               doc_string: str | None = None,
               value_info: Sequence[ValueInfoProto] = ()) -> GraphProto:
    graph = GraphProto(node=list(nodes), name=name, input=list(inputs),
                       output=list(outputs), initializer=list(initializer or ()))
    if doc_string:
        graph.doc_string = doc_string
    if value_info:
        graph.value_info.extend(value_info)
    return graph


def make_function(domain: str, fname: str, inputs: Sequence[str], outputs: Sequence[str],
                  nodes: Sequence[NodeProto], opset_imports: Sequence[OperatorSetIdProto],
                  attributes: Sequence[str] = (),
                  attribute_protos: Sequence[AttributeProto] = (),
                  doc_string: str | None = None) -> FunctionProto:
    func = FunctionProto(domain=domain, name=fname, input=list(inputs),
                         output=list(outputs), node=list(nodes),
                         opset_import=list(opset_imports))
    if attributes:
        func.attribute.extend(attributes)
    if attribute_protos:
        func.attribute_proto.extend(attribute_protos)
    if doc_string:
        func.doc_string = doc_string
    return func


def make_model(graph: GraphProto, *, ir_version: int,
               opset_imports: Sequence[OperatorSetIdProto],
               functions: Sequence[FunctionProto] = (), producer_name: str | None = None,
               metadata: Mapping[str, str] | None = None) -> ModelProto:
    model = ModelProto(ir_version=ir_version, graph=graph,
                       opset_import=list(opset_imports))
    if producer_name:
        model.producer_name = producer_name
    if functions:
        model.functions.extend(functions)
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    return model


def copy(message: Message) -> Message:
    """An independent deep copy (the protobuf runtime copies in C: cheap even for the
    weights)."""
    out = type(message)()
    out.CopyFrom(message)
    return out


# --------------------------------------------------------------------------- files

def load(path: str | bytes | Any) -> ModelProto:
    """Read an .onnx file (raises DecodeError on bytes that are not a ModelProto, or
    whose text fields are not UTF-8: see check_text)."""
    with open(path, "rb") as fh:
        return decode(fh.read())


_METADATA_FIELD = 14  # ModelProto.metadata_props (onnx.proto)
_MAX_VARINT_BYTES = 10


def _varint(handle) -> int:
    value = shift = 0
    for _ in range(_MAX_VARINT_BYTES):
        byte = handle.read(1)
        if not byte:
            raise DecodeError("the file ends inside a field")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7
    raise DecodeError("a field's number or length is too long")


def read_metadata(path: str | Path) -> list[tuple[str, str]]:
    """The model file's metadata_props, in order, read without decoding the rest: every
    other top-level field of the ModelProto is skipped by its length, unread (the
    device a model names, without decoding its graph a second time). Raises DecodeError
    where the file is not a well-formed sequence of fields; load() then says why."""
    props = []
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        while fh.tell() < size:
            key = _varint(fh)
            field, wire = key >> 3, key & 7
            if wire == 0:
                _varint(fh)
                continue
            skip = {1: 8, 5: 4}.get(wire)
            if skip is None:
                if wire != 2:
                    raise DecodeError(f"field {field} has wire type {wire}")
                skip = _varint(fh)
                if field == _METADATA_FIELD:
                    data = fh.read(skip)
                    if len(data) != skip:
                        raise DecodeError("the file ends inside a field")
                    entry = StringStringEntryProto.FromString(data)
                    check_text(entry)
                    props.append((entry.key, entry.value))
                    continue
            if fh.tell() + skip > size:
                raise DecodeError("the file ends inside a field")
            fh.seek(skip, os.SEEK_CUR)
    return props


def decode(data: bytes) -> ModelProto:
    """A ModelProto from its serialized bytes, its text checked (see check_text)."""
    model = ModelProto.FromString(data)
    check_text(model)
    return model


def check_text(message: Message, where: str = "model") -> None:
    """Raise DecodeError naming the first text field that is not UTF-8.

    onnx.proto is proto2, whose `string` fields the protobuf runtime does not validate
    when decoding: a field holding other bytes reads back as `bytes`, not `str`, and
    every reader that splits, joins, formats or decodes names would fail on it in its
    own way (issue 24: TypeError, UnicodeDecodeError, unserializable JSON). Checked once
    here, when a file is read, so readers may trust that names are text.
    """
    stack = [(message, where)]
    while stack:
        msg, path = stack.pop()
        for field, value in msg.ListFields():
            name = f"{path}.{field.name}"
            if field.type == field.TYPE_STRING:
                values = (value,) if isinstance(value, str | bytes) else value
                for k, text in enumerate(values):
                    if not isinstance(text, str):
                        shown = bytes(text)[:60].decode("utf-8", "backslashreplace")
                        index = f"[{k}]" if len(values) > 1 else ""
                        raise DecodeError(f"{name}{index} is not UTF-8 text: `{shown}`")
            elif field.type == field.TYPE_MESSAGE:
                if isinstance(value, Message):
                    stack.append((value, name))
                else:
                    stack.extend((m, f"{name}[{k}]") for k, m in enumerate(value))


def to_onnx(model: Message) -> Any:
    """The same message as the `onnx` package's class (imports onnx). The classes are the
    same ones (see _generated_module), so this is the message itself."""
    import onnx

    cls = getattr(onnx, type(model).__name__)
    if isinstance(model, cls):
        return model
    return cls.FromString(model.SerializeToString())


def from_onnx(model: Any) -> Message:
    """A message of one of this module's classes (the same object when it is one)."""
    cls = getattr(_pb, type(model).__name__, None)
    if cls is not None and isinstance(model, cls):
        return model
    if cls is None:
        cls = ModelProto
    return cls.FromString(model.SerializeToString())


__all__ = [
    "AttributeProto", "DecodeError", "Dimension", "FunctionProto", "GraphProto",
    "Message", "ModelProto", "NodeProto", "OperatorSetIdProto",
    "StringStringEntryProto", "TensorProto", "TensorShapeProto", "TypeProto",
    "TypeProtoTensor", "ValueInfoProto", "check_text", "copy", "decode", "from_array",
    "from_onnx",
    "get_attribute_value", "load", "make_attribute", "make_function", "make_graph",
    "make_model", "make_node", "make_opsetid", "make_tensor", "make_tensor_value_info",
    "np_dtype_of", "np_dtype_to_tensor_dtype", "tensor_dtype_to_np_dtype", "to_array", "to_onnx",
]
