"""The CPU segments' float nodes as integer CPU operators (onnx2ai8x.cpu.ops), quantized
from the same calibration samples as the accelerator's layers (issue 28, item 1).

Every tensor a CPU layer writes gets one scale, max |x| / 127 over the calibration
samples (the accelerator's quantizer's `max` method); weights are quantized per output
channel to int8, the bias to int32 in the accumulator's units, and each layer's
rescaling from accumulator to output is an integer multiplier and shift
(`ops.requant_params`). Where the stem feeds the accelerator its last layer writes the
accelerator's own input units (the quantizer's input scale), so the accelerator sees the
values its input mapping would have given it; the head reads the accelerator's int8
output in its output scale.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import Ai8xError
from .graphs import graph_input, run_floats, shape_of

ACT_MAX = 127


@dataclass(frozen=True)
class TensorScales:
    """float per integer unit of each tensor, and each tensor's per-sample shape."""

    scale: dict
    shape: dict


def _attr(node, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            import onnx

            return onnx.helper.get_attribute_value(a)
    return default


def _unsupported(where: str, what: str, hint: str) -> Ai8xError:
    return Ai8xError("partition.cpu-op", where, f"the CPU cannot run this layer: {what}",
                     hint)


def _weights(model) -> dict:
    from onnx import numpy_helper

    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def _consts(model) -> dict:
    """Initializers and Constant nodes' values."""
    from onnx import numpy_helper

    vals = _weights(model)
    for n in model.graph.node:
        if n.op_type == "Constant":
            vals[n.output[0]] = numpy_helper.to_array(_attr(n, "value"))
    return vals


def per_channel(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 weights and their scale per output channel (axis 0)."""
    flat = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
    scale = np.where(flat > 0, flat / ACT_MAX, 1.0)
    q = np.clip(np.floor(w / scale.reshape(-1, *([1] * (w.ndim - 1))) + 0.5), -128, 127)
    return q.astype(np.int8), scale


def _requant_channels(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from ..cpu.ops import requant_params

    pairs = [requant_params(float(s)) for s in scales]
    return np.array([m for m, _ in pairs], np.int64), np.array([s for _, s in pairs],
                                                                np.int64)


def _clamp_for(act, s_y: float) -> tuple[int, int]:
    """The output clamp of an activation fused into the layer (None, Relu, Clip lo/hi)."""
    if act is None:
        return -128, 127
    lo, hi = act
    qlo = -128 if lo is None else max(-128, int(np.floor(lo / s_y + 0.5)))
    qhi = 127 if hi is None else min(127, int(np.floor(hi / s_y + 0.5)))
    return qlo, max(qlo, qhi)


PASS_THROUGH = frozenset({"Flatten", "Reshape", "Transpose", "MaxPool", "Squeeze",
                          "Unsqueeze", "Identity", "Dropout", "Resize", "Upsample",
                          "ReduceMax", "GlobalMaxPool",
                          # a quantized model's grid on a CPU tensor: the CPU keeps its
                          # own scale, the grid's range is a clamp (_op)
                          "QuantizeLinear", "DequantizeLinear"})
# Ops that only move values (no arithmetic): where the tensor they write has another
# scale than the one they read (a segment's output, fixed to the next accelerator
# part's input units), one requantizing lookup table follows them.
MOVERS = frozenset({"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Resize",
                    "Upsample"})
FUSED_ACT = frozenset({"Relu", "Clip"})


def calibrated_scales(model, nodes: list, x: np.ndarray, fixed: dict) -> dict:
    """Each tensor the nodes write: max |value| / 127 over the calibration samples
    (`x`, the model's input), unless `fixed` gives it; pass-through ops keep their
    input's scale (a reshape or max-pool changes no value)."""

    wanted = sorted({o for n in nodes for o in n.output} - set(fixed))
    values = run_floats(model, x, wanted) if wanted else {}
    scales = dict(fixed)
    for n in nodes:
        out = n.output[0]
        if out in fixed:
            continue
        if n.op_type in PASS_THROUGH and n.input[0] in scales:
            scales[out] = scales[n.input[0]]
            continue
        if n.op_type == "Softmax":  # the CPU softmax writes units of 1/128
            scales[out] = 1.0 / 128
            continue
        peak = float(np.max(np.abs(values[out]))) if values[out].size else 0.0
        scales[out] = peak / ACT_MAX if peak > 0 else 1.0 / ACT_MAX
    scales.setdefault(graph_input(model), _input_scale(x))
    return scales


def _input_scale(x: np.ndarray) -> float:
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    return peak / ACT_MAX if peak > 0 else 1.0 / ACT_MAX


def segment_ops(model, names: tuple[str, ...], scales: dict) -> list:
    """The CPU operators of the float nodes `names` (model order), activations that
    only follow a convolution or dense layer fused into its clamp."""
    by_name = {n.name: n for n in model.graph.node}
    # a Constant node is a parameter of its readers (_consts reads it), not an op
    nodes = [by_name[n] for n in names if by_name[n].op_type != "Constant"]
    readers: dict[str, int] = {}
    for n in model.graph.node:
        for i in n.input:
            readers[i] = readers.get(i, 0) + 1
    consts = _consts(model)
    ops: list = []
    k = 0
    while k < len(nodes):
        node = nodes[k]
        if node.op_type == "Constant" or not node.input:
            k += 1  # a constant (its value is in `consts`): nothing runs
            continue
        act, out, step, bias = None, node.output[0], 1, None

        if node.op_type == "MatMul" and _follows(nodes, k + step, out, ("Add",), readers) \
                and nodes[k + 1].input[1] in consts:  # tf2onnx's Dense: MatMul, then bias
            bias, out, step = consts[nodes[k + 1].input[1]], nodes[k + 1].output[0], 2
        if node.op_type in ("Conv", "Gemm", "MatMul") and \
                _follows(nodes, k + step, out, FUSED_ACT, readers):
            act, out = _activation(nodes[k + step], consts), nodes[k + step].output[0]
            step += 1
        if node.op_type in ("Conv", "Gemm", "MatMul"):
            ops.append(_weighted(model, node, out, act, scales, consts, bias))
        else:
            ops.extend(_op(model, node, out, act, scales, consts))
        k += step
    return ops


def _follows(nodes: list, k: int, out: str, op_types, readers: dict) -> bool:
    """nodes[k] is one of `op_types` and the only reader of tensor `out`."""
    nxt = nodes[k] if k < len(nodes) else None
    return nxt is not None and nxt.op_type in op_types and nxt.input[0] == out and \
        readers[out] == 1


def _activation(node, consts) -> tuple:
    if node.op_type == "Relu":
        return (0.0, None)
    lo = _attr(node, "min")
    hi = _attr(node, "max")
    if len(node.input) > 1 and node.input[1]:
        lo = float(consts[node.input[1]])
    if len(node.input) > 2 and node.input[2]:
        hi = float(consts[node.input[2]])
    return (lo, hi)


def _lut_fn(node):
    """The float function of a unary activation node, with its attributes."""
    from ..cpu.ops import ACTIVATIONS, leaky_relu

    op = node.op_type
    if op == "LeakyRelu":
        return leaky_relu(_attr(node, "alpha", 0.01))
    if op == "HardSigmoid":
        a, b = float(_attr(node, "alpha", 0.2)), float(_attr(node, "beta", 0.5))
        return lambda x: np.clip(a * x + b, 0.0, 1.0)
    if op == "HardSwish":
        return ACTIVATIONS["Hardswish"]
    if op == "Elu":
        a = float(_attr(node, "alpha", 1.0))
        return lambda x: np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0)) - 1))
    if op == "Gelu":
        return ACTIVATIONS["GELU"]
    if op in ("Sigmoid", "Tanh", "Relu", "Identity", "Dropout"):
        return ACTIVATIONS["Identity" if op == "Dropout" else op]
    return None


