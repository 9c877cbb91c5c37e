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

import onnx
from onnx import TensorProto, helper

DOMAIN = "ai8x"
VERSION = 1
OPSET = 19

# The accumulator is divided by 128 before the output shift (vendor izer/simulate.py:
# `acc / (128 / 2**output_shift)`), so an `OutputShift` of 7 leaves it unchanged.
ACC_DIVISOR = 128

ROUNDING_TRUNCATE = "truncate"
ROUNDING_NEAREST = "nearest"


def _attr_ref(name: str, ref: str, attr_type: int) -> onnx.AttributeProto:
    """An attribute of a function-body node that takes the calling node's `ref`."""
    attr = onnx.AttributeProto()
    attr.name = name
    attr.ref_attr_name = ref
    attr.type = attr_type
    return attr


def _const_from_attr(out: str, ref: str, kind: str = "value_int") -> onnx.NodeProto:
    node = helper.make_node("Constant", [], [out])
    attr_type = {"value_int": onnx.AttributeProto.INT,
                 "value_string": onnx.AttributeProto.STRING}[kind]
    node.attribute.append(_attr_ref(kind, ref, attr_type))
    return node


def _const_int(out: str, value: int, dtype: int = TensorProto.INT64) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [out],
                            value=helper.make_tensor(out, dtype, [], [value]))


def _pow2(out: str, exponent: str) -> list[onnx.NodeProto]:
    """`out` = 2**exponent as int64, exponent a non-negative int64 scalar (exact)."""
    return [
        _const_int(f"{out}_one", 1, TensorProto.UINT64),
        helper.make_node("Cast", [exponent], [f"{out}_e"], to=TensorProto.UINT64),
        helper.make_node("BitShift", [f"{out}_one", f"{out}_e"], [f"{out}_u"],
                         direction="LEFT"),
        helper.make_node("Cast", [f"{out}_u"], [out], to=TensorProto.INT64),
    ]


def _floor_div(out: str, num: str, den: str) -> list[onnx.NodeProto]:
    """`out` = floor(num / den) for int64 tensors and den > 0.

    `Mod` with fmod=0 takes the sign of the divisor, so num - mod is an exact multiple
    of den and the division is exact whatever rounding `Div` uses for integers.
    """
    return [
        helper.make_node("Mod", [num, den], [f"{out}_r"], fmod=0),
        helper.make_node("Sub", [num, f"{out}_r"], [f"{out}_m"]),
        helper.make_node("Div", [f"{out}_m", den], [out]),
    ]


def _clip(out: str, x: str, lo: str, hi: str) -> list[onnx.NodeProto]:
    """`out` = min(max(x, lo), hi) on int64, by comparisons.

    Not `Clip`/`Min`/`Max`: onnxruntime 1.31 gets them wrong on int64 values beyond the
    int32 range (Min(4294967294, 2147483647) returned 4294967294; found by
    tests/custom_ops/test_ops.py). Less/Greater/Where are exact.
    """
    return [helper.make_node("Less", [x, lo], [f"{out}_below"]),
            helper.make_node("Where", [f"{out}_below", lo, x], [f"{out}_lo"]),
            helper.make_node("Greater", [f"{out}_lo", hi], [f"{out}_above"]),
            helper.make_node("Where", [f"{out}_above", hi, f"{out}_lo"], [out])]


