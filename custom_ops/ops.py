"""The `ai8x` ONNX op domain (version 1): schemas and kernels written in standard ONNX.

Each op is defined twice, and the two must agree:

* an `OpSchema` (registered with `register_schemas()`), so `onnx.checker` knows the
  op's inputs, attributes and types, with a type/shape inference function;
* a `FunctionProto` (`functions()`), the kernel in standard opset-19 ops with exact
  integer arithmetic (int64 inside, floor division through `Mod`). Every model the
  builder writes stores these functions, so a stock onnxruntime runs it.

`custom_ops/numpy_ref.py` holds the plain numpy formula of each op; the README states
the rules (seed 000, "Data Format" / "Pooling" / "Output Shift" sections; vendor
izer/simulate.py for the exact arithmetic).
"""
from __future__ import annotations

from onnx2ai8x import onnxpb as helper
from onnx2ai8x.onnxpb import AttributeProto, FunctionProto, NodeProto, TensorProto

DOMAIN = "ai8x"
VERSION = 1
OPSET = 19

# The accumulator is divided by 128 before the output shift (vendor izer/simulate.py:
# `acc / (128 / 2**output_shift)`), so an `OutputShift` of 7 leaves it unchanged.
ACC_DIVISOR = 128

ROUNDING_TRUNCATE = "truncate"
ROUNDING_NEAREST = "nearest"


def _attr_ref(name: str, ref: str, attr_type: int) -> AttributeProto:
    """An attribute of a function-body node that takes the calling node's `ref`."""
    return AttributeProto(name=name, ref_attr_name=ref, type=attr_type)


def _const_from_attr(out: str, ref: str, kind: str = "value_int") -> NodeProto:
    node = helper.make_node("Constant", [], [out])
    attr_type = {"value_int": AttributeProto.INT,
                 "value_string": AttributeProto.STRING}[kind]
    node.attribute.append(_attr_ref(kind, ref, attr_type))
    return node


def _const_int(out: str, value: int, dtype: int = TensorProto.INT64) -> NodeProto:
    return helper.make_node("Constant", [], [out],
                            value=helper.make_tensor(out, dtype, [], [value]))


def _const_float(out: str, value: float, dtype: int = TensorProto.DOUBLE) -> NodeProto:
    return helper.make_node("Constant", [], [out],
                            value=helper.make_tensor(out, dtype, [], [value]))


def _output_shift_function() -> FunctionProto:
    # Y = floor(0.5 + X * 2**(shift - 7)), the vendor's own float64 formula
    # (izer/simulate.py: floor(0.5 + acc / (128 / 2**output_shift))). It is exact integer
    # arithmetic here: X (an int32 accumulator) is exact in a double, scaling by a power
    # of two is exact, |X * 2**(shift-7)| < 2**52 keeps "+ 0.5" exact, and Floor is exact.
    # Doubles are used rather than int64 division because onnxruntime's integer
    # Div/Mod are several times slower and its int64 Min/Max/Clip mis-compare values
    # beyond the int32 range (found by tests/custom_ops/test_ops.py).
    nodes = [
        helper.make_node("Cast", ["X"], ["x"], to=TensorProto.DOUBLE),
        _const_from_attr("s", "shift"),
        helper.make_node("Cast", ["s"], ["sd"], to=TensorProto.DOUBLE),
        _const_float("seven", 7.0),
        _const_float("two", 2.0),
        _const_float("half", 0.5),
        helper.make_node("Sub", ["sd", "seven"], ["e"]),
        helper.make_node("Pow", ["two", "e"], ["scale"]),
        helper.make_node("Mul", ["x", "scale"], ["xs"]),
        helper.make_node("Add", ["xs", "half"], ["xh"]),
        helper.make_node("Floor", ["xh"], ["y"]),
        # Saturate to int32 so the cast back is exact; the int8 clamp that follows
        # (or the 32-bit output register) cannot tell the difference.
        _const_float("lo", -(2.0 ** 31)),
        _const_float("hi", 2.0 ** 31 - 1),
        helper.make_node("Clip", ["y", "lo", "hi"], ["yc"]),
        helper.make_node("CastLike", ["yc", "X"], ["Y"]),
    ]
    return helper.make_function(DOMAIN, "OutputShift", ["X"], ["Y"], nodes,
                                [helper.make_opsetid("", OPSET)],
                                attributes=["shift"],
                                attribute_protos=[helper.make_attribute("weight_bits", 8)])