def _per_sample_axis(axis: int, rank: int) -> int:
    """An ONNX axis of the batched tensor as an axis of the per-sample shape."""
    axis = int(axis) % (rank + 1)
    if axis == 0:
        raise _unsupported("axis 0", "the operation works across the batch axis",
                           "operate on the per-sample axes")
    return axis - 1


def _op(model, node, out: str, act, scales: dict, consts: dict):
    """The CPU operators of one float node (its fused activation writing `out`)."""
    from ..cpu import ops

    op = node.op_type
    # the data input (a constant may come first: c - x, c * x)
    x = next((i for i in node.input if i and i not in consts), node.input[0])
    name = node.name
    shape = shape_of(model, x)
    if op in ("Clip",) or _lut_fn(node) is not None:
        if op == "Clip":
            lo, hi = _activation(node, consts)
            bounds = (-np.inf if lo is None else lo, np.inf if hi is None else hi)

            def fn(v):
                return np.clip(v, *bounds)
        else:
            fn = _lut_fn(node)
        table = ops.lut_table(fn, scales[x], scales[out])
        return [ops.lut(name, x, out, shape, table)]
    if op in MOVERS:
        moved = out if scales[x] == scales[out] else f"{out}/moved"
        found = _moved(model, node, x, moved, shape, consts)
        if moved != out:
            found.append(ops.lut(f"{name}/rescale", moved, out, shape_of(model, out),
                                 ops.requant_lut(scales[x], scales[out])))
        return found
    if op == "MaxPool":
        if _attr(node, "ceil_mode", 0):
            raise _unsupported(name, "ceil_mode", "export with ceil_mode=False")
        return [ops.maxpool(name, x, out, shape, _attr(node, "kernel_shape"),
                            strides=_attr(node, "strides", ()), pads=_attr(node, "pads", ()),
                            dilations=_attr(node, "dilations", ()))]
    if op in ("AveragePool", "GlobalAveragePool"):
        kernel = list(shape[1:]) if op == "GlobalAveragePool" else \
            list(_attr(node, "kernel_shape"))
        pads = _attr(node, "pads", ())
        if _attr(node, "ceil_mode", 0):
            raise _unsupported(name, "an average whose output size rounds up (ceil_mode)",
                               "export with ceil_mode=False")
        if any(pads) and not _attr(node, "count_include_pad", 0):
            # the average over the window's real positions only (ONNX's default)
            m, s = ops.avgpool_requant_per_count(int(np.prod(kernel)),
                                                 scales[x] / scales[out])
        else:
            m, s = ops.avgpool_requant(int(np.prod(kernel)), scales[x] / scales[out])
        return [ops.avgpool(name, x, out, shape, kernel, m, s,
                            strides=_attr(node, "strides", ()), pads=pads)]
    if op == "Softmax":
        return [ops.softmax(name, x, out, shape, scales[x],
                            axis=_per_sample_axis(_attr(node, "axis", -1), len(shape)))]
    if op == "ArgMax":
        return [ops.argmax(name, x, out, shape,
                           axis=_per_sample_axis(_attr(node, "axis", 0), len(shape)))]
    if op == "Add" and node.input[1] not in consts and node.input[0] not in consts:
        return [_add(node, out, act, scales, shape)]
    if op in ("QuantizeLinear", "DequantizeLinear"):
        return [_grid_op(node, x, out, shape, scales, consts)]
    if op in ("ReduceMean", "ReduceMax", "GlobalMaxPool"):
        return _reduce(model, node, out, scales, shape, consts)
    if op == "BatchNormalization" or (op in ("Add", "Sub", "Mul", "Div") and
                                      _one_const(node, consts)):
        return [_affine(model, node, out, scales, shape, consts)]
    if op == "Mul":
        return [_mul(model, node, out, scales, shape)]
    raise _unsupported(name, f"{op} has no CPU operator", "replace it with a supported "
                       "operation (convolution, dense, pooling, activation, softmax, ...)")


