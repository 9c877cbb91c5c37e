"""CPU ops as standard integer ONNX (opset 19): the file stays the bit-exact contract.

`nodes(op)` gives the nodes and initializers of one op; `model(segment)` a whole model
whose inputs and outputs carry a leading batch dimension `N`. Only exact integer kernels
are used (ConvInteger, MatMulInteger, int64 Mul/Add/Mod/Div, Gather, MaxPool on int8),
so a stock onnxruntime computes exactly what `reference.py` defines (README). Every
internal tensor is named `<op name>/<role>`.
"""
from __future__ import annotations

import numpy as np

from onnx2ai8x import onnxpb as helper
from onnx2ai8x.onnxpb import ModelProto, NodeProto, TensorProto

from . import ops as K
from .ops import CpuOp, Segment

OPSET = 19
IR_VERSION = 9
BATCH = "N"


class _Nodes:
    """Collects one op's nodes and initializers under the op's name."""

    def __init__(self, op: CpuOp) -> None:
        self.op = op
        self.nodes: list[NodeProto] = []
        self.inits: list[TensorProto] = []

    def name(self, role: str) -> str:
        return f"{self.op.name}/{role}"

    def const(self, role: str, array) -> str:
        name = self.name(role)
        self.inits.append(helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(self, op_type: str, inputs, role: str, out: str | None = None, **attrs) -> str:
        out = out or self.name(role)
        self.nodes.append(helper.make_node(op_type, list(inputs), [out],
                                           name=self.name(role), **attrs))
        return out

    def i64(self, x: str, role: str) -> str:
        return self.node("Cast", [x], role, to=TensorProto.INT64)

    def requantize(self, p: str, m: np.ndarray | None, s: np.ndarray, lo: int, hi: int,
                   shape: tuple[int, ...] = (1,)) -> str:
        """clamp(floor((p * M + 2**(s-1)) / 2**s)) -> the op's int8 output. Floor
        division is q - Mod(q, d) (Mod with a positive divisor is never negative) divided
        exactly by d: onnxruntime's integer Div truncates toward zero."""
        if m is not None:
            p = self.node("Mul", [p, self.const("multiplier", m.reshape(shape))], "scaled")
        d = np.left_shift(np.int64(1), s)
        half = np.where(s > 0, d >> 1, 0).astype(np.int64)
        q = self.node("Add", [p, self.const("half", half.reshape(shape))], "rounded")
        dn = self.const("divisor", d.reshape(shape))
        r = self.node("Mod", [q, dn], "remainder", fmod=0)
        fl = self.node("Div", [self.node("Sub", [q, r], "floored"), dn], "quotient")
        lo_t = self.const("lo", np.array(lo, dtype=np.int64))
        hi_t = self.const("hi", np.array(hi, dtype=np.int64))
        c = self.node("Clip", [fl, lo_t, hi_t], "clamped")
        return self.node("Cast", [c], "output", out=self.op.output, to=TensorProto.INT8)


def _chan_shape(op: CpuOp, n: int) -> tuple[int, ...]:
    """Broadcast shape of a per-channel vector of length n over (N, *out_shape)."""
    return (n,) + (1,) * (len(op.out_shape) - 1)


def _conv(b: _Nodes) -> None:
    op = b.op
    acc = b.node("ConvInteger", [op.inputs[0], b.const("weights", op.weights)], "conv",
                 strides=list(op.strides), pads=list(op.pads),
                 dilations=list(op.dilations), group=op.group)
    cout = op.out_shape[0]
    p = b.node("Add", [b.i64(acc, "acc64"),
                       b.const("bias", op.bias.astype(np.int64).reshape(_chan_shape(op, cout)))],
               "biased")
    b.requantize(p, op.multiplier, op.shift, op.act_min, op.act_max,
                 _chan_shape(op, op.multiplier.size))


def _dense(b: _Nodes) -> None:
    op = b.op
    flat = b.node("Flatten", [op.inputs[0]], "flatten", axis=1)
    acc = b.node("MatMulInteger", [flat, b.const("weights", op.weights.T)], "matmul")
    p = b.node("Add", [b.i64(acc, "acc64"), b.const("bias", op.bias.astype(np.int64))],
               "biased")
    b.requantize(p, op.multiplier, op.shift, op.act_min, op.act_max, (op.multiplier.size,))


def _pool_attrs(op: CpuOp) -> dict:
    return {"strides": list(op.strides), "pads": list(op.pads),
            "dilations": list(op.dilations)}


def _maxpool(b: _Nodes) -> None:
    op = b.op
    nd = len(op.kernel)
    attrs = _pool_attrs(op)
    x = op.inputs[0]
    if any(p >= op.kernel[a % nd] for a, p in enumerate(op.pads)):
        # onnxruntime refuses MaxPool pads >= kernel (a dilated window may still reach
        # real values): pad with -128 first, which is never above a real value, and
        # every window holds one (ops.maxpool checks it).
        pads = np.array([0, 0, *op.pads[:nd], 0, 0, *op.pads[nd:]], dtype=np.int64)
        x = b.node("Pad", [x, b.const("pads", pads), b.const("fill", np.array(-128, np.int8))],
                   "pad", mode="constant")
        attrs["pads"] = [0] * (2 * nd)
    b.node("MaxPool", [x], "maxpool", out=op.output, kernel_shape=list(op.kernel), **attrs)


def _avgpool(b: _Nodes) -> None:
    # The window sum is a depthwise ConvInteger with all-one weights (padding counts as
    # zeros), exact in int32 (the constructor bounds the window).
    op = b.op
    c = op.in_shapes[0][0]
    ones = np.ones((c, 1, *op.kernel), dtype=np.int8)
    acc = b.node("ConvInteger", [op.inputs[0], b.const("ones", ones)], "sum",
                 group=c, **_pool_attrs(op))
    m, s, shape = op.multiplier, op.shift, (1,)
    if m.size > 1:  # per window: (M, s) of its count of real positions, as constants
        count = K.window_counts(op)
        spatial = op.out_shape[1:]
        m, s, shape = m[count].ravel(), s[count].ravel(), (1, *spatial)
    b.requantize(b.i64(acc, "acc64"), m, s, K.INT8_MIN, K.INT8_MAX, shape)


def _add(b: _Nodes) -> None:
    op = b.op
    pa = b.node("Mul", [b.i64(op.inputs[0], "a64"),
                        b.const("ma", np.array(op.multiplier[0], dtype=np.int64))], "a_scaled")
    pb = b.node("Mul", [b.i64(op.inputs[1], "b64"),
                        b.const("mb", np.array(op.multiplier[1], dtype=np.int64))], "b_scaled")
    b.requantize(b.node("Add", [pa, pb], "sum"), None, op.shift, op.act_min, op.act_max)


def _mul(b: _Nodes) -> None:
    op = b.op
    p = b.node("Mul", [b.i64(op.inputs[0], "a64"), b.i64(op.inputs[1], "b64")], "product")
    b.requantize(p, op.multiplier, op.shift, op.act_min, op.act_max)


def _lut(b: _Nodes) -> None:
    op = b.op
    idx = b.node("Add", [b.i64(op.inputs[0], "x64"),
                         b.const("offset", np.array(128, dtype=np.int64))], "index")
    if op.table.shape[0] > 1:  # per channel: table row c starts at c * 256
        rows = (np.arange(op.table.shape[0], dtype=np.int64) * K.LUT_SIZE)
        idx = b.node("Add", [idx, b.const("rows", rows.reshape(_chan_shape(op, rows.size)))],
                     "row_index")
    b.node("Gather", [b.const("table", op.table.reshape(-1)), idx], "lookup",
           out=op.output, axis=0)


def _softmax(b: _Nodes) -> None:
    op = b.op
    x = b.i64(op.inputs[0], "x64")
    axes = b.const("axes", np.array([op.axis + 1], dtype=np.int64))
    m = b.node("ReduceMax", [x, axes], "max", keepdims=1)
    e = b.node("Gather", [b.const("exp", op.table.astype(np.int64)),
                          b.node("Sub", [m, x], "distance")], "exp_values", axis=0)
    total = b.node("ReduceSum", [e, axes], "total", keepdims=1)
    num = b.node("Add", [b.node("Mul", [e, b.const("k256", np.array(256, np.int64))],
                                "scaled"), total], "numerator")
    den = b.node("Mul", [total, b.const("k2", np.array(2, np.int64))], "denominator")
    q = b.node("Div", [num, den], "quotient")  # both positive: truncation is floor
    c = b.node("Clip", [q, b.const("lo", np.array(0, np.int64)),
                        b.const("hi", np.array(K.INT8_MAX, np.int64))], "clamped")
    b.node("Cast", [c], "output", out=op.output, to=TensorProto.INT8)


def _argmax(b: _Nodes) -> None:
    op = b.op
    x = b.node("Cast", [op.inputs[0]], "x32", to=TensorProto.INT32)
    a = b.node("ArgMax", [x], "argmax", axis=op.axis + 1, keepdims=0, select_last_index=0)
    _reshape_to(b, a, op.out_shape)


def _reshape_to(b: _Nodes, x: str, shape) -> None:
    target = b.const("shape", np.array([-1, *shape], dtype=np.int64))
    b.node("Reshape", [x, target], "reshape", out=b.op.output)


def _concat(b: _Nodes) -> None:
    b.node("Concat", list(b.op.inputs), "concat", out=b.op.output, axis=b.op.axis + 1)


def _transpose(b: _Nodes) -> None:
    b.node("Transpose", [b.op.inputs[0]], "transpose", out=b.op.output,
           perm=[0, *(p + 1 for p in b.op.perm)])


_WRITERS = {K.CONV: _conv, K.DENSE: _dense, K.MAXPOOL: _maxpool, K.AVGPOOL: _avgpool,
            K.ADD: _add, K.MUL: _mul, K.LUT: _lut, K.SOFTMAX: _softmax, K.ARGMAX: _argmax,
            K.CONCAT: _concat, K.TRANSPOSE: _transpose,
            K.RESHAPE: lambda b: _reshape_to(b, b.op.inputs[0], b.op.out_shape)}


def nodes(op: CpuOp) -> tuple[list[NodeProto], list[TensorProto]]:
    """The op as ONNX nodes reading `op.inputs` and writing `op.output` (batch first)."""
    b = _Nodes(op)
    _WRITERS[op.kind](b)
    return b.nodes, b.inits


def _elem_type(op: CpuOp) -> int:
    return TensorProto.INT64 if op.kind == K.ARGMAX else TensorProto.INT8


def model(seg: Segment) -> ModelProto:
    """A standalone ONNX model of a segment: inputs and outputs `(N, *shape)`."""
    shapes: dict[str, tuple[int, ...]] = {}
    producers: dict[str, CpuOp] = {}
    all_nodes: list[NodeProto] = []
    inits: list[TensorProto] = []
    for op in seg.ops:
        for t, s in zip(op.inputs, op.in_shapes, strict=True):
            shapes.setdefault(t, s)
        shapes[op.output] = op.out_shape
        producers[op.output] = op
        n, i = nodes(op)
        all_nodes += n
        inits += i
    inputs = [helper.make_tensor_value_info(t, TensorProto.INT8, [BATCH, *shapes[t]])
              for t in seg.inputs]
    outputs = [helper.make_tensor_value_info(t, _elem_type(producers[t]),
                                             [BATCH, *shapes[t]]) for t in seg.outputs]
    graph = helper.make_graph(all_nodes, seg.name, inputs, outputs, inits)
    return helper.make_model(graph, ir_version=IR_VERSION,
                             opset_imports=[helper.make_opsetid("", OPSET)],
                             producer_name="onnx2ai8x.cpu")


def run(seg: Segment, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run a segment's model with onnxruntime on a batch: feeds `(N, *shape)` int8."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    sess = ort.InferenceSession(model(seg).SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    outs = sess.run(list(seg.outputs), {t: np.asarray(feeds[t], dtype=np.int8)
                                        for t in seg.inputs})
    return dict(zip(seg.outputs, outs, strict=True))
