"""Quantized ONNX (onnxruntime's QDQ and QOperator formats, Brevitas' QCDQ) -> float.

A quantized model says the same network as its float source plus, per tensor, the scale
and zero point its integers have:

* QDQ (onnxruntime `quantize_static`, Brevitas `export_onnx_qcdq`): weights are integer
  initializers read through `DequantizeLinear`; every activation passes a
  `QuantizeLinear` -> [`Clip` of the integers, Brevitas' narrow or < 8-bit ranges] ->
  `DequantizeLinear` chain; a ReLU may be left out where the quantized range starting at
  zero does its work (onnxruntime removes it).
* QOperator (onnxruntime): `QLinearConv`, `QLinearMatMul`, `QGemm`, `QLinearAdd`, ...
  read and write integers directly; `MaxPool`, `Flatten`, `Reshape` run on integers.

The rewrite (exact: the float model computes what the quantized one does, except the
rounding to each tensor's integer grid, which the quantizer restores): QOperator nodes
become `DequantizeLinear` -> float op -> `QuantizeLinear`; weight `DequantizeLinear`s
fold into float initializers (their integers are already on a grid, (q - zp) * scale is
exact in float32 for power-of-two scales); each activation chain becomes the clamp its
integer range implies, `Clip(scale * (qmin - zp), scale * (qmax - zp))`, written only
where it is not already implied (a clamp starting at zero is the ReLU the quantizer
folded in; a clamp below zero is the 8-bit output clamp the walker recognizes after a
convolution and the hardware applies to every layer anyway). Integer ops between a
quantize and a dequantize (MaxPool, Flatten, ...) run on the float value instead: they
commute with a monotonic quantizer.

Every node is accounted for: a quantize/dequantize node this module cannot place (an
integer tensor read by an op it does not know, a requantization inside a chain,
per-channel activation scales, dynamic quantization) is refused with the node's name.

Facts for the quantizer (`Recognition.facts`):

* "activation_quant": float tensor -> (scale, zero_point, qmin, qmax) of its integers;
* "input_quant": the same for the model input, in the input's own units (how the
  source maps it to integers; the first grid on its path when it passes scalings by
  constants, transposes or poolings first);
* "input_scale": the input scale when it is the accelerator's mapping (zero point 0,
  an int8 range);
* "weight_quant": float weight name -> (scales, zero_points) of its integers;
* "pow2": every scale a power of two, every zero point 0 and every range within int8:
  the accelerator's own numbers (integers and shifts are taken as they are).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import Ai8xError
from .base import Recognition

DIALECT = "qdq"
_DOMAINS = ("", "ai.onnx", "com.microsoft")
_Q, _DQ = "QuantizeLinear", "DequantizeLinear"
# Ops that move integers without arithmetic: they commute with a monotonic quantizer,
# so they run on the float value (same scale and zero point on both sides).
_MOVERS = ("MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze",
           "Identity", "Dropout", "Tile", "Expand", "DepthToSpace", "SpaceToDepth",
           "Resize")  # (Resize: nearest only, checked where it is met)
# Ops whose output lies within the bounds of their (first) input.
_BOUNDED = (*_MOVERS, "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "ReduceMean")
_TAIL = ("Softmax", "LogSoftmax", "Sigmoid")
_DYNAMIC = ("DynamicQuantizeLinear", "ConvInteger", "MatMulInteger",
            "DynamicQuantizeMatMul", "MatMulIntegerToFloat")
_QOPERATOR = ("QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd", "QLinearMul",
              "QLinearGlobalAveragePool", "QLinearAveragePool", "QLinearSigmoid",
              "QLinearLeakyRelu", "QLinearSoftmax", "QLinearConcat")
OPS = frozenset((_Q, _DQ, *_QOPERATOR))
_INT_RANGES = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127),
               np.dtype(np.uint16): (0, 65535), np.dtype(np.int16): (-32768, 32767),
               np.dtype(np.int32): (-(1 << 31), (1 << 31) - 1)}


def _fail(code: str, node, message: str, hint: str) -> Ai8xError:
    where = f"node {node.name or node.output[0]} ({node.op_type})" if node is not None \
        else "model"
    return Ai8xError(f"float.{code}", where, message, hint)


@dataclass(frozen=True)
class QInfo:
    """An integer tensor: the float tensor it quantizes and its grid."""

    source: str  # the float tensor whose value the integers hold
    scale: float
    zero: int
    qmin: int
    qmax: int

    @property
    def low(self) -> float:
        return self.scale * (self.qmin - self.zero)

    @property
    def high(self) -> float:
        return self.scale * (self.qmax - self.zero)

    def fact(self) -> tuple[float, int, int, int]:
        return (self.scale, self.zero, self.qmin, self.qmax)


def is_pow2(v: float) -> bool:
    if not v > 0 or not math.isfinite(v):
        return False
    k = round(math.log2(v))
    return abs(v - 2.0 ** k) <= 1e-9 * v


def _attr(node, name: str, default=None):
    import onnx

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _uses_quantized_ops(model) -> bool:
    return any(n.op_type in OPS or n.op_type in _DYNAMIC for n in model.graph.node)


def recognize(model) -> Recognition | None:
    """The float form of a QDQ/QCDQ/QOperator model, or None for a model without
    quantize/dequantize nodes."""
    import onnx

    if not _uses_quantized_ops(model):
        return None
    from .qoperator import to_qdq

    for node in model.graph.node:
        if node.op_type in _DYNAMIC:
            raise _fail("qdq-dynamic", node, "a dynamically quantized model (its "
                        "activation scales are computed at run time)",
                        "quantize with onnxruntime's quantize_static (QDQ or QOperator "
                        "format), not quantize_dynamic")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rewrites: list[str] = []
    qop = to_qdq(out)
    if qop:
        rewrites.append(f"{len(qop)} QOperator node(s) ({', '.join(sorted(set(qop)))}) = "
                        "DequantizeLinear -> the float op -> QuantizeLinear")
    rw = _Rewriter(out)
    rw.run()
    rewrites.extend(rw.summary())
    return Recognition(model=rw.model, dialect=DIALECT, rewrites=tuple(rewrites),
                       facts=rw.facts())


class _Rewriter:
    """One pass in graph order over a QDQ model (QOperator nodes already expanded)."""

    def __init__(self, model) -> None:
        from onnx import numpy_helper

        self.model = model
        self.graph = model.graph
        self.consts: dict[str, np.ndarray] = {
            i.name: numpy_helper.to_array(i) for i in self.graph.initializer}
        self.quant: dict[str, QInfo] = {}  # integer tensor -> its grid
        self.rename: dict[str, str] = {}  # tensor -> the tensor to read instead
        self.bounds: dict[str, tuple[float, float]] = {}
        self.clamped: dict[tuple[str, float, float], str] = {}
        self.nodes: list = []
        self.activations: dict[str, tuple] = {}
        self.weights: dict[str, tuple] = {}
        self.input_quant: tuple | None = None
        self.counts = {"weights": 0, "clips": 0, "relus": 0, "removed": 0, "moved": 0}
        self.inputs = {i.name for i in self.graph.input} - set(self.consts)
        # tensors that are the input scaled by a positive constant or moved (Keras'
        # Rescaling, tf2onnx's Transpose): tensor -> the gain from the model input
        self.input_like: dict[str, float] = dict.fromkeys(self.inputs, 1.0)
        self.input_grids: set[tuple] = set()
        self.input_averaged = False
        self.new_consts: dict[str, np.ndarray] = {}
        self.readers: dict[str, list[str]] = {}
        for node in self.graph.node:
            for name in node.input:
                self.readers.setdefault(name, []).append(node.op_type)
        for out in self.graph.output:
            self.readers.setdefault(out.name, []).append("")
        self.before_relu: dict[str, QInfo] = {}  # a dequantized tensor a ReLU reads
        self.relu_grid: dict[str, QInfo] = {}  # a ReLU's output -> its input's grid
        self.rerounded: list[str] = []  # activations rounded twice (not exact)
        self.emitted: set[str] = set()  # the clamps written
        self.tail: set[str] = set()  # outputs of ops the CPU finishes with

    # -- the walk ------------------------------------------------------------------------
    def run(self) -> None:
        for node in list(self.graph.node):
            for k, name in enumerate(node.input):
                if name in self.rename:
                    node.input[k] = self.rename[name]
            try:
                self.step(node)
            except (ValueError, IndexError, TypeError, KeyError) as exc:
                # a damaged or inconsistent quantizer (parameter shapes that do not
                # broadcast, missing inputs, unknown types): its name, not a traceback
                raise _fail("qdq-params", node, "cannot read the quantization parameters "
                            f"({type(exc).__name__}: {str(exc)[:160]})",
                            "check the model with onnx.checker and onnxruntime; scales "
                            "and zero points must be constants of matching shapes") from None
        self.finish()

    def step(self, node) -> None:
        handler = {_Q: self.quantize, _DQ: self.dequantize, "Clip": self.clip}.get(
            node.op_type)
        if len(node.input) < {_Q: 2, _DQ: 2}.get(node.op_type, 0):
            raise _fail("qdq-params", node, f"{node.op_type} with {len(node.input)} "
                        "input(s)", "give it a scale (and a zero point)")
        if node.op_type == "Constant" and not node.input:
            self.constant(node)
        elif handler is not None and handler(node):
            return
        elif any(i in self.quant for i in node.input if i):
            self.mover(node)
        else:
            self.keep(node)

    def keep(self, node) -> None:
        self._input_like(node)
        if node.op_type in _TAIL:
            self.tail.add(node.output[0])
        if node.op_type == "Relu" and node.input[0] in self.before_relu:
            self.relu_grid[node.output[0]] = self.before_relu[node.input[0]]
        self.nodes.append(node)
        self._bound(node)

    def _input_like(self, node) -> None:
        if not node.input or node.input[0] not in self.input_like or \
                any(i not in self.consts for i in node.input[1:] if i):
            return
        gain = self.input_like[node.input[0]]
        if node.op_type in ("Mul", "Div") and len(node.input) == 2:
            c = np.asarray(self.consts[node.input[1]], np.float64)
            if c.size != 1 or not float(c.reshape(-1)[0]) > 0:
                return
            k = float(c.reshape(-1)[0])
            self.input_like[node.output[0]] = gain * k if node.op_type == "Mul" \
                else gain / k
        elif node.op_type in ("Transpose", "Identity", "Reshape", "Flatten", "MaxPool"):
            self.input_like[node.output[0]] = gain
        elif node.op_type in ("AveragePool", "GlobalAveragePool"):
            # the accelerator quantizes the input before it averages (in layer 0):
            # a grid stated after the average is only the input's range
            self.input_like[node.output[0]] = gain
            self.input_averaged = True

    def constant(self, node) -> None:
        from onnx import numpy_helper

        value = _attr(node, "value")
        if value is not None:
            self.consts[node.output[0]] = numpy_helper.to_array(value)
        self.keep(node)

    def _const(self, name: str, node, what: str) -> np.ndarray:
        if not name:
            return None
        if name not in self.consts:
            raise _fail("qdq-scale", node, f"the {what} {name} is computed, not constant",
                        "export the quantized model with constant scales and zero points")
        return self.consts[name]

    def _params(self, node):
        """Scale and zero point; a missing zero point is 0 of the integer type (for
        QuantizeLinear uint8 unless `output_dtype` says otherwise)."""
        scale = np.asarray(self._const(node.input[1], node, "scale"), np.float64)
        zp = self._const(node.input[2], node, "zero point") if len(node.input) > 2 \
            else None
        if zp is None:
            src = node.input[0]
            if node.op_type == _Q:
                dtype = _output_dtype(node)
            elif src in self.consts:
                dtype = self.consts[src].dtype
            else:
                info = self.quant.get(src)
                dtype = np.int8 if info is not None and info.qmin < 0 else np.uint8
            zp = np.zeros(scale.shape, dtype)
        if scale.size == 0 or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise _fail("qdq-params", node, "a scale that is empty, not finite or not "
                        "positive", "quantize with positive scales")
        return scale, np.asarray(zp)

    # -- quantize / dequantize -----------------------------------------------------------
    def quantize(self, node) -> bool:
        scale, zp = self._params(node)
        src = node.input[0]
        if src in self.consts:
            self.consts[node.output[0]] = _quantize(self.consts[src], scale, zp,
                                                    int(_attr(node, "axis", 1)))
            self.counts["removed"] += 1
            return True
        if scale.size != 1 or zp.size != 1:
            raise _fail("qdq-per-channel", node, "per-channel activation scales",
                        "quantize activations per tensor (weights may be per channel)")
        if zp.dtype not in _INT_RANGES:
            raise _fail("qdq-type", node, f"quantization to {zp.dtype}",
                        "quantize to 8 or 16-bit integers")
        qmin, qmax = _INT_RANGES[zp.dtype]
        self.quant[node.output[0]] = QInfo(src, float(scale.reshape(-1)[0]),
                                           int(zp.reshape(-1)[0]), qmin, qmax)
        before = self.relu_grid.get(src)
        if before is not None and not math.isclose(before.scale, float(scale.reshape(-1)[0]),
                                                   rel_tol=1e-6):
            # rounded on the convolution's grid, then again on the ReLU's: one
            # rounding on the hardware
            self.rerounded.append(node.name or node.output[0])
        if src in self.input_like:
            gain = self.input_like[src]
            grid = (float(scale.reshape(-1)[0]) / gain, *self.quant[node.output[0]].fact()[1:])
            # the grid nearest the raw input is the input mapping (later grids on the
            # input's path, after a rescaling or a pooling, only narrow it)
            self.input_quant = self.input_quant or grid
            self.input_grids.add(grid)
        self.counts["removed"] += 1
        return True

    def clip(self, node) -> bool:
        """A Clip of integers (Brevitas' narrow or fewer-bit range): the grid narrows."""
        src = node.input[0]
        bounds = [node.input[k] if len(node.input) > k else "" for k in (1, 2)]
        if src in self.consts and all(not n or n in self.consts for n in bounds):
            v = self.consts[src]
            lo, hi = (self.consts[n] if n else None for n in bounds)
            self.consts[node.output[0]] = np.clip(
                v, v.min() if lo is None else lo, v.max() if hi is None else hi
            ).astype(v.dtype)
            self.counts["removed"] += 1
            return True
        if src not in self.quant:
            return False
        info = self.quant[src]
        lo = self._const(node.input[1], node, "minimum") if len(node.input) > 1 else None
        hi = self._const(node.input[2], node, "maximum") if len(node.input) > 2 else None
        qmin = info.qmin if lo is None else max(info.qmin, int(np.asarray(lo).item()))
        qmax = info.qmax if hi is None else min(info.qmax, int(np.asarray(hi).item()))
        self.quant[node.output[0]] = QInfo(info.source, info.scale, info.zero, qmin, qmax)
        self.counts["removed"] += 1
        return True

    def dequantize(self, node) -> bool:
        scale, zp = self._params(node)
        src = node.input[0]
        if src in self.consts:
            self._weight(node, self.consts[src], scale, zp)
            return True
        if src not in self.quant:
            raise _fail("qdq-orphan", node, f"DequantizeLinear of {src}, which no "
                        "QuantizeLinear of this model wrote",
                        "export the whole quantized graph (QuantizeLinear before every "
                        "DequantizeLinear of an activation)")
        info = self.quant[src]
        if scale.size != 1 or not math.isclose(float(scale.reshape(-1)[0]), info.scale,
                                               rel_tol=1e-6) or \
                int(zp.reshape(-1)[0]) != info.zero:
            raise _fail("qdq-requantize", node, "the DequantizeLinear's scale or zero "
                        "point differs from its QuantizeLinear's",
                        "quantize and dequantize each tensor with one scale")
        self.counts["removed"] += 1
        self.activations[node.output[0]] = info.fact()
        value = self._value(node, info, node.output[0])
        if value != node.output[0]:
            self._alias(node.output[0], value,
                        sole=self.readers.get(node.input[0]) == [_DQ] and
                        self.readers.get(node.output[0]) == [""])
        return True

    def _weight(self, node, q: np.ndarray, scale, zp) -> None:
        axis = int(_attr(node, "axis", 1))
        w = _dequantize(q, scale, zp, axis)
        self.consts[node.output[0]] = w
        self.new_consts[node.output[0]] = w
        self.weights[node.output[0]] = (tuple(float(s) for s in scale.reshape(-1)),
                                        tuple(int(z) for z in zp.reshape(-1)))
        self.counts["weights"] += 1

    def _value(self, node, info: QInfo, want: str, clip_name: str = "") -> str:
        """The float tensor holding the dequantized value of `info`: its source clamped
        to the grid's range (a Clip named `want`), or the source itself where the clamp
        is implied (by the source's bounds, the input mapping, or the hardware's 8-bit
        output clamp)."""
        src = info.source
        self.activations.setdefault(src, info.fact())
        lo0, hi0 = self.bounds.get(src, (-math.inf, math.inf))
        lo, hi = max(info.low, lo0), min(info.high, hi0)
        need = info.low > lo0 or info.high < hi0
        if src in self.input_like:
            # the input mapping (float -> int8) clamps the input: a clamp needs no layer
            self.bounds[src] = (max(info.low, lo0), min(info.high, hi0))
            return src
        if src in self.tail or not need or (lo < 0 and not self._eight_bit(info)):
            # (the CPU computes a final Softmax/Sigmoid in float: its grid is not ours)
            return src
        if lo < 0 and src in self.emitted:
            # quantized again on another grid (Brevitas requantizes an Add's operands
            # to the Add's input scale): one rounding and one 8-bit clamp per layer on
            # the accelerator, so the first clamp stands and the model is requantized
            self.rerounded.append(node.name or want)
            return src
        if lo < 0 and self.readers.get(want) and \
                all(op == "Relu" for op in self.readers[want]):
            # the 8-bit clamp right before a ReLU: the ReLU's own grid clamps (the
            # layer computes relu(clamp(x)) = clamp(relu(x)) on one grid)
            self.before_relu[src] = info
            return src
        key = (src, lo, hi)
        if key not in self.clamped:
            self._emit_clip(clip_name or node.name or want, src, want, lo, hi)
            self.clamped[key] = want
            self.activations[want] = info.fact()
            self.counts["relus" if lo == 0.0 and info.low > lo0 else "clips"] += 1
        return self.clamped[key]

    @staticmethod
    def _eight_bit(info: QInfo) -> bool:
        return info.qmin - info.zero == -128 and info.qmax - info.zero == 127

    def _emit_clip(self, name: str, src: str, out: str, lo: float, hi: float) -> None:
        import onnx

        names = []
        for tag, v in (("min", lo), ("max", hi)):
            bound = f"{out}__qdq_{tag}"
            self.new_consts[bound] = np.asarray(v, np.float32)
            self.consts[bound] = self.new_consts[bound]
            names.append(bound)
        clip = onnx.helper.make_node("Clip", [src, *names], [out], name=name)
        self.emitted.add(out)
        self.nodes.append(clip)
        self.bounds[out] = (lo, hi)

    def _alias(self, out: str, src: str, sole: bool = False) -> None:
        """Readers of `out` read `src`; a model output keeps its name (`sole`: the
        chain src -> Q -> DQ -> out is read by nothing else, so src's producer can
        write `out` itself)."""
        outputs = {o.name for o in self.graph.output}
        producer = next((n for n in reversed(self.nodes) if src in n.output), None)
        if out in outputs and sole and producer is not None and \
                self.readers.get(src) == [_Q] and src not in outputs:
            # the model's output is its producer's own (a final Softmax stays last)
            producer.output[list(producer.output).index(src)] = out
            self.bounds[out] = self.bounds.get(src, (-math.inf, math.inf))
            if src in self.tail:
                self.tail.add(out)
            self.rename[src] = out
            return
        if out in outputs:
            import onnx

            self.nodes.append(onnx.helper.make_node("Identity", [src], [out],
                                                    name=f"{out}__qdq"))
            self.bounds[out] = self.bounds.get(src, (-math.inf, math.inf))
        else:
            self.rename[out] = src

    # -- integers through ops that only move them ---------------------------------------
    def mover(self, node) -> None:
        data = [i for i in node.input if i in self.quant]
        mode = next((a.s for a in node.attribute if a.name == "mode"), b"nearest")
        if node.op_type not in _MOVERS or data != [node.input[0]] or \
                (node.op_type == "Resize" and mode not in (b"nearest", "nearest")):
            raise _fail("qdq-integer-op", node, f"{node.op_type} reads the quantized "
                        f"integers {data[0]}", "dequantize (DequantizeLinear) before "
                        "arithmetic; only operations that move values (MaxPool, Flatten, "
                        "Reshape, Transpose, Squeeze, Unsqueeze, Tile, Expand, "
                        "DepthToSpace, nearest Resize) may run on integers")
        info = self.quant[node.input[0]]
        node.input[0] = self._value(node, info, f"{node.input[0]}__value",
                                    f"{node.name or node.output[0]}__clamp")
        out = node.output[0]
        node.output[0] = f"{out}__float"
        self.nodes.append(node)
        self._bound(node)
        self.quant[out] = QInfo(node.output[0], info.scale, info.zero, info.qmin,
                                info.qmax)
        self.counts["moved"] += 1

    def _bound(self, node) -> None:
        if not node.input or not node.output:
            return
        first = self.bounds.get(node.input[0], (-math.inf, math.inf))
        if node.op_type in _BOUNDED:
            self.bounds[node.output[0]] = first
        elif node.op_type == "Relu":
            self.bounds[node.output[0]] = (max(0.0, first[0]), max(0.0, first[1]))
        elif node.op_type == "Clip":
            lo, hi = (self.consts.get(node.input[k]) if len(node.input) > k else None
                      for k in (1, 2))
            self.bounds[node.output[0]] = (
                first[0] if lo is None else max(first[0], float(np.asarray(lo).item())),
                first[1] if hi is None else min(first[1], float(np.asarray(hi).item())))
        elif node.op_type == "Concat":
            parts = [self.bounds.get(i, (-math.inf, math.inf)) for i in node.input]
            self.bounds[node.output[0]] = (min(p[0] for p in parts),
                                           max(p[1] for p in parts))

    # -- the result ----------------------------------------------------------------------
    def finish(self) -> None:
        from onnx import numpy_helper

        for out in self.graph.output:
            if out.name in self.quant or out.name in self.rename:
                raise _fail("qdq-output", None, f"the model output {out.name} holds "
                            "quantized integers", "end the model with DequantizeLinear")
        used = {i for n in self.nodes for i in n.input if i}
        used |= {o.name for o in self.graph.output}
        inits = [i for i in self.graph.initializer if i.name in used and
                 i.name not in self.new_consts]
        for name in sorted(self.new_consts):
            if name in used:
                arr = self.new_consts[name]
                inits.append(numpy_helper.from_array(
                    arr.astype(np.float32) if arr.dtype.kind == "f" else arr, name))
        del self.graph.initializer[:]
        self.graph.initializer.extend(inits)
        del self.graph.node[:]
        self.graph.node.extend(self.nodes)
        # inputs listed among the initializers by older exporters
        keep = [i for i in self.graph.input if i.name in self.inputs or i.name in used]
        del self.graph.input[:]
        self.graph.input.extend(keep)
        del self.graph.value_info[:]

    def not_hardware(self) -> list[str]:
        """Why the model's numbers are not the accelerator's (empty when they are)."""
        acts = list(self.activations.values())
        if self.input_quant is not None:
            acts.append(self.input_quant)
        why = []
        for what, bad in (
                ("activation scale(s) not a power of two", [a for a in acts
                                                            if not is_pow2(a[0])]),
                ("activation zero point(s) not 0", [a for a in acts if a[1] != 0]),
                ("activation range(s) other than the accelerator's -128..127 or "
                 "0..127 (e.g. uint8 0..255, or fewer bits)",
                 [a for a in acts if a[1] == 0 and (a[2] not in (-128, 0) or a[3] != 127)]),
                ("weight scale(s) not a power of two",
                 [w for w in self.weights.values() if not all(map(is_pow2, w[0]))]),
                ("weight zero point(s) not 0", [w for w in self.weights.values()
                                                if any(w[1])]),
                ("weight(s) with per-channel scales (one shift per layer)",
                 [w for w in self.weights.values() if len(set(w[0])) > 1])):
            if bad:
                why.append(f"{len(bad)} {what}")
        if self.input_quant is None:
            why.append("the input is not quantized (no input scale)")
        if self.input_averaged:
            why.append("the input is quantized only after an average pooling")
        if len(self.input_grids) > 1:
            why.append(f"the input is quantized on {len(self.input_grids)} grids")
        if self.rerounded:
            why.append(f"{len(self.rerounded)} activation(s) quantized twice on different "
                       f"grids ({', '.join(self.rerounded[:3])})")
        return why

    def pow2(self) -> bool:
        return bool(self.activations) and not self.not_hardware()

    def facts(self) -> dict:
        facts = {"activation_quant": dict(self.activations),
                 "weight_quant": dict(self.weights), "pow2": self.pow2()}
        if self.input_quant is not None:
            facts["input_quant"] = self.input_quant
            s, z, lo, hi = self.input_quant
            if z == 0 and lo in (-128, 0) and hi == 127:
                facts["input_scale"] = s
        return facts

    def summary(self) -> list[str]:
        c = self.counts
        lines = [f"{c['weights']} weight DequantizeLinear(s) folded into float weights",
                 f"{c['removed']} QuantizeLinear/Clip/DequantizeLinear node(s) on "
                 f"activations removed: {c['relus']} range(s) starting at zero = a ReLU "
                 f"(Clip(0, max)), {c['clips']} = the 8-bit output clamp, the others "
                 "implied by the hardware's own clamp"]
        if c["moved"]:
            lines.append(f"{c['moved']} integer MaxPool/Flatten/Reshape node(s) run on "
                         "the float value (they commute with the quantizer)")
        lines.append("scales: powers of two, zero points 0, int8 ranges" if self.pow2()
                     else
                     "scales: not the accelerator's numbers, requantized to power-of-two "
                     f"shifts: {'; '.join(self.not_hardware())}")
        return lines


def _output_dtype(node) -> np.dtype:
    from onnx import helper

    to = _attr(node, "output_dtype")
    return np.dtype(helper.tensor_dtype_to_np_dtype(to)) if to else np.dtype(np.uint8)


def _broadcast(param: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    if param.size == 1 or ndim == 0:
        return param.reshape(()) if param.size == 1 else param
    shape = [1] * ndim
    shape[axis % ndim] = param.size
    return param.reshape(shape)


def _quantize(x: np.ndarray, scale, zp, axis: int) -> np.ndarray:
    """QuantizeLinear of a constant (round half to even, as ONNX specifies)."""
    lo, hi = _INT_RANGES.get(zp.dtype, (-128, 127))
    s = _broadcast(np.asarray(scale, np.float32), x.ndim, axis)
    z = _broadcast(zp.astype(np.int64), x.ndim, axis)
    q = np.rint(x.astype(np.float32) / s).astype(np.int64) + z
    return np.clip(q, lo, hi).astype(zp.dtype)


def _dequantize(q: np.ndarray, scale, zp, axis: int) -> np.ndarray:
    """DequantizeLinear of a constant, in float32 as onnxruntime computes it."""
    s = _broadcast(np.asarray(scale, np.float32), q.ndim, axis)
    z = _broadcast(np.asarray(zp).astype(np.int64), q.ndim, axis)
    return ((q.astype(np.int64) - z).astype(np.float32) * s).astype(np.float32)


__all__ = ["DIALECT", "OPS", "QInfo", "is_pow2", "recognize"]