def _grid_op(node, x: str, out: str, shape, scales: dict, consts: dict):
    """A quantized model's QuantizeLinear / DequantizeLinear on a tensor the CPU
    computes: the CPU's int8 tensors carry their own scale (the value is what the
    float model's is), so a dequantize moves nothing and a quantize keeps only its
    range, a clamp to [s * (qmin - z), s * (qmax - z)] (a ReLU where that starts at 0,
    as onnxruntime's quantizer folds it); the rounding to the grid is the CPU's own."""
    from ..cpu import ops

    if node.op_type == "DequantizeLinear":
        return ops.reshape(node.name, x, out, shape, shape)
    scale = np.asarray(consts.get(node.input[1], np.nan), np.float64).reshape(-1)
    zero = np.asarray(consts[node.input[2]]) if len(node.input) > 2 and \
        node.input[2] in consts else np.zeros(1, np.uint8)
    if scale.size != 1 or not scale[0] > 0 or zero.size != 1:
        raise _unsupported(node.name, "a quantizer with per-channel or computed "
                           "parameters", "quantize activations per tensor")
    info = np.iinfo(zero.dtype)
    z = int(zero.reshape(-1)[0])
    lo, hi = scale[0] * (info.min - z), scale[0] * (info.max - z)
    table = ops.lut_table(lambda v: np.clip(v, lo, hi), scales[x], scales[out])
    return ops.lut(node.name, x, out, shape, table)


