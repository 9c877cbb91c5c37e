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


_WEIGHTED = {"Conv": 0, "Gemm": 0, "MatMul": 0}  # op -> the data operand


def _fold_zero_point(model, carrier: str, dequantizers: list, z: int) -> str | None:
    """Take the codes q themselves where the input's zero point z only shifts what the
    first weight layers add up: w * s * (q - z) = w * s * q - s * z * sum(w), exact in
    the file's own integers when each dequantized input reaches only convolutions
    without zero padding or dense layers (through moves of its values) whose integer
    bias is on the grid s * s_w (TFLite's rule): that bias loses z * sum(w_q) per output
    channel and the input's zero point becomes 0 (the model is edited only when every
    reader qualifies). None when done, else why not."""
    consts = _consts(model)
    producer = {o: n for n in model.graph.node for o in n.output}
    edits = []
    for dq in dequantizers:
        if dq.op_type != "DequantizeLinear":
            return f"is read by {dq.op_type} {dq.name}"
        scale = float(onnxpb.to_array(consts[dq.input[1]]).reshape(-1)[0])
        for layer, read in _readers_past_movers(model, dq.output[0]):
            if read != layer.input[0] or read in layer.input[1:]:
                return f"its value is read by {layer.op_type} {layer.name} as a parameter"
            edit = _bias_edit(layer, producer, consts, z, scale)
            if isinstance(edit, str):
                return edit
            edits.append(edit)
    added = []
    for layer, bias_dq, values in edits:
        node = _apply(model, layer, bias_dq, values)
        if node is not None:
            added.append((layer, node))
    for k, dq in enumerate(dequantizers):
        zero = f"{carrier}__zero{k}"
        model.graph.initializer.append(onnxpb.from_array(np.zeros((), np.int8), zero))
        if len(dq.input) > 2:
            dq.input[2] = zero
        else:
            dq.input.append(zero)
    _insert_after(model, added)
    return None


def _readers_past_movers(model, tensor: str) -> list:
    """(node, the tensor it reads) for each reader of `tensor`'s values past moves."""
    readers = [n for n in model.graph.node if tensor in n.input]
    found = []
    for r in readers:
        if r.op_type in _MOVERS and r.input[0] == tensor:
            found += _readers_past_movers(model, r.output[0])
        else:
            found.append((r, tensor))
    return found


