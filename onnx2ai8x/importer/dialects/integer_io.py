"""Integer model inputs and outputs (issue 34 item 3): TFLite full-integer models with
`inference_input_type = tf.int8` (through `tf2onnx --tflite`), QOperator models whose
graph input is integer.

The file states the input's grid: its readers dequantize it with a scale s and a zero
point z. The accelerator's input is int8 too, with zero meaning zero (its padding writes
zeros). So the file's codes q are the accelerator's codes exactly when z = 0 and the
type is int8: the model then computes x = s * q, and the rewrite says so in float ONNX
(a float input of the same name holding the codes, `Mul` by s, `QuantizeLinear` on the
same grid). The front end folds the `Mul` into the input mapping, whose scale becomes 1:
`onnx2ai8x run` and the sample input take the file's own int8 codes unchanged.

A zero point other than 0 moves the codes: q - z leaves the int8 range (TFLite's
[0, 1) inputs have z = -128), and keeping q as it is would change the first layer's zero
padding from x = 0 to x = -s * z. Neither is exact, so such an input is refused with the
converter setting that keeps a float input.

Integer outputs (a graph output written by `QuantizeLinear`) get a `DequantizeLinear` on
their own grid: the model's output is then s_o * (q_o - z_o), which `quantized_output`
turns back into the file's codes.
"""
from __future__ import annotations

import numpy as np

from ... import onnxpb
from ...errors import Ai8xError

KEY_OUTPUT_QUANT = "ai8x.source_output_quant"
_INTEGER = {onnxpb.TensorProto.INT8: (-128, 127), onnxpb.TensorProto.UINT8: (0, 255)}
# the integer operand of each reader and where its scale and zero point are
_OPERANDS = {"DequantizeLinear": (0,), "QLinearConv": (0,), "QLinearMatMul": (0, 3),
             "QGemm": (0, 3), "QLinearAdd": (0, 3), "QLinearMul": (0, 3),
             "QLinearGlobalAveragePool": (0,), "QLinearAveragePool": (0,),
             "QLinearSigmoid": (0,), "QLinearLeakyRelu": (0,), "QLinearSoftmax": (0,)}
FLOAT_IO_HINT = ("export the model with a float input and output: TFLite's converter "
                 "without `inference_input_type` / `inference_output_type` (its default "
                 "float32), or onnxruntime's quantize_static on the float model (it keeps "
                 "the float input)")


def _fail(where: str, message: str, hint: str = FLOAT_IO_HINT) -> Ai8xError:
    return Ai8xError("float.input-type", where, message, hint)