def _clamp_function() -> FunctionProto:
    # Bounds are cast to the input's type (the schema limits them to int8/int32/int64
    # values of the bound's own range in practice: -128..127 or 0..127).
    nodes = [
        _const_from_attr("lo64", "min"),
        _const_from_attr("hi64", "max"),
        helper.make_node("CastLike", ["lo64", "X"], ["lo"]),
        helper.make_node("CastLike", ["hi64", "X"], ["hi"]),
        helper.make_node("Clip", ["X", "lo", "hi"], ["y"]),
    ]
    cast = helper.make_node("Cast", ["y"], ["Y"])
    cast.attribute.append(_attr_ref("to", "to", AttributeProto.INT))
    nodes.append(cast)
    return helper.make_function(DOMAIN, "Clamp", ["X"], ["Y"], nodes,
                                [helper.make_opsetid("", OPSET)],
                                attributes=["min", "max"],
                                attribute_protos=[helper.make_attribute("to", TensorProto.INT8)])


def _pool_round_function() -> FunctionProto:
    # X is the float mean of `count` int8 values. Round(X * count) recovers the exact
    # integer window sum S (|S| <= 256 * 128 is far inside float32's exact range and the
    # mean's relative error of ~1e-7 moves X * count by < 0.01). q = S / count is then
    # correctly rounded: a quotient that is not an integer or a half lies at least
    # 1 / (2 * count) from one, far beyond float32's error at |q| <= 128, so
    # floor(|q|) (truncate) and floor(|q| + 0.5) (nearest, half away from zero) are exact.
    nodes = [
        _const_from_attr("n", "count"),
        helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["X", "nf"], ["sf"]),
        helper.make_node("Round", ["sf"], ["sr"]),
        helper.make_node("Div", ["sr", "nf"], ["q"]),
        helper.make_node("Abs", ["q"], ["a"]),
        _const_from_attr("mode", "rounding", "value_string"),
        helper.make_node("Constant", [], ["nearest"],
                         value=helper.make_tensor("nearest", TensorProto.STRING, [],
                                                  [ROUNDING_NEAREST.encode()])),
        helper.make_node("Equal", ["mode", "nearest"], ["is_nearest"]),
        _const_float("half", 0.5, TensorProto.FLOAT),
        _const_float("zero", 0.0, TensorProto.FLOAT),
        helper.make_node("Where", ["is_nearest", "half", "zero"], ["bump"]),
        helper.make_node("Add", ["a", "bump"], ["ab"]),
        helper.make_node("Floor", ["ab"], ["m"]),
        helper.make_node("Sign", ["q"], ["sg"]),
        helper.make_node("Mul", ["m", "sg"], ["v"]),
        _const_float("lo", -128.0, TensorProto.FLOAT),
        _const_float("hi", 127.0, TensorProto.FLOAT),
        helper.make_node("Clip", ["v", "lo", "hi"], ["vc"]),
        helper.make_node("Cast", ["vc"], ["Y"], to=TensorProto.INT8),
    ]
    return helper.make_function(DOMAIN, "PoolRound", ["X"], ["Y"], nodes,
                                [helper.make_opsetid("", OPSET)],
                                attributes=["count"],
                                attribute_protos=[helper.make_attribute("rounding",
                                                                        ROUNDING_TRUNCATE)])


def functions() -> list[FunctionProto]:
    """The kernels of the `ai8x` ops as model-local functions (fresh copies)."""
    return [_output_shift_function(), _clamp_function(), _pool_round_function()]


# ---------------------------------------------------------------------------------------
# Schemas

_INT_TYPES = ["tensor(int32)", "tensor(int64)"]


