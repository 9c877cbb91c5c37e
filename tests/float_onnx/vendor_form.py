"""Write a Network of integers as the vendor training repository's float export does.

Activations are scaled to [-1, 1) (code q is the float q / 128). Per layer: the pooling,
the element-wise operation or concatenation, then `Conv` / `ConvTranspose` / `Gemm`
with the integer weights as float values ("integer" form, a `-q` checkpoint) or as the
fractions W / 2**(bits-1) QAT computes ("fake-quantized" form, the fractions computed in
the graph from Round / Div / Clip of float weights), a multiplication by
`Pow(2, shift)`, the activation, and the 8-bit clamp `Clip(-1, 127/128)`. The hardware's
rounding is not in the graph. A wide (32-bit) output layer has neither the
multiplication nor the clamp. Everything here is derived from the hardware formula in
custom_ops/README.md:

    y_int = floor(0.5 + (sum(q * W) + 128 * bias_hw) * 2**T / 128)

so that with x = q / 128 and y = y_int / 128 (without the rounding)
    y = (conv(x, W_float) + B) * 2**k,   W_float = W * unit,  B = bias_hw * 2**(T - k) / 128
with unit = 1 (integer form, k = T - 7) or 2**-(bits-1) (fake-quantized form,
k = T - 8 + bits); a wide layer computes conv(x, W_float) + B with B = bias_hw * unit.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx2ai8x.network import (
    ACT_ABS,
    ACT_RELU,
    ELTWISE_ADD,
    ELTWISE_SUB,
    OP_CONV1D,
    OP_CONVTRANSPOSE2D,
    OP_LINEAR,
    OP_NONE,
    Network,
)


class _Writer:
    def __init__(self, fake_quant: bool) -> None:
        self.nodes: list = []
        self.inits: list = []
        self.fake = fake_quant
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, base: str, value, dtype=np.float32) -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def node(self, op: str, inputs: list[str], base: str, **attrs) -> str:
        out = self.name(base)
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def pool(self, lay, nd: int, t: str) -> str:
        kernel, stride = list(lay.pool[:nd]), list(lay.pool_stride[:nd])
        if kernel == [1] * nd and stride == [1] * nd:
            return t
        op = "AveragePool" if lay.pool_average else "MaxPool"
        attrs = {"kernel_shape": kernel, "strides": stride}
        if any(d > 1 for d in lay.pool_dilation[:nd]):
            attrs["dilations"] = list(lay.pool_dilation[:nd])
        return self.node(op, [t], f"{lay.name}_pool", **attrs)

    def weights(self, w: np.ndarray, bits: int, base: str) -> str:
        if not self.fake:
            return self.const(base, w.astype(np.float32))
        # QAT: float weights w * 2**-s quantized in the graph: Clip(Round(w * f) / f).
        f = float(2 ** (bits - 1))
        raw = self.const(base + "_float", (w / f).astype(np.float32))
        scaled = self.node("Mul", [raw, self.const("f", f)], base + "_mul")
        rounded = self.node("Round", [scaled], base + "_round")
        frac = self.node("Div", [rounded, self.const("f", f)], base + "_div")
        return self.node("Clip", [frac, self.const("lo", -1.0),
                                  self.const("hi", (f - 1) / f)], base + "_clip")


def write(net: Network, outputs: list[int], *, fake_quant: bool = False) -> onnx.ModelProto:
    """The float ONNX of `net` in the vendor's export form."""
    g = _Writer(fake_quant)
    produced = {-1: "x"}
    for i, lay in enumerate(net.layers):
        srcs = list(lay.in_sequences) if lay.in_sequences is not None else [i - 1]
        one_d = lay.operator == OP_CONV1D or len(net.input_shape) == 2 and \
            lay.operator == OP_NONE
        nd = 1 if one_d else 2

        ins = [produced[s] for s in srcs]
        if lay.operands > 1:
            if lay.pool_first:
                ins = [g.pool(lay, nd, t) for t in ins]
            op = {ELTWISE_ADD: "Add", ELTWISE_SUB: "Sub"}[lay.eltwise]
            t = ins[0]
            for other in ins[1:]:
                t = g.node(op, [t, other], f"{lay.name}_eltwise")
            if not lay.pool_first:
                t = g.pool(lay, nd, t)
        else:
            t = ins[0] if len(ins) == 1 else g.node("Concat", ins, f"{lay.name}_cat",
                                                     axis=1)
            t = g.pool(lay, nd, t)
        if lay.operator == OP_NONE:
            produced[i] = t
            continue
        bits = int(lay.quantization)
        unit = 2.0 ** -(bits - 1) if fake_quant else 1.0
        wide = lay.output_width == 32
        w = np.asarray(lay.weights, np.float64)
        bias_hw = np.zeros(lay.output_channels) if lay.bias_hw is None else \
            np.asarray(lay.bias_hw, np.float64)
        shift = int(lay.output_shift)
        k = 0 if wide else (shift - 7 if not fake_quant else shift - 8 + bits)
        b = bias_hw * unit if wide else bias_hw * 2.0 ** (shift - k) / 128.0
        wname = g.weights(w, bits, f"{lay.name}_w")
        bname = g.const(f"{lay.name}_b", b.astype(np.float32))
        if lay.operator == OP_LINEAR:
            t = g.node("Flatten", [t], f"{lay.name}_flatten", axis=1)
            t = g.node("Gemm", [t, wname, bname], f"{lay.name}_gemm", transB=1)
        elif lay.operator == OP_CONVTRANSPOSE2D:
            t = g.node("ConvTranspose", [t, wname, bname], f"{lay.name}_convt",
                       kernel_shape=list(w.shape[2:]), strides=list(lay.stride),
                       pads=list(lay.padding) * 2, output_padding=list(lay.output_padding),
                       group=lay.conv_groups)
        else:
            if lay.flatten:
                t = g.node("Flatten", [t], f"{lay.name}_flatten", axis=1)
                t = g.node("Gemm", [t, g.const("wf", w.reshape(w.shape[0], -1).astype(
                    np.float32)), bname], f"{lay.name}_gemm", transB=1)
            else:
                t = g.node("Conv", [t, wname, bname], f"{lay.name}_conv",
                           kernel_shape=list(w.shape[2:]), pads=list(lay.padding[:nd]) * 2,
                           dilations=list(lay.dilation[:nd]), group=lay.conv_groups)
        if not wide:
            scale = g.node("Pow", [g.const("two", 2.0), g.const("k", float(k))],
                           f"{lay.name}_scale")
            t = g.node("Mul", [t, scale], f"{lay.name}_shift")
        if lay.activation == ACT_RELU:
            t = g.node("Relu", [t], f"{lay.name}_relu")
        elif lay.activation == ACT_ABS:
            t = g.node("Abs", [t], f"{lay.name}_abs")
        if not wide:
            t = g.node("Clip", [t, g.const("lo", -1.0), g.const("hi", 127 / 128)],
                       f"{lay.name}_clamp")
        produced[i] = t
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *net.input_shape])
    outs = []
    for i in outputs:
        outs.append(helper.make_tensor_value_info(produced[i], TensorProto.FLOAT, None))
    graph = helper.make_graph(g.nodes, "vendor_export", [x], outs, g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def write_qat(model, input_shape: tuple[int, ...]) -> onnx.ModelProto:
    """An `ai8x_torch` QAT model (conv/linear layer modules in sequence, float weights)
    as the vendor's export writes it: per layer the output shift computed in the graph
    from the weights (-floor(log2(1 / max|w, b|)), clamped to [-15, 15]), the weights and
    bias scaled by 2**-shift and fake-quantized (Mul, Floor(+0.5), Div, Clip to the
    bits' fraction range), the convolution, Mul by Pow(2, shift), ReLU, Clip(-1, 127/128).
    All of it is constant arithmetic the importer must fold."""
    import torch.nn as tnn

    from ai8x_torch.modules import QuantizationAwareModule

    g = _Writer(fake_quant=False)
    t = "x"
    layers = [m for m in model.modules() if isinstance(m, QuantizationAwareModule)]
    for k, m in enumerate(layers):
        name = f"layer{k}"
        if m.pool is not None:
            t = g.node("MaxPool", [t], f"{name}_pool",
                       kernel_shape=list(m.pool.kernel_size) if isinstance(
                           m.pool.kernel_size, tuple) else [m.pool.kernel_size] * 2,
                       strides=list(m.pool.stride) if isinstance(m.pool.stride, tuple)
                       else [m.pool.stride] * 2)
        bits = int(m.weight_bits.flatten()[0]) or 8
        f = float(2 ** (bits - 1))
        w = g.const(f"{name}_wf", m.op.weight.detach().numpy())
        has_bias = m.op.bias is not None
        b = g.const(f"{name}_bf", m.op.bias.detach().numpy()) if has_bias else None
        flat = g.const("flat", [-1], np.int64)
        parts = [g.node("Reshape", [w, flat], "rw")]
        if has_bias:
            parts.append(g.node("Reshape", [b, flat], "rb"))
        params = g.node("Concat", parts, "params", axis=0)
        peak = g.node("ReduceMax", [g.node("Abs", [params], "abs")], "peak", keepdims=0)
        log2 = g.node("Div", [g.node("Log", [g.node("Reciprocal", [peak], "inv")], "ln"),
                              g.const("ln2", np.log(2.0))], "log2")
        shift = g.node("Clip", [g.node("Neg", [g.node("Floor", [log2], "floor")], "neg"),
                                g.const("smin", -15.0), g.const("smax", 15.0)], "shift")
        wscale = g.node("Pow", [g.const("two", 2.0), g.node("Neg", [shift], "nshift")],
                        "wscale")

        def fake(v: str, base: str, wscale=wscale, f=f) -> str:
            scaled = g.node("Mul", [g.node("Mul", [v, wscale], base + "_s"),
                                    g.const("f", f)], base + "_f")
            rounded = g.node("Floor", [g.node("Add", [scaled, g.const("half", 0.5)],
                                              base + "_h")], base + "_round")
            frac = g.node("Div", [rounded, g.const("f", f)], base + "_q")
            return g.node("Clip", [frac, g.const("lo", -1.0),
                                   g.const("hi", (f - 1) / f)], base + "_clamp")

        wq = fake(w, f"{name}_w")
        bq = [fake(b, f"{name}_b")] if has_bias else []
        if isinstance(m.op, tnn.Linear):
            t = g.node("Flatten", [t], f"{name}_flatten", axis=1)
            t = g.node("Gemm", [t, wq, *bq], f"{name}_gemm", transB=1)
        else:
            pad = m.op.padding[0]
            t = g.node("Conv", [t, wq, *bq], f"{name}_conv",
                       kernel_shape=list(m.op.kernel_size), pads=[pad] * 4)
        if not m.wide:
            t = g.node("Mul", [t, g.node("Pow", [g.const("two", 2.0), shift], "oscale")],
                       f"{name}_shift")
            if m.activation == "ReLU":
                t = g.node("Relu", [t], f"{name}_relu")
            t = g.node("Clip", [t, g.const("lo", -1.0), g.const("hi", 127 / 128)],
                       f"{name}_clamp")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *input_shape])
    y = helper.make_tensor_value_info(t, TensorProto.FLOAT, None)
    graph = helper.make_graph(g.nodes, "qat_export", [x], [y], g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
