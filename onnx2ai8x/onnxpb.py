"""ONNX model files without the `onnx` package: the protobuf wire format, read and written.

Why: importing `onnx` costs about 0.15 s of every conversion (it pulls in the protobuf
runtime, json_format, ml_dtypes, importlib.metadata, ...), a quarter of the issue 5
budget, while the convert path only needs to decode a ModelProto, walk its nodes, build
the reference model and write the annotated copy. This module does exactly that, in plain
Python, for the subset of `onnx.proto` (proto2) the toolchain touches; every other field
is kept as raw bytes and written back unchanged, so nothing in a user's model is lost.

The message classes mimic the generated protobuf classes where the code uses them
(attribute access with proto2 defaults, repeated fields as lists with `add()`,
`HasField`, `CopyFrom`, `SerializeToString`, `FromString`), and the `make_*` functions
mirror `onnx.helper`, so code reads the same with either. Serialization writes known
fields in field-number order, then unknown ones: deterministic, as the files we emit must
be. Field numbers and types are from onnx's `onnx.proto`.

`to_onnx` / `from_onnx` convert to and from the real `onnx` classes where a caller needs
them (the checker, shape inference for foreign ops, public APIs returning
`onnx.ModelProto`).
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np


class DecodeError(ValueError):
    """The bytes are not a valid encoding of the message."""


# Field kinds (wire type in brackets): signed varint integers (int32/int64/enum) [0],
# unsigned varints (uint64) [0], float [5], double [1], string / bytes / message [2].
_INT, _UINT, _FLOAT, _DOUBLE, _STRING, _BYTES, _MESSAGE = range(7)
_WIRE = {_INT: 0, _UINT: 0, _FLOAT: 5, _DOUBLE: 1, _STRING: 2, _BYTES: 2, _MESSAGE: 2}
_DEFAULTS = {_INT: 0, _UINT: 0, _FLOAT: 0.0, _DOUBLE: 0.0, _STRING: "", _BYTES: b""}


class _Field(NamedTuple):
    number: int
    name: str
    kind: int
    repeated: bool = False
    packed: bool = False
    message: str | None = None  # class name, resolved after all classes exist


class Repeated(list):
    """A repeated field: a list, plus `add(**fields)` for message elements."""

    __slots__ = ("_cls",)

    def __init__(self, cls: type[Message] | None = None, items: Iterable = ()) -> None:
        super().__init__(items)
        self._cls = cls

    def add(self, **fields: Any) -> Message:
        if self._cls is None:
            raise TypeError("add() is for repeated message fields")
        item = self._cls(**fields)
        self.append(item)
        return item


def _write_varint(out: bytearray, value: int) -> None:
    if value < 0:
        value += 1 << 64  # negative int32/int64 travel as 64-bit two's complement
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise DecodeError("truncated varint") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


class Message:
    """Base of the ONNX message classes: proto2 semantics over a plain `__dict__`.

    A field is present when its name is in the instance dict. Reading an absent scalar
    gives the proto2 default; reading an absent message or repeated field creates it (as
    protobuf does, an untouched empty message created that way is not written).
    """

    FIELDS: ClassVar[tuple[_Field, ...]] = ()
    _BY_NAME: ClassVar[dict[str, _Field]]
    _BY_NUMBER: ClassVar[dict[int, _Field]]
    _CLASSES: ClassVar[dict[str, type[Message]]]

    def __init__(self, **fields: Any) -> None:
        for name, value in fields.items():
            if value is not None:
                setattr(self, name, value)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.FIELDS = tuple(sorted(cls.FIELDS, key=lambda f: f.number))
        cls._BY_NAME = {f.name: f for f in cls.FIELDS}
        cls._BY_NUMBER = {f.number: f for f in cls.FIELDS}

    # -- field access ----------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        field = type(self)._BY_NAME.get(name)
        if field is None:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")
        if field.repeated:
            value = Repeated(self._CLASSES.get(field.message) if field.message else None)
            self.__dict__[name] = value
            return value
        if field.kind == _MESSAGE:
            value = self._CLASSES[field.message]()
            value.__dict__["_lazy"] = True
            self.__dict__[name] = value
            return value
        return _DEFAULTS[field.kind]

    def __setattr__(self, name: str, value: Any) -> None:
        field = type(self)._BY_NAME.get(name)
        if field is None:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")
        if field.repeated:
            value = Repeated(self._CLASSES.get(field.message) if field.message else None,
                             value)
        elif field.kind == _MESSAGE and isinstance(value, Message):
            value.__dict__.pop("_lazy", None)
        self.__dict__[name] = value

    def _touched(self) -> bool:
        """Whether this (lazily created) message holds anything worth writing."""
        for key, value in self.__dict__.items():
            if key == "_lazy" or (isinstance(value, Repeated) and not value):
                continue
            if isinstance(value, Message) and value.__dict__.get("_lazy") \
                    and not value._touched():
                continue
            return True
        return False

    def HasField(self, name: str) -> bool:  # noqa: N802 - protobuf's spelling
        field = type(self)._BY_NAME.get(name)
        if field is None or field.repeated:
            raise ValueError(f"{type(self).__name__} has no singular field {name!r}")
        value = self.__dict__.get(name)
        if value is None:
            return False
        if isinstance(value, Message) and value.__dict__.get("_lazy"):
            return value._touched()
        return True

    def ClearField(self, name: str) -> None:  # noqa: N802
        self.__dict__.pop(name, None)

    def CopyFrom(self, other: Message) -> None:  # noqa: N802
        self.__dict__.clear()
        self.MergeFromString(other.SerializeToString())

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self)
                and self.SerializeToString() == other.SerializeToString())

    __hash__ = None  # type: ignore[assignment] - mutable, like protobuf messages

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k != "_lazy")
        return f"{type(self).__name__}({shown})"

    # -- encoding ----------------------------------------------------------------------
    def SerializeToString(self, deterministic: bool = True) -> bytes:  # noqa: N802
        """The wire encoding (always deterministic; the argument is for compatibility)."""
        out = bytearray()
        self._encode(out)
        return bytes(out)

    def _encode(self, out: bytearray) -> None:
        values = self.__dict__
        for field in self.FIELDS:
            value = values.get(field.name)
            if value is None:
                continue
            if field.repeated:
                if value:
                    _encode_repeated(out, field, value)
            elif field.kind == _MESSAGE:
                if value.__dict__.get("_lazy") and not value._touched():
                    continue
                _write_varint(out, field.number << 3 | 2)
                body = bytearray()
                value._encode(body)
                _write_varint(out, len(body))
                out += body
            else:
                _write_varint(out, field.number << 3 | _WIRE[field.kind])
                _encode_scalar(out, field.kind, value)
        for raw in values.get("_unknown", ()):
            out += raw

    # -- decoding ----------------------------------------------------------------------
    @classmethod
    def FromString(cls, data: bytes) -> Message:  # noqa: N802
        msg = cls()
        msg.MergeFromString(data)
        return msg

    def ParseFromString(self, data: bytes) -> None:  # noqa: N802
        self.__dict__.clear()
        self.MergeFromString(data)

    def MergeFromString(self, data: bytes) -> None:  # noqa: N802
        buf = bytes(data)
        self._decode(buf, 0, len(buf))

    def _decode(self, buf: bytes, pos: int, end: int) -> None:
        values = self.__dict__
        by_number = self._BY_NUMBER
        while pos < end:
            start = pos
            key, pos = _read_varint(buf, pos)
            number, wire = key >> 3, key & 7
            if wire == 0:
                raw, pos = _read_varint(buf, pos)
            elif wire == 2:
                size, pos = _read_varint(buf, pos)
                raw = (pos, pos + size)
                pos += size
            elif wire == 5:
                raw = buf[pos:pos + 4]
                pos += 4
            elif wire == 1:
                raw = buf[pos:pos + 8]
                pos += 8
            else:
                raise DecodeError(f"unsupported wire type {wire} (field {number})")
            if pos > end or number == 0:
                raise DecodeError("truncated message")
            field = by_number.get(number)
            if field is None or (wire != _WIRE[field.kind]
                                 and not (wire == 2 and field.repeated)):
                values.setdefault("_unknown", []).append(buf[start:pos])
                continue
            if field.kind == _MESSAGE:
                item = self._CLASSES[field.message]()
                item._decode(buf, raw[0], raw[1])
                if field.repeated:
                    getattr(self, field.name).append(item)
                else:
                    old = values.get(field.name)
                    if isinstance(old, Message):  # proto merge semantics
                        item = _merged(old, item)
                    values[field.name] = item
                continue
            if field.repeated and wire == 2 and field.kind not in (_STRING, _BYTES):
                getattr(self, field.name).extend(_unpack(field.kind, buf, *raw))
                continue
            value = _scalar(field.kind, wire, raw, buf)
            if field.repeated:
                getattr(self, field.name).append(value)
            else:
                values[field.name] = value


def _merged(old: Message, new: Message) -> Message:
    out = type(old)()
    out.MergeFromString(old.SerializeToString() + new.SerializeToString())
    return out


def _scalar(kind: int, wire: int, raw: Any, buf: bytes) -> Any:
    if kind == _INT:
        return _signed(raw)
    if kind == _UINT:
        return raw
    if kind == _FLOAT:
        return struct.unpack("<f", raw)[0]
    if kind == _DOUBLE:
        return struct.unpack("<d", raw)[0]
    data = buf[raw[0]:raw[1]]
    if kind == _STRING:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise DecodeError("a string field is not valid UTF-8") from None
    return data


def _unpack(kind: int, buf: bytes, start: int, end: int) -> list:
    if kind == _FLOAT:
        if (end - start) % 4:
            raise DecodeError("packed floats of a bad length")
        return list(struct.unpack_from(f"<{(end - start) // 4}f", buf, start))
    if kind == _DOUBLE:
        if (end - start) % 8:
            raise DecodeError("packed doubles of a bad length")
        return list(struct.unpack_from(f"<{(end - start) // 8}d", buf, start))
    values = []
    pos = start
    while pos < end:
        v, pos = _read_varint(buf, pos)
        values.append(_signed(v) if kind == _INT else v)
    if pos != end:
        raise DecodeError("truncated packed field")
    return values


def _encode_scalar(out: bytearray, kind: int, value: Any) -> None:
    if kind in (_INT, _UINT):
        _write_varint(out, int(value))
    elif kind == _FLOAT:
        out += struct.pack("<f", value)
    elif kind == _DOUBLE:
        out += struct.pack("<d", value)
    else:
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        _write_varint(out, len(data))
        out += data


def _encode_repeated(out: bytearray, field: _Field, values: list) -> None:
    if field.packed:
        _write_varint(out, field.number << 3 | 2)
        if field.kind == _FLOAT:
            body = struct.pack(f"<{len(values)}f", *values)
        elif field.kind == _DOUBLE:
            body = struct.pack(f"<{len(values)}d", *values)
        else:
            tmp = bytearray()
            for v in values:
                _write_varint(tmp, int(v))
            body = bytes(tmp)
        _write_varint(out, len(body))
        out += body
        return
    key = bytearray()
    _write_varint(key, field.number << 3 | _WIRE[field.kind])
    for value in values:
        out += key
        if field.kind == _MESSAGE:
            body = bytearray()
            value._encode(body)
            _write_varint(out, len(body))
            out += body
        else:
            _encode_scalar(out, field.kind, value)


# --------------------------------------------------------------------------- messages
# The subset of onnx.proto the toolchain reads or writes; every other field round-trips
# as unknown bytes.

def _f(number: int, name: str, kind: int, *, rep: bool = False, packed: bool = False,
       msg: str | None = None) -> _Field:
    return _Field(number, name, kind, rep, packed, msg)


class StringStringEntryProto(Message):
    FIELDS = (_f(1, "key", _STRING), _f(2, "value", _STRING))


class OperatorSetIdProto(Message):
    FIELDS = (_f(1, "domain", _STRING), _f(2, "version", _INT))


class TensorProto(Message):
    # DataType enum values (onnx.proto)
    UNDEFINED, FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64 = 0, 1, 2, 3, 4, 5, 6, 7
    STRING, BOOL, FLOAT16, DOUBLE, UINT32, UINT64 = 8, 9, 10, 11, 12, 13
    DEFAULT, EXTERNAL = 0, 1  # DataLocation
    FIELDS = (
        _f(1, "dims", _INT, rep=True),
        _f(2, "data_type", _INT),
        _f(4, "float_data", _FLOAT, rep=True, packed=True),
        _f(5, "int32_data", _INT, rep=True, packed=True),
        _f(6, "string_data", _BYTES, rep=True),
        _f(7, "int64_data", _INT, rep=True, packed=True),
        _f(8, "name", _STRING),
        _f(9, "raw_data", _BYTES),
        _f(10, "double_data", _DOUBLE, rep=True, packed=True),
        _f(11, "uint64_data", _UINT, rep=True, packed=True),
        _f(12, "doc_string", _STRING),
        _f(13, "external_data", _MESSAGE, rep=True, msg="StringStringEntryProto"),
        _f(14, "data_location", _INT),
        _f(16, "metadata_props", _MESSAGE, rep=True, msg="StringStringEntryProto"),
    )


class TensorShapeProto(Message):
    FIELDS = (_f(1, "dim", _MESSAGE, rep=True, msg="Dimension"),)


class Dimension(Message):
    """TensorShapeProto.Dimension."""

    FIELDS = (_f(1, "dim_value", _INT), _f(2, "dim_param", _STRING),
              _f(3, "denotation", _STRING))


class TypeProtoTensor(Message):
    """TypeProto.Tensor."""

    FIELDS = (_f(1, "elem_type", _INT), _f(2, "shape", _MESSAGE, msg="TensorShapeProto"))


class TypeProto(Message):
    FIELDS = (_f(1, "tensor_type", _MESSAGE, msg="TypeProtoTensor"),
              _f(6, "denotation", _STRING))


class ValueInfoProto(Message):
    FIELDS = (_f(1, "name", _STRING), _f(2, "type", _MESSAGE, msg="TypeProto"),
              _f(3, "doc_string", _STRING),
              _f(4, "metadata_props", _MESSAGE, rep=True, msg="StringStringEntryProto"))


class AttributeProto(Message):
    # AttributeType enum values (onnx.proto)
    UNDEFINED, FLOAT, INT, STRING, TENSOR, GRAPH = 0, 1, 2, 3, 4, 5
    FLOATS, INTS, STRINGS, TENSORS, GRAPHS = 6, 7, 8, 9, 10
    SPARSE_TENSOR, SPARSE_TENSORS, TYPE_PROTO, TYPE_PROTOS = 11, 12, 13, 14
    FIELDS = (
        _f(1, "name", _STRING),
        _f(2, "f", _FLOAT),
        _f(3, "i", _INT),
        _f(4, "s", _BYTES),
        _f(5, "t", _MESSAGE, msg="TensorProto"),
        _f(6, "g", _MESSAGE, msg="GraphProto"),
        _f(7, "floats", _FLOAT, rep=True),
        _f(8, "ints", _INT, rep=True),
        _f(9, "strings", _BYTES, rep=True),
        _f(10, "tensors", _MESSAGE, rep=True, msg="TensorProto"),
        _f(11, "graphs", _MESSAGE, rep=True, msg="GraphProto"),
        _f(13, "doc_string", _STRING),
        _f(20, "type", _INT),
        _f(21, "ref_attr_name", _STRING),
    )


class NodeProto(Message):
    FIELDS = (
        _f(1, "input", _STRING, rep=True),
        _f(2, "output", _STRING, rep=True),
        _f(3, "name", _STRING),
        _f(4, "op_type", _STRING),
        _f(5, "attribute", _MESSAGE, rep=True, msg="AttributeProto"),
        _f(6, "doc_string", _STRING),
        _f(7, "domain", _STRING),
        _f(8, "overload", _STRING),
        _f(9, "metadata_props", _MESSAGE, rep=True, msg="StringStringEntryProto"),
    )


class GraphProto(Message):
    FIELDS = (
        _f(1, "node", _MESSAGE, rep=True, msg="NodeProto"),
        _f(2, "name", _STRING),
        _f(5, "initializer", _MESSAGE, rep=True, msg="TensorProto"),
        _f(10, "doc_string", _STRING),
        _f(11, "input", _MESSAGE, rep=True, msg="ValueInfoProto"),
        _f(12, "output", _MESSAGE, rep=True, msg="ValueInfoProto"),
        _f(13, "value_info", _MESSAGE, rep=True, msg="ValueInfoProto"),
        _f(16, "metadata_props", _MESSAGE, rep=True, msg="StringStringEntryProto"),
    )


class FunctionProto(Message):
    FIELDS = (
        _f(1, "name", _STRING),
        _f(4, "input", _STRING, rep=True),
        _f(5, "output", _STRING, rep=True),
        _f(6, "attribute", _STRING, rep=True),
        _f(7, "node", _MESSAGE, rep=True, msg="NodeProto"),
        _f(8, "doc_string", _STRING),
        _f(9, "opset_import", _MESSAGE, rep=True, msg="OperatorSetIdProto"),
        _f(10, "domain", _STRING),
        _f(11, "attribute_proto", _MESSAGE, rep=True, msg="AttributeProto"),
        _f(12, "value_info", _MESSAGE, rep=True, msg="ValueInfoProto"),
        _f(13, "overload", _STRING),
        _f(14, "metadata_props", _MESSAGE, rep=True, msg="StringStringEntryProto"),
    )


class ModelProto(Message):
    FIELDS = (
        _f(1, "ir_version", _INT),
        _f(2, "producer_name", _STRING),
        _f(3, "producer_version", _STRING),
        _f(4, "domain", _STRING),
        _f(5, "model_version", _INT),
        _f(6, "doc_string", _STRING),
        _f(7, "graph", _MESSAGE, msg="GraphProto"),
        _f(8, "opset_import", _MESSAGE, rep=True, msg="OperatorSetIdProto"),
        _f(14, "metadata_props", _MESSAGE, rep=True, msg="StringStringEntryProto"),
        _f(25, "functions", _MESSAGE, rep=True, msg="FunctionProto"),
    )


Message._CLASSES = {cls.__name__: cls for cls in (
    StringStringEntryProto, OperatorSetIdProto, TensorProto, TensorShapeProto, Dimension,
    TypeProtoTensor, TypeProto, ValueInfoProto, AttributeProto, NodeProto, GraphProto,
    FunctionProto, ModelProto)}


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


def np_dtype_to_tensor_dtype(dtype: np.dtype) -> int | None:
    """The TensorProto data type of a numpy dtype (None if not one of ours)."""
    return _TYPE_OF.get(np.dtype(dtype).newbyteorder("="))


def to_array(tensor: TensorProto) -> np.ndarray:
    """The tensor's values (like onnx.numpy_helper.to_array, for numeric types)."""
    if tensor.data_location == TensorProto.EXTERNAL:
        raise ValueError(f"tensor {tensor.name!r} keeps its data in an external file")
    dtype = tensor_dtype_to_np_dtype(tensor.data_type)
    dims = tuple(int(d) for d in tensor.dims)
    if tensor.HasField("raw_data"):
        flat = np.frombuffer(tensor.raw_data, dtype=dtype.newbyteorder("<"))
        return flat.astype(dtype).reshape(dims)
    code = tensor.data_type
    if code in (TensorProto.FLOAT,):
        data = tensor.float_data
    elif code == TensorProto.DOUBLE:
        data = tensor.double_data
    elif code == TensorProto.INT64:
        data = tensor.int64_data
    elif code in (TensorProto.UINT32, TensorProto.UINT64):
        data = tensor.uint64_data
    elif code == TensorProto.FLOAT16:
        # float16 values travel as their bit patterns in int32_data
        return (np.asarray(tensor.int32_data, dtype=np.uint16).view(np.float16)
                .reshape(dims))
    else:
        data = tensor.int32_data
    return np.asarray(data).astype(dtype).reshape(dims)


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
        tensor.string_data = [v if isinstance(v, bytes) else str(v).encode() for v in vals]
    elif data_type == TensorProto.FLOAT:
        tensor.float_data = [float(v) for v in vals]
    elif data_type == TensorProto.DOUBLE:
        tensor.double_data = [float(v) for v in vals]
    elif data_type == TensorProto.INT64:
        tensor.int64_data = [int(v) for v in vals]
    elif data_type in (TensorProto.UINT32, TensorProto.UINT64):
        tensor.uint64_data = [int(v) for v in vals]
    elif data_type in _NP_OF and data_type != TensorProto.FLOAT16:
        tensor.int32_data = [int(v) for v in vals]
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
        attr.t, attr.type = value, AttributeProto.TENSOR
    elif isinstance(value, GraphProto):
        attr.g, attr.type = value, AttributeProto.GRAPH
    else:
        items = list(value)
        if all(isinstance(v, bool | int | np.integer) for v in items):
            attr.ints, attr.type = [int(v) for v in items], AttributeProto.INTS
        elif all(isinstance(v, int | float | np.number) for v in items):
            attr.floats, attr.type = [float(v) for v in items], AttributeProto.FLOATS
        elif all(isinstance(v, str | bytes) for v in items):
            attr.strings = [v.encode() if isinstance(v, str) else v for v in items]
            attr.type = AttributeProto.STRINGS
        elif all(isinstance(v, TensorProto) for v in items):
            attr.tensors, attr.type = items, AttributeProto.TENSORS
        else:
            raise ValueError(f"attribute {key!r}: unsupported value {value!r}")
    return attr