def _same_shape(ctx, elem_type: int | None) -> None:
    """Inference: output shape = input shape; element type given or the input's."""
    import onnx

    in_type = ctx.get_input_type(0)
    if in_type is None:
        return
    out = onnx.TypeProto()
    out.CopyFrom(in_type)
    if elem_type is not None:
        out.tensor_type.elem_type = elem_type
    ctx.set_output_type(0, out)


def _schemas() -> list:
    """The ops as onnx OpSchemas (onnx.defs.OpSchema; imports onnx)."""
    import onnx
    from onnx import helper as onnx_helper

    S = onnx.defs.OpSchema
    A = S.Attribute
    P = S.FormalParameter
    output_shift = S(
        "OutputShift", DOMAIN, VERSION,
        "Scale an accumulator as the CNN output stage does: "
        "Y = floor(0.5 + X * 2**shift / 128), exact for |X * 2**shift / 128| < 2**52, "
        "saturated to the int32 range.",
        inputs=[P("X", "T", "accumulator (integer)")],
        outputs=[P("Y", "T", "scaled value, same type")],
        type_constraints=[("T", _INT_TYPES, "integer accumulators")],
        attributes=[
            A("shift", S.AttrType.INT,
              "final hardware output shift, including the implicit 8 - weight_bits"),
            A("weight_bits", onnx_helper.make_attribute("weight_bits", 8),
              "weight width in bits (1, 2, 4, 8; -1 binary); informational"),
        ],
    )
    clamp = S(
        "Clamp", DOMAIN, VERSION,
        "Saturate to [min, max] and convert: Y = cast(clip(X, min, max), to).",
        inputs=[P("X", "T1", "integer input")],
        outputs=[P("Y", "T2", "clamped output of type `to`")],
        type_constraints=[("T1", ["tensor(int8)", *_INT_TYPES], "integer input"),
                          ("T2", ["tensor(int8)", "tensor(int32)"], "output type")],
        attributes=[
            A("min", S.AttrType.INT, "lower bound (inclusive)"),
            A("max", S.AttrType.INT, "upper bound (inclusive)"),
            A("to", onnx_helper.make_attribute("to", TensorProto.INT8),
              "output element type (TensorProto.INT8 or INT32)"),
        ],
    )
    pool_round = S(
        "PoolRound", DOMAIN, VERSION,
        "Round the float mean of `count` int8 values the way the pooling unit does: "
        "'truncate' (the vendor's default, called floor there, is truncation toward "
        "zero) or 'nearest' (half away from zero); saturate to int8.",
        inputs=[P("X", "T", "mean of each pooling window (AveragePool output)")],
        outputs=[P("Y", "tensor(int8)", "rounded average")],
        type_constraints=[("T", ["tensor(float)"], "float mean")],
        attributes=[
            A("count", S.AttrType.INT, "number of values in each pooling window"),
            A("rounding", onnx_helper.make_attribute("rounding", ROUNDING_TRUNCATE),
              "'truncate' or 'nearest'"),
        ],
    )
    output_shift.set_type_and_shape_inference_function(lambda ctx: _same_shape(ctx, None))

    def _clamp_infer(ctx) -> None:
        to = ctx.get_attribute("to")
        _same_shape(ctx, to.i if to is not None else TensorProto.INT8)

    clamp.set_type_and_shape_inference_function(_clamp_infer)
    pool_round.set_type_and_shape_inference_function(
        lambda ctx: _same_shape(ctx, TensorProto.INT8))
    return [output_shift, clamp, pool_round]


def register_schemas() -> None:
    """Register the `ai8x` schemas with onnx (idempotent; imports onnx).

    Only onnx's checker and shape inference need them; the convert path never imports
    onnx, so this runs where those are used (custom_ops.onnx_model, the reader's
    fallback shape inference, `onnx2ai8x check`).
    """
    import onnx

    for schema in _schemas():
        try:
            onnx.defs.get_schema(schema.name, VERSION, DOMAIN)
            continue
        except onnx.defs.SchemaError:
            pass
        onnx.defs.register_schema(schema)