def _bias_edit(layer, producer: dict, consts: dict, z: int, s: float):
    """(layer, bias tensor, corrected int32 bias) for one weight layer reading the
    dequantized input (scale `s`), or why it cannot take the zero point."""
    what = f"{layer.op_type} {layer.name or layer.output[0]}"
    if layer.op_type not in _WEIGHTED:
        return f"its value is read by {what}, not by a convolution or dense layer"
    if layer.op_type == "Conv":
        pads = next((list(a.ints) for a in layer.attribute if a.name == "pads"), [])
        auto = next((a.s for a in layer.attribute if a.name == "auto_pad"), b"NOTSET")
        if any(pads) or auto not in (b"NOTSET", b"VALID"):
            return (f"the first layer {what} pads its input with zeros (x = 0 is code "
                    f"{z}, the accelerator pads with code 0)")
    if layer.op_type == "Gemm" and any(
            a.name in ("transA", "alpha", "beta") and (a.i if a.name == "transA"
                                                       else a.f != 1.0)
            for a in layer.attribute):
        return f"{what} scales or transposes its operands"
    bias = layer.input[2] if len(layer.input) > 2 else ""
    if layer.op_type == "MatMul":
        bias = _added_bias(layer, producer)
    w_dq = producer.get(layer.input[1])
    if w_dq is None or w_dq.op_type != "DequantizeLinear" or w_dq.input[0] not in consts:
        return f"the first layer {what} has no integer weights"
    sums = _weight_sums(layer, w_dq, consts)
    w_scale = onnxpb.to_array(consts[w_dq.input[1]]).astype(np.float64).reshape(-1)
    b_dq = producer.get(bias) if bias else None
    before = 0.0 if b_dq is None or b_dq.input[0] not in consts else \
        onnxpb.to_array(consts[b_dq.input[0]]).astype(np.float64) * \
        onnxpb.to_array(consts[b_dq.input[1]]).astype(np.float64).reshape(-1)
    s_y = _output_scale(layer, producer, consts)
    folded = np.abs(before - z * s * w_scale * sums)
    if s_y is None or folded.max(initial=0.0) / s_y > BIAS_CODES:
        # the accelerator's bias is 8 bits in output units (seed 000, "Bias"): a larger
        # share would be clipped, silently
        return (f"the first layer {what} would need a bias of "
                f"{folded.max(initial=0.0) / s_y if s_y else float('inf'):.0f} output "
                f"codes to take the zero point, beyond the accelerator's 8-bit bias")
    if not bias:
        # no bias: one is added holding the zero point's share in float
        return layer, None, (-z * s * w_scale * sums).astype(np.float32)
    if b_dq is None or b_dq.op_type != "DequantizeLinear" or b_dq.input[0] not in consts:
        return f"the first layer {what}'s bias is not integer"
    b = onnxpb.to_array(consts[b_dq.input[0]]).astype(np.int64)
    if b.shape != sums.shape or (len(b_dq.input) > 2 and b_dq.input[2] in consts and
                                 np.any(onnxpb.to_array(consts[b_dq.input[2]]))):
        return f"the first layer {what}'s bias is not one integer per output"
    b_scale = onnxpb.to_array(consts[b_dq.input[1]]).astype(np.float64).reshape(-1)
    if not np.allclose(s * w_scale, b_scale, rtol=1e-5, atol=0):
        return (f"the first layer {what}'s bias is not on the grid input scale x weight "
                "scale, so the zero point's share is not a whole number of its units")
    new = b - z * sums
    if np.abs(new).max(initial=0) >= 2 ** 31:
        return f"the first layer {what}'s bias would leave int32"
    return layer, b_dq, new.astype(np.int32)


BIAS_CODES = 127


def _output_scale(layer, producer: dict, consts: dict) -> float | None:
    """The scale of the grid the layer's output is quantized on: the first
    QuantizeLinear after it, past its bias Add and activation (None: none)."""
    readers: dict[str, list] = {}
    for n in {id(n): n for n in producer.values()}.values():
        for i in n.input:
            readers.setdefault(i, []).append(n)
    out = layer.output[0]
    for _ in range(4):
        nxt = readers.get(out, [])
        if len(nxt) != 1:
            return None
        if nxt[0].op_type == "QuantizeLinear" and nxt[0].input[1] in consts:
            return float(onnxpb.to_array(consts[nxt[0].input[1]]).reshape(-1)[0])
        if nxt[0].op_type not in ("Add", "Relu", "Clip"):
            return None
        out = nxt[0].output[0]
    return None


def _weight_sums(layer, w_dq, consts: dict) -> np.ndarray:
    """Per output: the sum of the layer's integer weights (less their zero points)."""
    w = onnxpb.to_array(consts[w_dq.input[0]]).astype(np.int64)
    if len(w_dq.input) > 2 and w_dq.input[2] in consts:
        wz = onnxpb.to_array(consts[w_dq.input[2]]).astype(np.int64)
        axis = next((a.i for a in w_dq.attribute if a.name == "axis"), 1)
        w = w - (wz.reshape([-1 if k == axis % w.ndim else 1 for k in range(w.ndim)])
                 if wz.size > 1 else wz.reshape(()))
    if layer.op_type == "Conv":
        return w.reshape(w.shape[0], -1).sum(axis=1)
    trans_b = any(a.name == "transB" and a.i for a in layer.attribute)
    return w.sum(axis=1) if trans_b else w.sum(axis=0)