def get_attribute_value(attr: AttributeProto) -> Any:
    """The attribute's value by its type (as onnx.helper.get_attribute_value)."""
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
    node.attribute = [make_attribute(k, v) for k, v in sorted(attrs.items())
                      if v is not None]
    return node


def make_opsetid(domain: str, version: int) -> OperatorSetIdProto:
    return OperatorSetIdProto(domain=domain, version=version)


def make_tensor_value_info(name: str, elem_type: int,
                           shape: Sequence[int | str | None] | None) -> ValueInfoProto:
    info = ValueInfoProto(name=name)
    tensor_type = info.type.tensor_type
    tensor_type.elem_type = elem_type
    if shape is not None:
        dims = tensor_type.shape.dim
        for d in shape:
            if isinstance(d, int | np.integer):
                dims.add(dim_value=int(d))
            elif isinstance(d, str):
                dims.add(dim_param=d)
            else:
                dims.add()
        tensor_type.shape.__dict__.pop("_lazy", None)  # a rank-0 shape is still a shape
    info.type.__dict__.pop("_lazy", None)
    tensor_type.__dict__.pop("_lazy", None)
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
        graph.value_info = list(value_info)
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
        func.attribute = list(attributes)
    if attribute_protos:
        func.attribute_proto = list(attribute_protos)
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
        model.functions = list(functions)
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    return model