def offset_op(name: str, x: str, out: str, shape, offset, s_x: float, s_y: float):
    """y = x + offset[c] (channels first), written in scale `s_y`: the input offset an
    accelerator part's mapping adds (partition/build._to_part)."""
    return _channel_affine(name, x, out, shape, np.ones(shape[0]), offset, None, s_x, s_y)


def _channel_affine(name: str, x: str, out: str, shape, a, b, act, s_x: float,
                    s_y: float):
    from ..cpu import ops

    channels = shape[0]
    w = np.asarray(a, np.float64).reshape(channels, 1, *([1] * (len(shape) - 1)))
    wq, ws = per_channel(w)
    bq = np.floor(np.asarray(b, np.float64) / (s_x * ws) + 0.5)
    m, s = _requant_channels(s_x * ws / s_y)
    lo, hi = _clamp_for(act, s_y)
    return ops.conv(name, x, out, shape, wq, bq, m, s, group=channels,
                    act_min=lo, act_max=hi)


def _moved(model, node, x: str, out: str, shape, consts: dict) -> list:
    """The CPU operators of an op that only moves values (reshape, transpose, nearest
    upsampling), writing `out` in `x`'s scale."""
    from ..cpu import ops

    op, name = node.op_type, node.name
    if op == "Transpose":
        perm = list(_attr(node, "perm", list(reversed(range(len(shape) + 1)))))
        if perm[0] != 0:
            raise _unsupported(name, "a transpose that moves the batch axis",
                               "keep the batch axis first")
        return [ops.transpose(name, x, out, shape, [p - 1 for p in perm[1:]])]
    target = shape_of(model, node.output[0])
    if op in ("Resize", "Upsample"):
        return _upsampled(model, node, x, out, shape, target, consts)
    return [ops.reshape(name, x, out, shape, target)]