def _apply(model, layer, bias_dq, values):
    """Write one layer's corrected bias: the integer bias replaced, or a float bias
    added (as the layer's bias input, or an Add after a MatMul)."""
    if bias_dq is not None:
        new = f"{bias_dq.input[0]}__zero_point_folded"
        model.graph.initializer.append(onnxpb.from_array(values, new))
        bias_dq.input[0] = new
        return None
    name = f"{layer.name or layer.output[0]}__zero_point_bias"
    model.graph.initializer.append(onnxpb.from_array(values, name))
    if layer.op_type != "MatMul":
        layer.input.append(name)
        return None
    out = layer.output[0]
    layer.output[0] = f"{out}__product"
    return onnxpb.make_node("Add", [layer.output[0], name], [out], name=f"{name}__add")


def _insert_after(model, added: list) -> None:
    """Each (node, new node) of `added` placed right after that node (the list is
    rebuilt once, after every edit of the nodes it holds: extend copies them)."""
    after = {id(n): new for n, new in added}
    nodes = []
    for n in model.graph.node:
        nodes.append(n)
        if id(n) in after:
            nodes.append(after[id(n)])
    copies = [onnxpb.NodeProto() for _ in nodes]
    for c, n in zip(copies, nodes, strict=True):
        c.CopyFrom(n)
    del model.graph.node[:]
    model.graph.node.extend(copies)


def _added_bias(layer, producer: dict) -> str:
    """The bias tf2onnx adds after a MatMul (TFLite's FullyConnected): the other operand
    of the one Add reading the MatMul's output, when a DequantizeLinear writes it."""
    out = layer.output[0]
    readers = [n for n in producer.values() if out in n.input]
    readers = list({id(n): n for n in readers}.values())
    if len(readers) != 1 or readers[0].op_type != "Add":
        return ""
    other = [i for i in readers[0].input if i != out]
    found = producer.get(other[0]) if len(other) == 1 else None
    return other[0] if found is not None and found.op_type == "DequantizeLinear" else ""


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
    carrier, dequantizers = _through_movers(model, name)
    s, z = _grid(model, carrier, dequantizers, where)
    kind = onnxpb.TensorProto.DataType.Name(tt.elem_type)
    why = f"the input is {kind} with zero point {z} (scale {s:.6g})" if \
        tt.elem_type != onnxpb.TensorProto.INT8 or z != 0 else ""
    if why and tt.elem_type == onnxpb.TensorProto.INT8:
        blocked = _fold_zero_point(model, carrier, dequantizers, z)
        why = "" if blocked is None else f"{why} and {blocked}"
    if why:
        raise _fail(where, f"{why}: its codes q stand for s * (q - z); q - z leaves the "
                    "accelerator's int8 range, and q itself would move the first layer's "
                    "zero padding from x = 0 to x = -s * z, so the file's integer input "
                    "cannot be taken exactly")
    codes = f"{name}__codes"
    readers = [n for n in model.graph.node if name in n.input]  # (after the fold)
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
        while node is not None and node.op_type in _MOVERS:
            node = producer.get(node.input[0])  # (tf2onnx's Transpose back to NHWC)
        if tt.elem_type not in _INTEGER or node is None or \
                node.op_type != "QuantizeLinear" or len(node.input) < 2 or \
                node.input[1] not in consts:
            continue
        s = onnxpb.to_array(consts[node.input[1]]).reshape(-1)
        z = onnxpb.to_array(consts[node.input[2]]).reshape(-1) \
            if len(node.input) > 2 and node.input[2] in consts else \
            np.zeros(1, np.int8 if tt.elem_type == onnxpb.TensorProto.INT8 else np.uint8)
        if s.size != 1 or z.size != 1:
            continue
        node = producer[out.name]  # the output's own writer (the grid's or a move)
        codes = f"{out.name}__codes"
        node.output[:] = [codes if o == out.name else o for o in node.output]
        for n in model.graph.node:
            n.input[:] = [codes if i == out.name else i for i in n.input]
        grid = [onnxpb.from_array(np.asarray(s[0], np.float32), f"{out.name}__scale"),
                onnxpb.from_array(z.reshape(()), f"{out.name}__zero")]
        model.graph.initializer.extend(grid)
        model.graph.node.append(onnxpb.make_node(
            "DequantizeLinear", [codes, *(g.name for g in grid)], [out.name],
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