def shallow_copy(message: Message) -> Message:
    """A new message sharing the field values of `message`, with its own repeated-field
    lists: changing which items a list holds, or a scalar, leaves `message` as it was;
    changing a shared item changes both."""
    out = type(message)()
    for key, value in message.__dict__.items():
        if isinstance(value, Repeated):
            value = Repeated(value._cls, value)
        elif key == "_unknown":
            value = list(value)
        out.__dict__[key] = value
    return out


# --------------------------------------------------------------------------- files

def load(path: str | bytes | Any) -> ModelProto:
    """Read an .onnx file (raises DecodeError on bytes that are not a ModelProto)."""
    with open(path, "rb") as fh:
        return ModelProto.FromString(fh.read())


def to_onnx(model: Message) -> Any:
    """The same message as the `onnx` package's class (imports onnx)."""
    import onnx

    cls = getattr(onnx, type(model).__name__)
    return cls.FromString(model.SerializeToString())


def from_onnx(model: Any) -> Message:
    """An `onnx` package message as this module's class of the same name."""
    if isinstance(model, Message):
        return model
    cls = Message._CLASSES[type(model).__name__]
    return cls.FromString(model.SerializeToString())


__all__ = [
    "AttributeProto", "DecodeError", "Dimension", "FunctionProto", "GraphProto",
    "Message", "ModelProto", "NodeProto", "OperatorSetIdProto", "Repeated",
    "StringStringEntryProto", "TensorProto", "TensorShapeProto", "TypeProto",
    "TypeProtoTensor", "ValueInfoProto", "from_array", "from_onnx", "get_attribute_value",
    "load", "make_attribute", "make_function", "make_graph", "make_model", "make_node",
    "make_opsetid", "make_tensor", "make_tensor_value_info", "np_dtype_to_tensor_dtype",
    "shallow_copy", "tensor_dtype_to_np_dtype",
    "to_array", "to_onnx",
]