def _consts(model) -> dict:
    vals = {i.name: i for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.attribute:
            vals[n.output[0]] = n.attribute[0].t
    return vals


def _grid(model, tensor: str, readers: list, where: str) -> tuple[float, int]:
    """(scale, zero point) every reader of `tensor` dequantizes it with."""
    consts = _consts(model)
    grids = set()
    for node in readers:
        slots = [k for k in _OPERANDS.get(node.op_type, ()) if k < len(node.input)
                 and node.input[k] == tensor]
        if not slots:
            raise _fail(where, f"the integer input is read by {node.op_type} "
                        f"{node.name or node.output[0]}, which states no scale for it")
        for k in slots:
            names = [node.input[k + j] if k + j < len(node.input) else "" for j in (1, 2)]
            if not names[0] or names[0] not in consts or (names[1] and
                                                          names[1] not in consts):
                raise _fail(where, "the integer input's scale or zero point is not a "
                            "constant")
            s = onnxpb.to_array(consts[names[0]]).reshape(-1)
            z = onnxpb.to_array(consts[names[1]]).reshape(-1) if names[1] else \
                np.zeros(1, np.int64)
            if s.size != 1 or z.size != 1 or not float(s[0]) > 0 or \
                    not np.isfinite(float(s[0])):
                raise _fail(where, "the integer input has per-channel or non-positive "
                            "scales")
            grids.add((float(s[0]), int(z[0])))
    if len(grids) != 1:
        raise _fail(where, f"the integer input is read on {len(grids)} different grids")
    return grids.pop()


_MOVERS = ("Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity")


def _through_movers(model, name: str) -> tuple[str, list]:
    """The tensor that carries the input's codes to their dequantizing readers past ops
    that only move them (tf2onnx's Transpose to channels-first), and those readers."""
    while True:
        readers = [n for n in model.graph.node if name in n.input]
        if len(readers) == 1 and readers[0].op_type in _MOVERS and \
                readers[0].input[0] == name:
            name = readers[0].output[0]
            continue
        return name, readers


def float_input(model, inp, where: str):
    """`model` (onnxpb, edited in place and returned) with its integer input `inp`
    taken as float codes, or an Ai8xError when the codes are not the accelerator's."""
    tt = inp.type.tensor_type
    name = inp.name
    if tt.elem_type not in _INTEGER:
        raise _fail(where, f"the input is {onnxpb.TensorProto.DataType.Name(tt.elem_type)}"
                    ", not float32 or int8", "export the float model (quantization is "
                    "done here)")
    readers = [n for n in model.graph.node if name in n.input]
    if not readers:
        raise _fail(where, "the integer input is read by no node")
    s, z = _grid(model, *_through_movers(model, name), where)
    kind = onnxpb.TensorProto.DataType.Name(tt.elem_type)
    if tt.elem_type != onnxpb.TensorProto.INT8 or z != 0:
        raise _fail(where, f"the input is {kind} with zero point {z} (scale {s:.6g}): its "
                    "codes q stand for s * (q - z), and q - z leaves the accelerator's "
                    "int8 range (whose zero is the first layer's padding), so the file's "
                    "integer input cannot be taken exactly")
    codes = f"{name}__codes"
    for n in readers:
        n.input[:] = [codes if i == name else i for i in n.input]
    scale, zero = f"{name}__scale", f"{name}__zero"
    model.graph.initializer.append(onnxpb.from_array(np.asarray(s, np.float32), scale))
    model.graph.initializer.append(onnxpb.from_array(np.asarray(0, np.int8), zero))
    nodes = [onnxpb.make_node("Mul", [name, scale], [f"{name}__value"],
                              name=f"{name}__from_codes"),
             onnxpb.make_node("QuantizeLinear", [f"{name}__value", scale, zero], [codes],
                              name=f"{name}__to_codes")]
    rest = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend([*nodes, *rest])
    tt.elem_type = onnxpb.TensorProto.FLOAT
    return model


def float_outputs(model) -> dict[str, tuple[float, int]]:
    """Each integer graph output of `model` (onnxpb, edited in place) dequantized on the
    grid its QuantizeLinear states; returns output name -> (scale, zero point)."""
    producer = {o: n for n in model.graph.node for o in n.output}
    consts = _consts(model)
    found: dict[str, tuple[float, int]] = {}
    for out in model.graph.output:
        tt = out.type.tensor_type
        node = producer.get(out.name)
        if tt.elem_type not in _INTEGER or node is None or \
                node.op_type != "QuantizeLinear" or len(node.input) < 2 or \
                node.input[1] not in consts:
            continue
        s = onnxpb.to_array(consts[node.input[1]]).reshape(-1)
        z = onnxpb.to_array(consts[node.input[2]]).reshape(-1) \
            if len(node.input) > 2 and node.input[2] in consts else np.zeros(1, np.int64)
        if s.size != 1 or z.size != 1:
            continue
        codes = f"{out.name}__codes"
        node.output[:] = [codes if o == out.name else o for o in node.output]
        for n in model.graph.node:
            n.input[:] = [codes if i == out.name else i for i in n.input]
        model.graph.node.append(onnxpb.make_node(
            "DequantizeLinear", [codes, *node.input[1:3]], [out.name],
            name=f"{out.name}__from_codes"))
        tt.elem_type = onnxpb.TensorProto.FLOAT
        found[out.name] = (float(s[0]), int(z[0]))
    return found


def quantized_output(y: np.ndarray, grid: tuple[float, int], kind: str = "int8"
                     ) -> np.ndarray:
    """A float output (the converted model's, in the model's units) as the source's
    integer codes: round half to even of y / s, plus z, clamped (ONNX QuantizeLinear)."""
    s, z = grid
    lo, hi = (-128, 127) if kind == "int8" else (0, 255)
    return np.clip(np.rint(np.asarray(y, np.float64) / s) + z, lo, hi).astype(
        np.int8 if kind == "int8" else np.uint8)


__all__ = ["FLOAT_IO_HINT", "float_input", "float_outputs", "quantized_output"]