def _output_shift_function() -> onnx.FunctionProto:
    # Y = floor(0.5 + X * 2**shift / 128), written for integers as
    # floor((X * 2**p + 64 * 2**q) / (128 * 2**q)) with p = max(shift, 0), q = max(-shift, 0).
    nodes = [
        helper.make_node("Cast", ["X"], ["x"], to=TensorProto.INT64),
        _const_from_attr("s", "shift"),
        _const_int("zero", 0),
        helper.make_node("Max", ["s", "zero"], ["p"]),
        helper.make_node("Neg", ["s"], ["ns"]),
        helper.make_node("Max", ["ns", "zero"], ["q"]),
        *_pow2("pp", "p"),
        *_pow2("qq", "q"),
        _const_int("half", ACC_DIVISOR // 2),
        _const_int("div", ACC_DIVISOR),
        helper.make_node("Mul", ["x", "pp"], ["xs"]),
        helper.make_node("Mul", ["half", "qq"], ["hq"]),
        helper.make_node("Add", ["xs", "hq"], ["num"]),
        helper.make_node("Mul", ["div", "qq"], ["den"]),
        *_floor_div("y", "num", "den"),
        # Saturate to int32 so the cast back is exact; the int8 clamp that follows
        # (or the 32-bit output register) cannot tell the difference.
        _const_int("lo", -(2 ** 31)),
        _const_int("hi", 2 ** 31 - 1),
        *_clip("yc", "y", "lo", "hi"),
        helper.make_node("CastLike", ["yc", "X"], ["Y"]),
    ]
    return helper.make_function(DOMAIN, "OutputShift", ["X"], ["Y"], nodes,
                                [helper.make_opsetid("", OPSET)],
                                attributes=["shift"],
                                attribute_protos=[helper.make_attribute("weight_bits", 8)])


def _clamp_function() -> onnx.FunctionProto:
    nodes = [
        helper.make_node("Cast", ["X"], ["x"], to=TensorProto.INT64),
        _const_from_attr("lo", "min"),
        _const_from_attr("hi", "max"),
        *_clip("y", "x", "lo", "hi"),
    ]
    cast = helper.make_node("Cast", ["y"], ["Y"])
    cast.attribute.append(_attr_ref("to", "to", onnx.AttributeProto.INT))
    nodes.append(cast)
    return helper.make_function(DOMAIN, "Clamp", ["X"], ["Y"], nodes,
                                [helper.make_opsetid("", OPSET)],
                                attributes=["min", "max"],
                                attribute_protos=[helper.make_attribute("to", TensorProto.INT8)])


def _pool_round_function() -> onnx.FunctionProto:
    # X is the float mean of `count` int8 values. X * count recovers the exact integer
    # window sum (|sum| <= 256 * 128 is far inside float32's exact range, and the mean's
    # relative error of ~1e-7 moves it by < 0.01), then integer division rounds it.
    nodes = [
        _const_from_attr("n", "count"),
        helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["X", "nf"], ["sf"]),
        helper.make_node("Round", ["sf"], ["sr"]),
        helper.make_node("Cast", ["sr"], ["s"], to=TensorProto.INT64),
        _const_int("zero", 0),
        _const_int("two", 2),
        helper.make_node("Less", ["s", "zero"], ["neg"]),
        helper.make_node("Abs", ["s"], ["a"]),
        # truncate: |s| div n (both non-negative, so every integer division agrees)
        *_floor_div("t", "a", "n"),
        # nearest, half away from zero: (2|s| + n) div 2n
        helper.make_node("Mul", ["a", "two"], ["a2"]),
        helper.make_node("Add", ["a2", "n"], ["a2n"]),
        helper.make_node("Mul", ["n", "two"], ["n2"]),
        *_floor_div("r", "a2n", "n2"),
        _const_from_attr("mode", "rounding", "value_string"),
        helper.make_node("Constant", [], ["nearest"],
                         value=helper.make_tensor("nearest", TensorProto.STRING, [],
                                                  [ROUNDING_NEAREST.encode()])),
        helper.make_node("Equal", ["mode", "nearest"], ["is_nearest"]),
        helper.make_node("Where", ["is_nearest", "r", "t"], ["m"]),
        helper.make_node("Neg", ["m"], ["nm"]),
        helper.make_node("Where", ["neg", "nm", "m"], ["v"]),
        _const_int("lo", -128),
        _const_int("hi", 127),
        *_clip("vc", "v", "lo", "hi"),
        helper.make_node("Cast", ["vc"], ["Y"], to=TensorProto.INT8),
    ]
    return helper.make_function(DOMAIN, "PoolRound", ["X"], ["Y"], nodes,
                                [helper.make_opsetid("", OPSET)],
                                attributes=["count"],
                                attribute_protos=[helper.make_attribute("rounding",
                                                                        ROUNDING_TRUNCATE)])


def functions() -> list[onnx.FunctionProto]:
    """The kernels of the `ai8x` ops as model-local functions (fresh copies)."""
    return [_output_shift_function(), _clamp_function(), _pool_round_function()]


# ---------------------------------------------------------------------------------------
# Schemas

_INT_TYPES = ["tensor(int32)", "tensor(int64)"]


def _same_shape(ctx, elem_type: int | None) -> None:
    """Inference: output shape = input shape; element type given or the input's."""
    in_type = ctx.get_input_type(0)
    if in_type is None:
        return
    out = onnx.TypeProto()
    out.CopyFrom(in_type)
    if elem_type is not None:
        out.tensor_type.elem_type = elem_type
    ctx.set_output_type(0, out)


def _schemas() -> list[onnx.defs.OpSchema]:
    S = onnx.defs.OpSchema
    A = S.Attribute
    P = S.FormalParameter
    output_shift = S(
        "OutputShift", DOMAIN, VERSION,
        "Scale an accumulator as the CNN output stage does: "
        "Y = floor(0.5 + X * 2**shift / 128), exact, saturated to the int32 range.",
        inputs=[P("X", "T", "accumulator (integer)")],
        outputs=[P("Y", "T", "scaled value, same type")],
        type_constraints=[("T", _INT_TYPES, "integer accumulators")],
        attributes=[
            A("shift", S.AttrType.INT,
              "final hardware output shift, including the implicit 8 - weight_bits"),
            A("weight_bits", helper.make_attribute("weight_bits", 8),
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
            A("to", helper.make_attribute("to", TensorProto.INT8),
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
            A("rounding", helper.make_attribute("rounding", ROUNDING_TRUNCATE),
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
    """Register the `ai8x` schemas with onnx (idempotent)."""
    for schema in _schemas():
        try:
            onnx.defs.get_schema(schema.name, VERSION, DOMAIN)
            continue
        except onnx.defs.SchemaError:
            pass
        onnx.defs.register_schema(schema)