def _upsampled(model, node, x: str, out: str, shape, target, consts: dict) -> list:
    """Nearest upsampling by whole factors: each value repeated f times along each
    spatial axis, as (per axis) a reshape that opens a size-1 axis after it, a concat of
    f copies along that axis and a reshape that merges the two. Exact data movement; the
    node's own output on an index probe (onnxruntime) must be that repetition, which
    also decides the coordinate and rounding modes."""
    from ..cpu import ops

    name = node.name
    factors = [t // s if s and t % s == 0 else 0 for s, t in zip(shape, target, strict=True)] \
        if len(shape) == len(target) else []
    if not factors or 0 in factors or factors[0] != 1 or \
            not _repeats(model, node, shape, factors, consts):
        raise _unsupported(name, f"{node.op_type} from {list(shape)} to {list(target)} is "
                           "not a nearest upsampling by whole factors of the spatial axes",
                           "export mode='nearest' with whole scale factors (e.g. "
                           "nn.Upsample(scale_factor=2, mode='nearest'))")
    found, cur, src = [], tuple(shape), x
    for axis, f in enumerate(factors):
        if f == 1:
            continue
        opened = (*cur[:axis + 1], 1, *cur[axis + 1:])
        merged = (*cur[:axis], cur[axis] * f, *cur[axis + 1:])
        tag = f"{name}/repeat{axis}"
        last = merged == tuple(target)
        found.append(ops.reshape(f"{tag}/open", src, f"{tag}/opened", cur, opened))
        found.append(ops.concat(f"{tag}/copies", [f"{tag}/opened"] * f, f"{tag}/copies",
                                [opened] * f, axis=axis + 1))
        found.append(ops.reshape(f"{tag}/merge", f"{tag}/copies", out if last else tag,
                                 found[-1].out_shape, merged))
        cur, src = merged, tag
    return found


def _repeats(model, node, shape, factors, consts: dict) -> bool:
    """Whether `node` (a Resize or Upsample) maps an index probe of `shape` to its
    repetition by `factors` (onnxruntime runs the node alone, its constants with it)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    probe = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(1, *shape)
    want = probe
    for axis, f in enumerate(factors):
        want = np.repeat(want, f, axis=axis + 1)
    inits = [numpy_helper.from_array(np.asarray(consts[i]), i)
             for i in node.input[1:] if i and i in consts]
    if any(i and i not in consts for i in node.input[1:]):
        return False
    one = onnx.NodeProto()
    one.CopyFrom(node)
    graph = helper.make_graph(
        [one], "probe", [helper.make_tensor_value_info(node.input[0], TensorProto.FLOAT,
                                                       list(probe.shape))],
        [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)], inits)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                 13)
    try:
        sess = ort.InferenceSession(helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", opset)],
            ir_version=model.ir_version).SerializeToString(),
            providers=["CPUExecutionProvider"])
        got = sess.run(None, {node.input[0]: probe})[0]
    except Exception:  # noqa: BLE001 - onnxruntime's own errors: not a repetition
        return False
    return got.shape == want.shape and np.array_equal(got, want)


def _add(node, out: str, act, scales: dict, shape) -> object:
    from ..cpu import ops

    a, b = node.input[0], node.input[1]
    ra, rb = scales[a] / scales[out], scales[b] / scales[out]
    _, s = ops.requant_params(max(ra, rb))
    ma, mb = (int(np.floor(r * 2.0 ** s + 0.5)) for r in (ra, rb))
    return ops.add(node.name, a, b, out, shape, (ma, mb), s)


def _weighted(model, node, out: str, act, scales: dict, consts: dict, bias=None):
    """A convolution or dense layer: int8 weights per output channel, int32 bias,
    per-channel (M, s) from accumulator to the output's scale; the fused activation as
    the output clamp."""
    from ..cpu import ops

    op, x, name = node.op_type, node.input[0], node.name
    if node.input[1] not in consts:
        raise _unsupported(name, "its weights are not constant", "export constant weights")
    w = np.asarray(consts[node.input[1]], np.float64)
    if len(node.input) > 2 and node.input[2]:
        bias = consts.get(node.input[2])
    if op == "Gemm":
        if _attr(node, "transA", 0) or float(_attr(node, "alpha", 1.0)) != 1.0 or \
                float(_attr(node, "beta", 1.0)) != 1.0:
            raise _unsupported(name, "a Gemm with transA, alpha or beta",
                               "export a plain Linear layer")
        w = w if _attr(node, "transB", 0) else w.T
    elif op == "MatMul":
        w = w.T
    wq, ws = per_channel(w)
    s_x, s_y = scales[x], scales[out]
    b = np.zeros(w.shape[0]) if bias is None else np.asarray(bias, np.float64).reshape(-1)
    bq = np.floor(b / (s_x * ws) + 0.5)
    m, s = _requant_channels(s_x * ws / s_y)
    lo, hi = _clamp_for(act, s_y)
    in_shape = shape_of(model, x)
    if op != "Conv" and len(in_shape) != 1:
        raise _unsupported(name, f"a {op} over the last axis of a {len(in_shape) + 1}-D "
                           "tensor (the CPU's dense layer reads the whole flattened input)",
                           "flatten the input first (Flatten, then Linear)")
    if op == "Conv":
        if _attr(node, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise _unsupported(name, "automatic padding", "export explicit pads")
        return ops.conv(name, x, out, in_shape, wq, bq, m, s,
                        strides=_attr(node, "strides", ()), pads=_attr(node, "pads", ()),
                        dilations=_attr(node, "dilations", ()),
                        group=_attr(node, "group", 1), act_min=lo, act_max=hi)
    return ops.dense(name, x, out, in_shape, wq, bq, m, s, act_min=lo, act_max=hi)


def _reduce(model, node, out: str, scales: dict, shape, consts: dict) -> list:
    """A mean or maximum over spatial axes: an average or max pooling whose window spans
    them, then a reshape when the axes are dropped (keepdims 0)."""
    from ..cpu import ops

    name, x, rank = node.name, node.input[0], len(shape) + 1
    axes = _attr(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = consts.get(node.input[1])
    if node.op_type == "GlobalMaxPool" or axes is None:
        axes = range(2, rank) if node.op_type == "GlobalMaxPool" else range(rank)
    axes = sorted({int(a) % rank for a in np.asarray(axes).reshape(-1)})
    if not axes or axes[0] < 2:
        raise _unsupported(name, f"a {node.op_type} over axes {axes} (the batch or channel "
                           "axis)", "reduce over the spatial axes only (global pooling)")
    kernel = [shape[a - 1] if a in axes else 1 for a in range(2, rank)]
    pooled = tuple([shape[0], *[1 if a in axes else shape[a - 1] for a in range(2, rank)]])
    keep = _attr(node, "keepdims", 1) or node.op_type == "GlobalMaxPool"
    mid = out if keep else f"{out}/pooled"
    if node.op_type == "ReduceMean":
        m, s = ops.avgpool_requant(int(np.prod(kernel)), scales[x] / scales[out])
        pool = ops.avgpool(f"{name}/pool" if not keep else name, x, mid, shape, kernel, m, s,
                           strides=kernel)
    else:  # the maximum keeps the input's scale (PASS_THROUGH)
        pool = ops.maxpool(f"{name}/pool" if not keep else name, x, mid, shape, kernel,
                           strides=kernel)
    if keep:
        return [pool]
    return [pool, ops.reshape(name, mid, out, pooled, shape_of(model, out))]


def _one_const(node, consts: dict) -> bool:
    return (node.input[0] in consts) != (node.input[1] in consts)


def _channel_values(name: str, c, shape) -> np.ndarray:
    """A constant that is one value, or one per channel, of a (C, ...) tensor."""
    arr = np.asarray(c, np.float64)
    rank = len(shape) + 1
    full = (1,) * max(0, rank - arr.ndim) + arr.shape
    if arr.size == 1:
        return np.full(shape[0], float(arr.reshape(-1)[0]))
    if len(full) == rank and full[0] == 1 and full[1] == shape[0] and \
            all(d == 1 for d in full[2:]):
        return arr.reshape(-1)
    raise _unsupported(name, f"a constant of shape {tuple(arr.shape)} that is not one value "
                       f"per channel of a {(1, *shape)} tensor",
                       "use a scalar or a per-channel constant (shape (1, C, 1, 1))")


def _affine(model, node, out: str, scales: dict, shape, consts: dict):
    """x * k + b per channel (BatchNormalization that follows no convolution, or
    Add/Sub/Mul/Div with a constant: an input normalization) as a depthwise 1x1
    convolution: one int8 weight per channel, its scale per channel, so k is exact to
    8 bits and the rescaling to the output is the channel's multiplier and shift."""
    from ..cpu import ops

    op, name = node.op_type, node.name
    if op == "BatchNormalization":
        x = node.input[0]
        gamma, beta, mean, var = (np.asarray(consts[n], np.float64).reshape(-1)
                                  for n in node.input[1:5])
        k = gamma / np.sqrt(var + float(_attr(node, "epsilon", 1e-5)))
        b = beta - mean * k
    else:
        first_const = node.input[0] in consts
        x = node.input[1] if first_const else node.input[0]
        c = _channel_values(name, consts[node.input[0 if first_const else 1]], shape)
        if op == "Div" and (first_const or np.any(c == 0)):
            raise _unsupported(name, "a division by data or by zero",
                               "divide only by non-zero constants")
        one, zero = np.ones_like(c), np.zeros_like(c)
        if op == "Add":
            k, b = one, c
        elif op == "Mul":
            k, b = c, zero
        elif op == "Div":
            k, b = 1.0 / c, zero
        else:  # Sub: x - c, or c - x
            k, b = (-one, c) if first_const else (one, -c)
    w = k.reshape(-1, 1, *([1] * (len(shape) - 1)))
    wq, ws = per_channel(w)
    s_x, s_y = scales[x], scales[out]
    bq = np.floor(b / (s_x * ws) + 0.5)
    m, s = _requant_channels(s_x * ws / s_y)
    return ops.conv(name, x, out, shape, wq, bq, m, s, group=shape[0])


def _mul(model, node, out: str, scales: dict, shape):
    """The product of two tensors (a gate): a * b * M / 2**s, b may broadcast."""
    from ..cpu import ops

    a, b = node.input[0], node.input[1]
    b_shape = shape_of(model, b)
    if len(b_shape) != len(shape):
        raise _unsupported(node.name, f"a product of tensors of shapes {shape} and "
                           f"{b_shape}", "multiply tensors of the same rank")
    m, s = ops.requant_params(scales[a] * scales[b] / scales[out])
    return ops.mul(node.name, a, b, out, shape, m, s, b_shape=b_shape)
